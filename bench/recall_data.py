"""A deterministic synthetic multi-session memory benchmark for recall.

Months of a user chatting with a companion bot: varied chit-chat from templates, facts
planted once, facts that change later, near-miss distractors, and questions that paraphrase
the facts instead of repeating them. Pure Python, no model calls; the same seed always gives
the same data. Run `python bench/recall_data.py` to print its counts and a lexical check.
"""

# ruff: noqa: E501 - the data tables keep one entry per line, however long

from __future__ import annotations

import random
import re
import string
import time
from dataclasses import dataclass, field

from recall_sessions import ADVICE, SEVERAL
from recall_two_facts import TWO_FACTS

DAY_MS = 86_400_000
BASE_MS = 1_736_150_400_000  # 2025-01-06 08:00 UTC
SPAN_DAYS = 120


@dataclass
class BenchTurn:
    role: str
    text: str
    ts_ms: int


@dataclass
class BenchSession:
    key: str
    turns: list[BenchTurn]
    summary: str


@dataclass
class BenchQuery:
    """A later question; (session_key, turn_index) is the turn that answers it."""

    question: str
    session_key: str
    turn_index: int
    kind: str  # "planted" (shares a keyword) | "paraphrase-hard" (shares none) | "changed"…
    stale: list[tuple[str, int]] = field(default_factory=list)  # outdated versions
    distractors: list[tuple[str, int]] = field(default_factory=list)  # near-miss turns
    also: list[tuple[str, int]] = field(default_factory=list)  # more turns the answer needs

    def supporting(self) -> list[tuple[str, int]]:
        """Every turn the answer needs: the first, then the others."""
        return [(self.session_key, self.turn_index), *self.also]


@dataclass
class Dataset:
    sessions: list[BenchSession]
    queries: list[BenchQuery]

    def turn_count(self) -> int:
        """How many turns all sessions hold."""
        return sum(len(s.turns) for s in self.sessions)


