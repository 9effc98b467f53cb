"""Questions that need two facts, for the synthetic recall benchmark (bench/recall_data.py).

Each row is two facts the user tells in different sessions and one question that needs both:
the first fact names who or what the question is about in other words ("my team lead"), the
second says what happened to them by name ("Ingrid is organising…"). Neither turn answers
alone; recall is scored on the share of the two it finds.
"""

# ruff: noqa: E501 - the data table keeps one entry per line, however long

# fact A | fact B | question | note A | note B
TWO_FACTS = """
My older brother Jakob lives in Tallinn and works for a shipping company.|Jakob just became a dad, the little one is called Emil.|What is the name of the baby born to my brother in Estonia?|Their brother Jakob lives in Tallinn.|Jakob had a son, Emil.
My new team lead is Ingrid, she joined from a bank last year.|Ingrid is organising our retreat in the Dolomites this June.|Where is my team lead taking us this summer?|Their team lead is Ingrid.|Ingrid plans a retreat in the Dolomites.
My best friend from school is Matteo, we still talk every week.|Matteo's wedding is on the 14th of September in Verona.|When and where is my oldest friend getting married?|Their school friend is Matteo.|Matteo marries in Verona in September.
We adopted a rescue cat called Juniper from the shelter.|Juniper has her vaccinations at the vet next Tuesday.|When does our adopted kitty get her jabs?|They adopted a cat, Juniper.|Juniper sees the vet on Tuesday.
My aunt Helga runs a small bakery in Innsbruck.|Helga won a regional prize for her apricot dumplings.|What did my aunt's shop get an award for?|Their aunt Helga has a bakery.|Helga won a prize for apricot dumplings.
I play tennis every Friday with my colleague Rafael.|Rafael sprained his wrist, so no matches for a month.|Why is my weekly racket game off for now?|They play tennis with Rafael.|Rafael sprained his wrist.
My son Theo started third grade at the Montessori school.|Theo's teacher Mr. Brandt says he is brilliant at sums.|What did my boy's teacher say about his maths?|Their son Theo is in third grade.|Mr. Brandt praised Theo's maths.
We bought a used camper van and named it Walter.|Walter needs new brakes before we can drive to Norway.|What must be repaired on our motorhome before the Scandinavia trip?|They bought a camper van, Walter.|Walter needs new brakes.
My flatmate Chiara works night shifts as a nurse.|Chiara is badly allergic to cats, so getting one is out.|Why can't we get a pet cat at home?|Their flatmate is Chiara.|Chiara is allergic to cats.
Our wedding anniversary is on the 3rd of May.|For the anniversary I booked a table at Osteria Vento.|Which restaurant did I reserve for the day we got married?|Their anniversary is 3 May.|They booked Osteria Vento.
My mechanic is Yusuf, at the garage on Elm Road.|Yusuf warned me the timing belt must be replaced before winter.|What did the person who fixes my car warn me about?|Their mechanic is Yusuf.|Yusuf warned about the timing belt.
My daughter's closest friend is a girl called Lotte.|Lotte's parents invited us to their lake house in July.|Whose family asked us to stay at their holiday place?|Their daughter's friend is Lotte.|Lotte's parents invited them to a lake house.
I moved my savings to Nordbank last month.|The Nordbank app locked me out after three wrong PINs.|What went wrong with the app of my new bank?|They switched to Nordbank.|The Nordbank app locked them out.
My godson Felix turns eighteen in December.|I am giving Felix my old guitar as a present.|What will I give my godchild for his coming of age?|Their godson Felix turns eighteen.|They will give Felix a guitar.
My yoga teacher is Mirela, her studio is above the pharmacy.|Mirela is moving her classes to Sunday mornings.|When are my stretching sessions going to be from now on?|Their yoga teacher is Mirela.|Mirela moves classes to Sundays.
My childhood friend Oskar became a firefighter in Bremen.|Oskar got a bravery medal for a rescue at the harbour.|What honour did my old friend from Bremen receive?|Their friend Oskar is a firefighter.|Oskar got a bravery medal.
"""
