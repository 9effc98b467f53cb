"""Two more kinds of question for the synthetic recall benchmark (bench/recall_data.py).

"several": three things the user tells in three different sessions, and one question that
needs all three ("Which instruments have I been playing lately?"), in words that share little
with some of them. Recall is scored on the share of the three it finds.
"advice": the user asks for something and the assistant answers; the later question asks
what the assistant said ("Which board game did you recommend?"): the assistant's turn is
the evidence.

Written before any ranking was measured on them.
"""

# ruff: noqa: E501 - the data tables keep one entry per line, however long

# fact A | fact B | fact C | question
SEVERAL = """
The plumber came round and fixed the dripping kitchen tap.|The plumber was back to unblock the shower drain, hair everywhere.|Had the plumber replace the old radiator valves in the bedroom.|What has the plumber done in our flat?
I picked up a second-hand ukulele at the flea market on Sunday.|My first drum lesson was deafening but so much fun.|I dusted off my old violin and managed a few scales.|Which musical instruments have I been playing lately?
I sprained my thumb bouldering, it is taped up now.|Pulled my hamstring sprinting for the bus this morning.|Dropped a pan on my foot, the big toe is purple.|What injuries have I picked up recently?
My colleagues surprised me with a bonsai tree for my birthday.|Mum sent me a hand-knitted scarf in the post, bright orange.|Farah gave me a fountain pen as a thank-you for helping her move.|Which presents have people given me?
We watched a family of otters by the river on our walk.|A heron landed on our balcony railing this morning!|Saw a fox trotting across the car park at midnight.|What wild animals have I spotted?
I lost my umbrella on the tram again.|Left my reading glasses at the dentist's, I have to go back for them.|I forgot my gym bag on the train, everything was in it.|What have I left behind or lost?
Our washing machine broke down mid-cycle, water everywhere.|The fridge stopped cooling overnight, had to throw away the milk.|The toaster died with a bang and a puff of smoke.|Which household appliances have broken on us?
I signed up for an evening course in bookkeeping.|Started an online class on Python for beginners.|Enrolled in a first aid course run by the Red Cross.|Which courses have I signed up for?
Got a parking ticket outside the bakery, forty euros.|A speed camera flashed me on the ring road, a fine is probably coming.|The library charged me a late fee for three overdue books.|What fines have I had to pay?
Our neighbour's new puppy howls all night.|The upstairs flat is drilling at seven in the morning every day.|Someone downstairs plays the trombone badly every evening.|What noise problems do I have at home?
I tried a Georgian restaurant last night, the khachapuri was amazing.|Had Ethiopian food for the first time, eating with injera is fun.|We found a tiny Peruvian place that does great ceviche.|Which new cuisines have I been trying out?
I ran a 10k charity race for the children's hospital.|Baked forty cupcakes for the school fundraiser.|Spent Saturday picking up litter on the beach with a volunteer group.|What have I done for good causes?
"""

# the user asks | the assistant answers | question
ADVICE = """
Can you suggest a board game for four people?|Try Wingspan: it plays well with four and nobody gets shouted at.|Which board game did you recommend?
What could I read on the plane, something light?|Take The Hundred-Year-Old Man Who Climbed Out of the Window, it is silly and warm.|What book did you suggest for my flight?
How do I get red wine out of a carpet?|Blot it first, then a paste of baking soda and water, and vacuum it once dry.|What did you tell me to do about the wine stain?
Any idea for a name for my new goldfish?|How about Captain Bubbles? Or Nemo, if you like the classics.|What names did you come up with for my fish?
My basil keeps wilting, what am I doing wrong?|Probably too little light and too much water: a south window, and water only when the soil is dry.|Why did you think my herbs were dying?
What should I cook for a friend who is gluten free?|Polenta with roasted vegetables and a poached egg, all naturally gluten free.|What dish did you suggest for my friend who can't eat wheat?
Which stretch helps a stiff lower back?|Try the cat-cow stretch, ten slow rounds every morning.|Which exercise did you recommend for my back?
What is a good podcast for a long drive?|Try Radiolab: science stories that make two hours vanish.|Which show did you tell me to listen to in the car?
How long should I boil an egg for a runny yolk?|Six and a half minutes from boiling, then straight into cold water.|How many minutes did you say for a soft egg?
What should I write in a card for a colleague who is retiring?|Something like: thank you for the patience, the jokes and the biscuits, enjoy every slow morning.|What message did you suggest for the retirement card?
Where could we go for a cheap weekend by train?|Try Leipzig: cheap hostels, good museums, and the zoo is huge.|Which city did you suggest for a budget trip?
How do I stop my glasses from fogging up under a mask?|Wash them with a drop of dish soap and let them air dry, it leaves a thin film.|What trick did you give me for steamed-up lenses?
"""