# --- planted facts ------------------------------------------------------------------------
# topic | fact (one user turn) | question sharing one keyword | question sharing none
# | summary note | distractors ("/"-separated near-miss turns)
FACTS = """
health|I'm allergic to cashews, found that out the hard way at a wedding buffet.|Which nuts am I allergic to?|What snack could give me a bad reaction?|They mentioned a cashew allergy.|Jonas is allergic to shellfish, so the team dinner had to be somewhere else./I bought a big bag of mixed nuts for the hike, mostly almonds./The reaction from the audience was bad, nobody laughed at my joke.
family|My sister Lena moved to Porto last spring and says she is never coming back.|Where does Lena live now?|In which city is my sibling based these days?|Their sister Lena moved to Porto.|Lena from the book club lent me a novel set in Lisbon./My neighbours are based in a tiny flat these days and want something bigger.
hobbies|My bike is a green Bianchi I bought second hand from a student.|What colour is my bike?|Describe the bicycle I ride.|They described their green Bianchi bike.|Henrik's bike got stolen outside the station again./I painted the garden fence a dark colour.
travel|The wifi password at the cabin is pinecone42, write that down somewhere.|What do I type to get online at the cabin?|How do I connect to the internet at our holiday hut?|They shared the wifi password for the cabin.|The cabin roof needs fixing before winter./The internet at the office kept dropping all afternoon.
work|My manager is called Tobias, he is fair but always double booked.|What is my manager's name?|Who is my boss at the office?|They named their manager, Tobias.|The boss of the bakery gave us free croissants./The office coffee machine is broken again.
family|Our dog Bruno is a seven year old beagle who steals socks.|What breed is Bruno?|What kind of pet do we have at home?|They told about their beagle Bruno.|Bruno from accounting brought a cake for his birthday./Mia's friend has a pet rabbit called Snowball.
family|I was born in Graz but we left when I was four.|Which town was I born in?|Where is my birthplace?|They were born in Graz.|Priya's baby was born last Tuesday, a little girl./The town hall in Ghent is gorgeous.
health|My blood type is O negative, the clinic reminded me at the last donation.|What is my blood group?|Which group would I be in for a transfusion?|They mentioned their blood type, O negative.|I donated old clothes to the Red Cross shop./Our running group meets on Sundays by the river.
cooking|I can't stand coriander, it tastes like soap to me.|Which herb tastes awful to me?|What green leaf do I always pick out of my food?|They dislike coriander.|I grow basil and mint on the balcony, fresh herbs all summer./The soup tastes better the next day.
books|My favourite author is Ursula K. Le Guin, I reread The Dispossessed every few years.|Which author do I admire most?|Which writer do I love the most?|Their favourite author is Ursula K. Le Guin.|The book club picked a writer I had never heard of./My favourite biscuit is still the plain digestive.
family|My grandmother Rosa turns ninety in October, we are planning a party.|How old will Rosa be this autumn?|Which big birthday is coming up for my gran?|Grandma Rosa turns ninety in October.|Rosa at the cafe remembered my order again./Priya's birthday is coming up and I have no gift idea.
travel|I drive a silver 2014 Skoda Octavia estate, it has done 200,000 km.|What do I drive?|What kind of car do I own?|They drive an old silver Skoda.|Sven's car broke down on the motorway./The drive to the lake took forever.
health|My dentist is Dr. Okafor on Linden Street, very gentle.|Who is my dentist?|Who looks after my teeth?|Their dentist is Dr. Okafor.|Mia has a dentist appointment next week, she is dreading it./My teeth hurt from the cold wind.
hobbies|I run a half marathon in Vienna every September.|Which marathon do I do each year?|Which yearly race do I take part in?|They run the Vienna half marathon each September.|The race on TV yesterday was thrilling, a photo finish./Jonas wants to run a marathon but he has never jogged.
family|My daughter Mia is learning the cello and practises every evening.|What instrument does Mia play?|What music lessons does my child take?|Their daughter Mia is learning the cello.|Mia's friend plays the trumpet in the school band./The music at the cafe was too loud.
health|I'm lactose intolerant, so it's oat milk for me.|Which drink should I avoid because of lactose?|Which dairy products upset my stomach?|They are lactose intolerant.|My stomach hurt after the spicy curry./The dairy aisle was empty because of the strike.
health|My locker code at the swimming pool is 4471.|What's the combination for my locker?|Which number opens my storage box at the baths?|They noted their pool locker code.|The locker room at the climbing hall was flooded./Our storage box in the basement is full of junk.
family|My parents got married on the 12th of June, 1985.|When is my parents' anniversary?|When did mum and dad tie the knot?|Their parents married on 12 June 1985.|The knot in my shoulder is still there after the massage./Greta's anniversary dinner was at a fancy place.
hobbies|I am learning Portuguese on Duolingo, somewhere around A2 level.|How good is my Portuguese?|Which foreign language am I studying with an app?|They are learning Portuguese.|The Portuguese bakery downtown makes great custard tarts./The app for the train tickets crashed again.
smalltalk|My phone is a cracked Pixel 6 that I refuse to replace.|What phone do I have?|Which mobile do I use?|They use a cracked Pixel phone.|My mobile data ran out in the middle of the month./Ayla's phone fell into the lake.
family|My best friend from university is Farid, he lives in Leeds now.|Where is Farid based?|Which town is my closest mate from college in?|Their best friend Farid lives in Leeds.|Farid Khan won the chess tournament, it was on the news./The college down the road is hosting an open day.
health|I take levothyroxine every morning for my thyroid.|Which tablet is for my thyroid?|What medication do I need daily?|They take thyroid medication every morning.|Grandma's medication makes her sleepy in the afternoon./I need a daily reminder to drink water.
smalltalk|Our apartment is on the fourth floor and there is no lift.|Which floor do we live on?|How many stairs do we climb to get home?|Their flat is on the fourth floor without a lift.|The kitchen floor needs a proper scrub./The stairs at the station are closed for repairs.
health|I am afraid of heights, even ladders make me dizzy.|What makes me dizzy?|What is my phobia?|They are afraid of heights.|Mia's friend Ella has a phobia of spiders./Standing up too fast makes me dizzy sometimes.
cooking|My favourite restaurant is Trattoria Sole near the canal.|Which restaurant do I like best?|Where do I most love to eat out?|Their favourite restaurant is Trattoria Sole.|The new restaurant by the station was overpriced./We should eat out more often, cooking every night is tiring.
hobbies|I play five-a-side football on Thursday evenings with old classmates.|What day is my football game?|Which team sport do I do during the week?|They play five-a-side football on Thursdays.|The sport section of the paper was all about tennis./Mia's team lost their match on Saturday.
smalltalk|My landlord, Mr. Petrov, raised the rent by eighty euros.|How much did the rent go up?|Who owns the flat I live in?|Their landlord Mr. Petrov raised the rent.|Ines pays way too much rent for a tiny room./Who owns the bakery on the corner, do you know?
work|I studied marine biology at university in Kiel.|What subject did I study?|What was my degree in?|They studied marine biology in Kiel.|It was thirty degrees in the shade today./That subject sounds so much harder than mine was.
smalltalk|My tattoo is a small swallow on my left wrist.|What is my tattoo of?|What ink do I have on my arm?|They have a swallow tattoo on the wrist.|Farid got a huge dragon tattoo on his back./My arm is sore from carrying the shopping.
health|I wear contact lenses, minus three in both eyes.|What is the strength of my lenses?|How bad is my eyesight?|They wear contact lenses.|Grandma Rosa's eyesight is getting worse./The camera lenses I want are way too expensive.
family|My niece Clara is studying architecture in Delft.|What is Clara doing at university?|What subject is my sister's kid taking at uni?|Their niece Clara studies architecture.|Clara from yoga class is moving abroad./The uni library is open all night during exams.
cooking|I always take my coffee black, no sugar, no milk.|How do I like my coffee?|How do I prefer my morning brew?|They drink coffee black.|The brew pub on the corner closed down./Henrik puts three sugars in his coffee, it is shocking.
hobbies|I booked a train to Salzburg for the jazz festival in July.|When is the festival trip?|Which music event have I got tickets for this summer?|They booked a trip to a jazz festival in Salzburg.|The film festival was cancelled this year./The concert tickets sold out in minutes.
smalltalk|My shoe size is 44, sometimes 45 in trainers.|What size do I buy?|Which footwear number fits me?|Their shoe size is 44.|The size of that pizza was ridiculous./These new boots give me blisters.
work|My car insurance renews every January with Allianz.|When is my insurance due?|When do I need to pay for my vehicle cover again?|Their car insurance renews in January.|The cover of the new album is weird./We need to pay the electricity bill again.
hobbies|My piano teacher is Mrs. Haddad, she is strict but kind.|Who teaches me piano?|Who gives me keyboard lessons?|Their piano teacher is Mrs. Haddad.|The piano at the bar was badly out of tune./Mia's lessons moved to Wednesday.
health|I have a scar on my knee from a skiing accident when I was twelve.|How did I get the scar?|How did I hurt my leg as a child?|They have a scar from a skiing accident.|Mia hurt her leg at football practice./The child next door cries every night.
family|My first cat was a grey tabby called Mochi.|What was the name of my cat?|What was my childhood pet's name?|Their first cat was called Mochi.|Ayla's cat keeps bringing in mice./What was the name of that film we talked about?
travel|We are saving up for a trip to Japan next spring.|Which country is the trip for?|Where do we plan to go on our big holiday?|They are saving for a trip to Japan.|The holiday traffic was terrible on the way back./Dmitri's trip to Morocco got cancelled.
family|My neighbour Greta waters my plants when I am away.|Who looks after my plants?|Who takes care of the greenery while I travel?|Their neighbour Greta waters the plants.|My balcony plants are dying in this heat./Who takes care of the office kitchen? It is a mess.
smalltalk|I am a night owl, I rarely sleep before two.|When do I usually sleep?|What time do I normally go to bed?|They are a night owl.|The bed in the hotel was rock hard./What time does the bakery open on Sundays?
books|My favourite band is Radiohead, I saw them live in 2017.|Which band do I like best?|Which group of musicians do I love most?|Their favourite band is Radiohead.|The band at the wedding played far too loud./Musicians on the tram today were actually good.
travel|My passport expires in August next year.|When does my passport run out?|When do I need to renew my travel document?|Their passport expires next August.|The travel section of the bookshop is huge./I signed the document for the new bank account.
cooking|My sourdough starter is named Doughbert and lives in the fridge.|What do I call my sourdough?|What did I christen my bread yeast culture?|Their sourdough starter is called Doughbert.|The bread at the market was stale by noon./The culture section of the paper reviewed a new opera.
hobbies|I volunteer at the animal shelter on Saturday mornings.|Where do I volunteer?|Where do I help out at weekends?|They volunteer at an animal shelter.|Noor needed help moving flats at the weekend./The animal documentary last night was heartbreaking.
"""

# --- facts that change ---------------------------------------------------------------------
# topic | old fact | new fact | question 1 | question 2 | old note | new note | distractors
CHANGES = """
smalltalk|I live in Berlin, in a small flat in Neukölln.|We finally moved, I live in Munich now, close to the Isar.|Which city do I live in?|Where is home for me at the moment?|They live in Berlin.|They moved to Munich.|Sven lives in Hamburg and loves it./The city council wants to ban cars downtown.
work|I work as a data analyst at an insurance company.|I started my new job as a product manager at a small travel startup.|What is my job?|What do I do for a living?|They work as a data analyst.|They started a new job as a product manager.|Omar's new job sounds stressful./The living room needs a new lamp.
family|My boyfriend Marco is a chef at a bistro in the old town.|Marco and I split up. I am seeing someone new, Sofia, she is a nurse.|Who am I seeing at the moment?|Who is my partner right now?|They mentioned their boyfriend Marco.|They split up with Marco and are seeing Sofia.|Noor's partner is a pilot and is never home./Are you seeing anything good at the cinema?
cooking|I am eating vegetarian these days, mostly for health reasons.|I have gone fully vegan since March, no eggs, no cheese.|Am I vegetarian or vegan?|What diet am I following now?|They eat vegetarian.|They went vegan in March.|Henrik is on a keto diet and talks about it constantly./Following the recipe exactly never works for me.
hobbies|My gym is FitOne on Karl Street, I go before work.|I quit FitOne, now I go to the Urban Climb bouldering hall instead.|Which gym do I go to?|Where do I exercise?|Their gym is FitOne.|They switched to a bouldering hall.|The gym near the office is always packed./I exercise my patience daily with this printer.
work|My commute is forty minutes on the tram.|Since the move my commute is ten minutes by bike.|How long is my commute?|How do I get to the office these days?|Their commute is forty minutes by tram.|Their commute is now ten minutes by bike.|The tram drivers are on strike tomorrow./Getting to the airport takes ages.
smalltalk|My hair is long now, almost down to my shoulders.|I cut my hair really short last week, it feels great.|How long is my hair?|What is my current hairstyle?|They have long hair.|They cut their hair short.|Mia wants to dye her hair blue./My shoulders ache from the desk chair.
books|I am hooked on The Bear, watching an episode every night.|I finished The Bear, now I am obsessed with Severance.|Which show am I watching?|What series am I into right now?|They are watching The Bear.|They moved on to Severance.|The cooking show on TV last night was silly./Right now I am into jigsaw puzzles.
books|I am reading Middlemarch right now, slow going but lovely.|I finally finished Middlemarch and started Piranesi.|What am I reading?|Which novel am I in the middle of?|They are reading Middlemarch.|They finished Middlemarch and started Piranesi.|The novel Lena lent me was dull./I am in the middle of a spreadsheet disaster.
health|My GP is Dr. Weber, the practice is two streets away.|Since the move I registered with a new GP, Dr. Lindqvist.|Who is my GP?|Which family doctor do I see?|Their GP is Dr. Weber.|They registered with a new GP, Dr. Lindqvist.|The doctor on that hospital drama is ridiculous./Mia's GP appointment is on Friday.
"""

# --- facts told in Chinese, in memories that mix languages ----------------------------------
# fact (Chinese) | question in Chinese | question in English | summary note | distractors ("/")
ZH_FACTS = """
我的猫叫小花，她最喜欢吃金枪鱼。|我的猫叫什么名字？|What is my cat called?|用户的猫叫小花。|邻居家的狗叫旺财，天天在楼下叫。/今天的午饭是鱼香肉丝，有点咸。
我妹妹在上海的一家医院当护士。|我妹妹做什么工作？|What does my younger sister do for work?|用户的妹妹在上海当护士。|我同事的姐姐在北京开了一家咖啡店。/上海今天下大雨，航班都延误了。
我对芒果过敏，吃了嘴会肿。|我对什么水果过敏？|Which fruit am I allergic to?|用户对芒果过敏。|超市的苹果打折，我买了一大袋。/花粉季节到了，好多人都在打喷嚏。
我每周三晚上去学游泳，教练姓王。|我什么时候上游泳课？|When are my swimming lessons?|用户每周三晚上学游泳。|周末去公园跑步的人特别多。/王老师是我女儿的数学老师。
我的车是一辆白色的丰田卡罗拉，开了八年了。|我开的是什么车？|What car do I drive?|用户开一辆白色丰田。|停车场今天满了，只好停在路边。/小李新买了一辆红色的电动车。
我老家在成都，最想念那里的火锅。|我的家乡是哪里？|Which city am I from originally?|用户老家在成都。|重庆的夜景真的很漂亮。/昨天晚上在家做了番茄炒蛋。
我的生日是十一月三号，今年想去海边过。|我的生日是哪天？|When is my birthday?|用户生日是十一月三号。|同事小张的婚礼定在下个月。/海边的酒店价格涨了不少。
我在学日语，准备明年去东京工作。|我在学哪种外语？|Which foreign language am I learning?|用户在学日语，准备去东京。|东京的地铁线路太复杂了。/我儿子在学校学英语。
我最喜欢的作家是余华，《活着》看了三遍。|我最喜欢哪位作家？|Who is my favourite writer?|用户喜欢余华的小说。|图书馆周一不开门。/这部电影改编自一本畅销小说。
我每天早上喝一杯不加糖的黑咖啡。|我早上喝什么？|What do I drink in the morning?|用户每天早上喝黑咖啡。|楼下新开了一家奶茶店，排队的人很多。/早上的地铁挤得要命。
"""
# Chinese questions about facts told in English: FACTS row | question
ZH_FOR_FACTS = """
0|我对哪种坚果过敏？
1|我妹妹莱娜现在住在哪个城市？
4|我的经理叫什么名字？
5|我们家的狗是什么品种？
7|我的血型是什么？
8|我最讨厌吃哪种香草？
14|我女儿在学什么乐器？
15|我为什么只喝燕麦奶？
"""
# Chinese small talk for the sessions that hold the Chinese facts.
ZH_CHAT = [
    "今天工作好累，开了一整天的会。",
    "晚上做了红烧肉，味道还不错。",
    "最近天气太冷了，不想出门。",
    "周末和朋友去爬山了，风景很美。",
    "我在看一部新的电视剧，挺好看的。",
    "明天要早起，今晚得早点睡。",
    "孩子的学校下周开家长会。",
    "最近在减肥，晚饭只吃沙拉。",
    "地铁上人太多了，站了一路。",
    "刚买了一本新书，还没开始看。",
]

# --- chit-chat templates: "name|choice|choice|..." ---------------------------------------
# Slot values; a template's {slot} is filled with one of them at random.
SLOT_TABLE = """
adj|long|hectic|calm|strange|productive|exhausting|quiet|chaotic|rough|slow
nice|lovely|tough|fun|stressful|relaxing|odd|exciting|draining
daypart|morning|afternoon|evening|day
task|the quarterly report|a budget spreadsheet|onboarding the new intern|a client presentation|cleaning up old tickets|the migration plan|writing documentation|a vendor contract|the offsite agenda|interview prep|the hiring plan|a security audit
event|the printer jammed twice|we finally shipped the release|a client cancelled last minute|someone brought donuts|the server went down at lunch|I had back to back calls|my laptop froze during a demo|the fire alarm went off
colleague|Jonas|Priya|Henrik|Ayla|Sven|Noor|Dmitri|Ines|Kofi|Yuki|Beatrix|Omar
minutes|fifteen|twenty|thirty|forty-five
dish|risotto|lentil soup|a green curry|shakshuka|homemade gnocchi|banana bread|a vegetable lasagne|ramen|a chickpea stew|pancakes|stuffed peppers|a lemon tart|dumplings|a mushroom pie
ingredient|smoked paprika|fresh ginger|miso|saffron|lemon zest|brown butter|capers|tahini|chili flakes|roasted garlic
city|Lisbon|Copenhagen|Krakow|Edinburgh|Seville|Ljubljana|Bologna|Tallinn|Ghent|Valencia|Bergen|Trieste
transport|the night train|a cheap flight|a rental car|the ferry|a long bus ride
sight|the old harbour|a tiny museum|the market hall|a hilltop fortress|the botanical garden|a jazz bar|the cathedral|a flea market
hobby|watercolour painting|chess|birdwatching|knitting|photography|gardening|pottery|woodworking|calligraphy|baking
ailment|a stiff neck|a mild headache|trouble sleeping|sore calves|a runny nose|hay fever|a twisted ankle|back pain
habit|stretching more|drinking more water|going for short walks|cutting back on screens|taking magnesium|doing yoga in the morning
relative|my cousin|my uncle|my aunt|my brother-in-law|my mum|my dad|my godmother
gathering|a birthday dinner|a long phone call|a barbecue|a surprise visit|a video call|a family lunch
book|a crime novel|a biography of Darwin|a short story collection|a book about the history of salt|a sci-fi trilogy|a memoir by a chef|a graphic novel|a poetry collection|an essay collection
weather|rainy|foggy|freezing|windy|sunny|grey|humid|stormy|snowy|mild
thing|the neighbours' renovation|a podcast about octopuses|a documentary on bees|the price of groceries|a crossword clue|a funny video|the new tram line
"""
# What the user says on each topic.
USER_TABLE = """
work|Work was {adj} today, {event}.|I spent the whole {daypart} on {task}.|{colleague} asked me to help with {task} again.|The meeting about {task} ran over by {minutes} minutes.|I think I finally understand {task}, it took a while.|{colleague} and I argued about {task}, nothing serious.|Should I say no to {task}? I am already swamped.|Tomorrow is all about {task}, wish me luck.
cooking|I made {dish} tonight with {ingredient}.|Any idea how to fix {dish}?|Tried {dish} for the first time, it was {nice}.|I ran out of {ingredient} halfway through cooking.|Thinking of making {dish} for {colleague} this weekend.|Is {ingredient} worth buying or is it a gimmick?
travel|I keep thinking about a weekend in {city}.|We took {transport} to {city} once, it was {nice}.|What should I not miss in {city}? Maybe {sight}?|{colleague} just came back from {city} and loved {sight}.|Is {transport} a good way to get to {city}?
hobbies|I have been getting into {hobby} lately.|Spent the {daypart} on {hobby}, totally lost track of time.|{colleague} wants to try {hobby} with me.|My {hobby} is going {nice}, slowly improving.|Do you think {hobby} is a good way to relax?
health|I woke up with {ailment} today.|I am trying {habit} this month.|{ailment} again, maybe I should start {habit}.|Since I started {habit} I feel a bit better.|The {weather} weather always gives me {ailment}.
family|Had {gathering} with {relative}, it was {nice}.|{relative} called about {gathering} next month.|I should visit {relative} more often.|{relative} sent me a recipe for {dish}.
books|I started {book} yesterday.|Finished {book}, it was {nice}.|{colleague} recommended {book} to me.|Do you know any good {hobby} books?|I read a chapter of {book} on the bus.
weather|It is so {weather} today.|Another {weather} {daypart}, I am over it.|The forecast says {weather} all week.|Perfect {weather} weather for staying in with {book}.
smalltalk|I was thinking about {thing} all {daypart}.|Did you hear about {thing}?|Not much going on, just {thing}.|{colleague} told me about {thing}, so weird.|Quick question: what do you make of {thing}?
"""
# How the assistant answers on each topic; {echo} repeats what the user mentioned.
REPLY_TABLE = """
work|That sounds {adj}. Did {echo} at least go somewhere useful?|Long meetings are the worst. What would make {echo} easier?|It is fine to say no sometimes. How full is your plate right now?|Good luck with {echo}! Break it into small pieces.
cooking|Ooh, {echo} sounds great. Did you add anything else?|A little {ingredient} often rescues a dish like that.|Cooking for friends is the best. What are you serving with it?
travel|{echo} sounds lovely this time of year, from what people say.|I would go for {sight} first. How long would you stay?|Travel plans are half the fun. When were you thinking?
hobbies|{echo} sounds like a great way to unwind.|How did you get started with {echo}?|Losing track of time is a good sign. Keep going!
health|Sorry to hear that. Maybe {habit} could help?|Take it easy today. Is {echo} getting better?|Small habits add up. How are you sleeping?
family|That sounds {nice}. How is everyone doing?|Family time matters. Did {echo} go as planned?
books|I have heard good things about {echo}. What do you like so far?|Reading on the bus is underrated. Any favourite passage?
weather|Ugh, {echo} days are hard. Any plans to get out anyway?|Maybe a good day for a warm drink and {book}.
smalltalk|Ha, {echo}? Tell me more.|I had not heard about {echo}. What happened?|Fair enough. How is the rest of your week looking?
generic|Interesting, tell me more about {echo}.|How did that make you feel?|Mm, {echo}. I see.|That makes sense.|Oh really? {echo}, of all things!|I get that. What are you up to later?
ack|Got it, I will remember that.|Thanks for telling me, noted.|Noted: {echo}. I will keep that in mind.|Oh, {echo}! Good to know.|Noted. Anything else I should know?|That is useful to know, thanks.
"""


def _table(text: str) -> dict[str, list[str]]:
    return {(row := line.split("|"))[0]: row[1:] for line in text.strip().splitlines()}


SLOTS = _table(SLOT_TABLE)
USER = _table(USER_TABLE)
REPLY = _table(REPLY_TABLE)
GENERIC_REPLY, ACKS = REPLY.pop("generic"), REPLY.pop("ack")
PREFIXES = ["", "", "", "Oh, before I forget. ", "Random thing about me. ", "Funny you ask. "]
SUFFIXES = ["", "", "", " Anyway, how was your day?", " Just so you know.", " Long story."]
# The slot a reply may repeat back, per topic, best first.
ECHO_SLOTS = {
    "work": ["task"],
    "cooking": ["dish", "ingredient"],
    "travel": ["city", "sight"],
    "hobbies": ["hobby"],
    "health": ["ailment"],
    "family": ["gathering"],
    "books": ["book"],
    "weather": ["weather"],
    "smalltalk": ["thing"],
}
TOPIC_NAMES = {"smalltalk": "small talk"}

_FIELDS = {
    t: [f for _, f, _, _ in string.Formatter().parse(t) if f]
    for t in [t for d in (USER, REPLY) for ts in d.values() for t in ts] + GENERIC_REPLY + ACKS
}
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]{4,}")


def _fill(template: str, rng: random.Random, echo: str = "") -> tuple[str, dict[str, str]]:
    """The template with random slot values (and `echo`), capitalised; also the values."""
    values = {f: echo if f == "echo" else rng.choice(SLOTS[f]) for f in _FIELDS[template]}
    text = template.format(**values)
    return text[0].upper() + text[1:], values


def _echo(text: str, rng: random.Random) -> str:
    """A word from the previous turn that caught the listener's ear (the longest noun-ish one)."""
    words = _WORD.findall(text)
    kept = [
        w if w[0].isupper() and text.find(w) > 0 else w.lower()
        for w in words
        if w.lower() not in _COMMON and not w.endswith(("ing", "ed", "ly", "'s"))
    ]
    return max(kept, key=len) if kept else rng.choice(["that", "it"])


_COMMON = frozenset(
    "about again there their which where would could should thinking today still never every "
    "while since really maybe always first think sometimes these those other tiny another "
    "perfect quick question".split()
)


def chit_chat(rng: random.Random) -> str:
    """One random user line of chit-chat on any topic."""
    return _fill(rng.choice(USER[rng.choice(list(USER))]), rng)[0]


class _Writer:
    """Builds one session turn by turn, with timestamps a minute or two apart."""

    def __init__(self, key: str, start_ms: int, rng: random.Random) -> None:
        self.key, self.ts, self.rng = key, start_ms, rng
        self.turns: list[BenchTurn] = []

    def say(self, role: str, text: str) -> int:
        self.ts += self.rng.randint(20, 150) * 1000
        self.turns.append(BenchTurn(role, text, self.ts))
        return len(self.turns) - 1

    def chat(self, topic: str) -> str:
        """One user line on `topic` (sometimes two sentences) and a reply; returns a detail."""
        rng = self.rng
        first, second = rng.sample(USER[topic], 2)
        text, values = _fill(first, rng)
        if rng.random() < 0.3:
            text += " " + _fill(second, rng)[0]
        self.say("user", text)
        detail = next((values[f] for f in ECHO_SLOTS[topic] if f in values), "")
        if detail and rng.random() < 0.7:
            reply = _fill(rng.choice(REPLY[topic]), rng, detail)[0]
        else:
            reply = _fill(rng.choice(GENERIC_REPLY), rng, _echo(text, rng))[0]
        self.say("assistant", reply)
        return f"{detail} weather" if detail and topic == "weather" else detail

    def pair(self, user_text: str, acks: list[str]) -> int:
        """A user turn with a fact or near-miss and a reply; returns the user turn's index."""
        index = self.say("user", user_text)
        self.say("assistant", _fill(self.rng.choice(acks), self.rng, _echo(user_text, self.rng))[0])
        return index


@dataclass
class _Plant:
    """Something to put in a session: a fact, an old or new version, or a distractor."""

    text: str
    ref: str  # "fact:3", "old:1", "new:1", "distractor:fact:3"
    note: str = ""
    reply: str = ""  # the assistant's answer, when it is the evidence ("advice:2")


def _session(
    key: str, start_ms: int, rng: random.Random, plants: list[_Plant], n_turns: int
) -> tuple[BenchSession, dict[str, int]]:
    """One session of chit-chat around two topics with `plants` placed among it."""
    topics = rng.sample(list(USER), 2)
    writer, details, where = _Writer(key, start_ms, rng), [], {}
    slots = sorted(rng.sample(range(n_turns // 2), min(len(plants), n_turns // 2)))
    queue = dict(zip(slots, plants, strict=False))
    for pair in range(n_turns // 2):
        plant = queue.get(pair)
        if plant is None:
            topic = rng.choice(topics) if rng.random() < 0.75 else rng.choice(list(USER))
            details.append(writer.chat(topic))
        elif plant.ref.startswith("distractor"):
            where[plant.ref] = writer.pair(plant.text, GENERIC_REPLY)
        elif plant.reply:
            writer.say("user", plant.text)
            where[plant.ref] = writer.say("assistant", plant.reply)
        else:
            text = rng.choice(PREFIXES) + plant.text + rng.choice(SUFFIXES)
            where[plant.ref] = writer.pair(text, ACKS)
    notes = [p.note for p in plants if p.note]
    return BenchSession(key, writer.turns, _summary(topics, details, notes, rng)), where


def _summary(topics: list[str], details: list[str], notes: list[str], rng: random.Random) -> str:
    """A 2–4 sentence summary: topics, a few details, the facts told in the session."""
    names = [TOPIC_NAMES.get(t, t) for t in topics]
    parts = [f"The user chatted about {names[0]} and {names[1]}."]
    picked = list(dict.fromkeys(d for d in details if d))[:3]
    if picked:
        parts.append("Details that came up: " + ", ".join(picked) + ".")
    if len(notes) > 2:
        parts.append(notes[0])
        parts.append("Also: " + " ".join(n[0].lower() + n[1:] for n in notes[1:]))
    else:
        parts.extend(notes)
    if len(parts) < 2:
        parts.append(rng.choice(["The mood was relaxed.", "It was a short, easy chat."]))
    return " ".join(parts[:4])


def _rows(table: str) -> list[list[str]]:
    return [line.split("|") for line in table.strip().splitlines()]


def _plan(rng: random.Random, sessions: int) -> list[list[_Plant]]:
    """Which session gets which fact, changed fact and distractor."""
    plan: list[list[_Plant]] = [[] for _ in range(sessions)]
    early, late = max(1, sessions // 2), max(1, sessions * 3 // 10)
    for i, row in enumerate(_rows(FACTS)):
        plan[rng.randrange(early)].append(_Plant(row[1], f"fact:{i}", row[4]))
        for j, text in enumerate(row[5].split("/")):
            plan[rng.randrange(sessions)].append(_Plant(text, f"distractor:fact:{i}:{j}"))
    for i, row in enumerate(_rows(CHANGES)):
        plan[rng.randrange(late)].append(_Plant(row[1], f"old:{i}", row[5]))
        plan[rng.randrange(sessions // 2, sessions - 2)].append(_Plant(row[2], f"new:{i}", row[6]))
        for j, text in enumerate(row[7].split("/")):
            plan[rng.randrange(sessions)].append(_Plant(text, f"distractor:change:{i}:{j}"))
    for plants in plan:
        rng.shuffle(plants)
    return plan


def build(seed: int = 7, sessions: int = 60) -> Dataset:
    """The benchmark: `sessions` sessions over ~4 months, facts, changes and questions."""
    if sessions < 10:
        raise ValueError("need at least 10 sessions to spread facts and changes")
    rng = random.Random(seed)
    plan = _plan(rng, sessions)
    out: list[BenchSession] = []
    where: dict[str, tuple[str, int]] = {}
    for i, plants in enumerate(plan):
        day = i * SPAN_DAYS // sessions
        start = BASE_MS + day * DAY_MS + rng.randint(9, 13) * 3_600_000
        n_turns = max(2 * len(plants) + 6, 2 * rng.randint(8, 12))
        session, places = _session(f"s{i:03d}", start, rng, plants, n_turns)
        out.append(session)
        where.update({ref: (session.key, index) for ref, index in places.items()})
    extra, extra_where = _chinese_sessions(random.Random(seed * 31 + 1), sessions // 6)
    where.update(extra_where)
    # Their own generators, so the sessions above stay the same as the set grows.
    pairs, pair_where = _two_fact_sessions(random.Random(seed * 31 + 2), sessions // 5)
    where.update(pair_where)
    more, more_where = _more_sessions(random.Random(seed * 31 + 3), sessions // 5)
    where.update(more_where)
    out = sorted(out + extra + pairs + more, key=lambda x: x.turns[0].ts_ms)
    queries = _queries(where) + _language_queries(where) + _time_queries(out)
    return Dataset(out, queries + _two_fact_queries(where) + _more_queries(where))


def _two_fact_sessions(
    rng: random.Random, sessions: int
) -> tuple[list[BenchSession], dict[str, tuple[str, int]]]:
    """English chit-chat sessions holding the two-fact rows: the first fact in the first half
    of the months, the second in a later session."""
    plan: list[list[_Plant]] = [[] for _ in range(sessions)]
    half = sessions // 2
    for i, row in enumerate(_rows(TWO_FACTS)):
        plan[rng.randrange(half)].append(_Plant(row[0], f"pair:{i}:a", row[3]))
        plan[rng.randrange(half, sessions)].append(_Plant(row[1], f"pair:{i}:b", row[4]))
    return _planned(rng, plan, "p", (18, 21))


def _two_fact_queries(where: dict[str, tuple[str, int]]) -> list[BenchQuery]:
    """One question per two-fact row; both facts support it."""
    return [
        BenchQuery(row[2], *where[f"pair:{i}:a"], "two-facts", also=[where[f"pair:{i}:b"]])
        for i, row in enumerate(_rows(TWO_FACTS))
    ]


def _more_sessions(
    rng: random.Random, sessions: int
) -> tuple[list[BenchSession], dict[str, tuple[str, int]]]:
    """English chit-chat sessions holding the "several" rows (each of a row's three facts in
    another session) and the "advice" exchanges, spread over the months."""
    plan: list[list[_Plant]] = [[] for _ in range(sessions)]
    for i, row in enumerate(_rows(SEVERAL)):
        for part, at in zip("abc", sorted(rng.sample(range(sessions), 3)), strict=True):
            plan[at].append(_Plant(row["abc".index(part)], f"several:{i}:{part}"))
    for i, row in enumerate(_rows(ADVICE)):
        plan[rng.randrange(sessions)].append(_Plant(row[0], f"advice:{i}", reply=row[1]))
    return _planned(rng, plan, "m", (7, 9))


def _planned(
    rng: random.Random, plan: list[list[_Plant]], prefix: str, hours: tuple[int, int]
) -> tuple[list[BenchSession], dict[str, tuple[str, int]]]:
    """One chit-chat session per entry of `plan`, holding its plants, spread over the months
    (starting between `hours`); the sessions and where each plant landed."""
    out, where = [], {}
    for i, plants in enumerate(plan):
        rng.shuffle(plants)
        day = i * (SPAN_DAYS - 2) // len(plan) + rng.randrange(2)
        start = BASE_MS + day * DAY_MS + rng.randint(*hours) * 3_600_000
        n_turns = max(2 * len(plants) + 6, 2 * rng.randint(8, 12))
        session, places = _session(f"{prefix}{i:03d}", start, rng, plants, n_turns)
        out.append(session)
        where.update({ref: (session.key, index) for ref, index in places.items()})
    return out, where


def _more_queries(where: dict[str, tuple[str, int]]) -> list[BenchQuery]:
    """One question per "several" row (its three facts support it) and per "advice" row
    (the assistant's answer supports it)."""
    several = [
        BenchQuery(
            row[3],
            *where[f"several:{i}:a"],
            "several",
            also=[where[f"several:{i}:b"], where[f"several:{i}:c"]],
        )
        for i, row in enumerate(_rows(SEVERAL))
    ]
    advice = [
        BenchQuery(row[2], *where[f"advice:{i}"], "advice") for i, row in enumerate(_rows(ADVICE))
    ]
    return several + advice


# A day-specific user turn, and the question that asks for it by its date only.
DATED = [
    (re.compile(r"\bI made .+? tonight\b"), "What did I cook on {day}?"),
    (re.compile(r"\bI woke up with\b"), "How was I feeling on {day}?"),
    (re.compile(r"^Work was \w+ today\b"), "How did work go on {day}?"),
    (re.compile(r"^Had .+ with\b"), "What did I do with my family on {day}?"),
]


def _time_queries(sessions: list[BenchSession]) -> list[BenchQuery]:
    """'What did I cook on March 4?': the one such turn of that day answers; the like turns
    of other days share the question's words as much, so only the date tells them apart."""
    by_day: dict[tuple[str, str], list[tuple[str, int]]] = {}
    for s in sessions:
        for i, t in enumerate(s.turns):
            for pattern, question in DATED:
                if t.role == "user" and pattern.search(t.text):
                    day = time.strftime("%B %d", time.gmtime(t.ts_ms / 1000)).replace(" 0", " ")
                    by_day.setdefault((question, day), []).append((s.key, i))
    return [
        BenchQuery(question.format(day=day), *found[0], "time")
        for (question, day), found in by_day.items()
        if len(found) == 1
    ]


def _chinese_sessions(
    rng: random.Random, sessions: int
) -> tuple[list[BenchSession], dict[str, tuple[str, int]]]:
    """Sessions that mix English small talk, Chinese small talk and the Chinese facts.

    Their own random generator, so the English part of the dataset is the same as before.
    """
    plan: list[list[_Plant]] = [[] for _ in range(sessions)]
    for i, row in enumerate(_rows(ZH_FACTS)):
        plan[rng.randrange(sessions)].append(_Plant(row[0], f"zh:{i}", row[3]))
        for j, text in enumerate(row[4].split("/")):
            plan[rng.randrange(sessions)].append(_Plant(text, f"distractor:zh:{i}:{j}"))
    for plants in plan:
        plants += [_Plant(t, f"distractor:chat:{k}") for k, t in enumerate(rng.sample(ZH_CHAT, 3))]
        rng.shuffle(plants)
    out, where = [], {}
    for i, plants in enumerate(plan):
        day = rng.randrange(SPAN_DAYS - 10)
        start = BASE_MS + day * DAY_MS + rng.randint(14, 20) * 3_600_000
        session, places = _session(f"z{i:03d}", start, rng, plants, 2 * len(plants) + 6)
        out.append(session)
        where.update({ref: (session.key, index) for ref, index in places.items()})
    return out, where


def _language_queries(where: dict[str, tuple[str, int]]) -> list[BenchQuery]:
    """Chinese questions about Chinese facts, and questions across the two languages."""
    queries = []
    for i, row in enumerate(_rows(ZH_FACTS)):
        key, index = where[f"zh:{i}"]
        near = [v for k, v in where.items() if k.startswith(f"distractor:zh:{i}:")]
        queries.append(BenchQuery(row[1], key, index, "chinese", [], near))
        queries.append(BenchQuery(row[2], key, index, "mixed", [], near))
    for fact, question in _rows(ZH_FOR_FACTS):
        key, index = where[f"fact:{fact}"]
        queries.append(BenchQuery(question, key, index, "mixed"))
    return queries


def _queries(where: dict[str, tuple[str, int]]) -> list[BenchQuery]:
    """Two questions per fact (keyword and paraphrase) and per changed fact."""
    queries = []

    def near(prefix: str) -> list[tuple[str, int]]:
        return [v for k, v in where.items() if k.startswith(prefix)]

    for i, row in enumerate(_rows(FACTS)):
        key, index = where[f"fact:{i}"]
        for question, kind in ((row[2], "planted"), (row[3], "paraphrase-hard")):
            queries.append(
                BenchQuery(question, key, index, kind, [], near(f"distractor:fact:{i}:"))
            )
    for i, row in enumerate(_rows(CHANGES)):
        key, index = where[f"new:{i}"]
        for question in (row[3], row[4]):
            queries.append(
                BenchQuery(
                    question,
                    key,
                    index,
                    "changed",
                    [where[f"old:{i}"]],
                    near(f"distractor:change:{i}:"),
                )
            )
    return queries


def scale(dataset: Dataset, total_turns: int, seed: int = 7) -> Dataset:
    """The dataset plus older filler sessions of plain chit-chat, up to `total_turns` turns."""
    rng = random.Random(seed * 7919 + total_turns)
    fillers: list[BenchSession] = []
    missing = total_turns - dataset.turn_count()
    start = BASE_MS
    while missing > 0:
        n_turns = min(missing, 2 * rng.randint(8, 12))
        start -= rng.randint(6, 30) * 3_600_000  # fillers go back in time, before the dataset
        session, _ = _session(f"f{len(fillers):05d}", start, rng, [], n_turns + n_turns % 2)
        session.turns = session.turns[:n_turns]
        fillers.append(session)
        missing -= n_turns
    fillers.reverse()
    return Dataset(fillers + dataset.sessions, dataset.queries)


def shared_words(question: str, text: str) -> list[str]:
    """Content words of `question` that BM25 would match in `text` (same tokenizer as the store)."""
    import sqlite3

    from seelen.store.schema import fts_query, index_text

    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='porter unicode61')")
    db.execute("INSERT INTO t VALUES (?)", (index_text(text),))
    words = [w.strip('"') for w in fts_query(question).split(" OR ") if w]
    return [
        w for w in words if db.execute("SELECT 1 FROM t WHERE t MATCH ?", (f'"{w}"',)).fetchone()
    ]


def describe(dataset: Dataset) -> str:
    """Counts by kind and how many questions share words with their answer."""
    by_key = {s.key: s for s in dataset.sessions}
    lines = [
        f"sessions {len(dataset.sessions)}, turns {dataset.turn_count()}, "
        f"queries {len(dataset.queries)}"
    ]
    kinds = sorted({q.kind for q in dataset.queries})
    for kind in kinds:
        qs = [q for q in dataset.queries if q.kind == kind]
        shared = [
            shared_words(q.question, by_key[q.session_key].turns[q.turn_index].text) for q in qs
        ]
        none = sum(1 for s in shared if not s)
        lines.append(
            f"  {kind:16} {len(qs):3} questions, {none:3} share no word with the answer,"
            f" {sum(len(q.distractors) for q in qs):3} distractor turns"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    data = build()
    print(describe(data))
    for q in data.queries:
        answer = {s.key: s for s in data.sessions}[q.session_key].turns[q.turn_index].text
        print(f"{q.kind:16} {shared_words(q.question, answer)!s:28} {q.question}")
