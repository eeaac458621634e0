"""A generated corpus for judging a memory bank's recall: conversations, facts, questions.

Run by hand to look at it (``bench/memory_bank.py`` imports it)::

    .venv/bin/python bench/bank_corpus.py [--seed 7] [--people 8] [--show 2]

Each *person* talks with an assistant in dated sessions spread over eight months of 2026
(one namespace per person, ``("bench", person)``). Every session is mostly small talk on
everyday topics (cooking, work, weather, friends, exercise, shows, errands): the
*distractors*, which share vocabulary with the questions (a friend's dog, a colleague's
new job, a weekend in another city). Into them the generator plants *scenarios*: short
exchanges that state something about the person, each with questions asked about it in
other words. The question types:

- ``paraphrase``: the fact asked about with different words ("I break out in hives
  around shellfish" / "Which food gives them a bad reaction?");
- ``tense``: stated in one tense, asked in another ("I'm starting cello lessons next
  month" / "Which instrument has the user been learning?");
- ``name``: the answering turn says "she" or "he", the question the name (the turn
  naming them is evidence too: a reader needs both);
- ``multi-hop``: the evidence is two turns, in one exchange (the assistant asks the
  dog's name, the next turn gives it) or in two sessions months apart (the sister's
  name, then where the sister moved);
- ``current`` and ``as-of``: a fact that changes over time (home city, employer, car,
  running goal), kept both as conversation turns and as ``remember(key=...,
  valid_from=...)`` facts (:attr:`Corpus.facts`); ``current`` asks for today's value,
  ``as-of`` for the value at a date between two changes (:attr:`Question.as_of`).

Every question lists its evidence turns (message ids). Everything comes from one seeded
``random.Random``: the same seed gives the same corpus, byte for byte.
"""

from __future__ import annotations

import argparse
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from framework_agents import Message

START = datetime(2026, 1, 5, 18, 0, tzinfo=UTC)
MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
]


@dataclass(frozen=True, slots=True)
class Session:
    """One dated conversation of a person with the assistant."""

    namespace: tuple[str, ...]
    date: datetime
    messages: list[Message]


@dataclass(frozen=True, slots=True)
class KeyFact:
    """A fact that changes over time: remembered with ``key`` and ``valid_from``."""

    namespace: tuple[str, ...]
    key: str
    text: str
    valid_from: datetime


@dataclass(frozen=True, slots=True)
class Question:
    """A question about a person, with the turns that answer it."""

    id: str
    namespace: tuple[str, ...]
    text: str
    kind: str  # paraphrase, tense, name, multi-hop, current, as-of
    evidence: tuple[str, ...]
    #: For ``current`` and ``as-of``: the key, the fact text valid then, and the moment.
    key: str | None = None
    expected: str | None = None
    as_of: datetime | None = None


@dataclass(slots=True)
class Corpus:
    """Sessions (in date order per person), key facts and questions."""

    sessions: list[Session] = field(default_factory=list)
    facts: list[KeyFact] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)

    def messages(self) -> int:
        """How many messages the sessions hold."""
        return sum(len(s.messages) for s in self.sessions)


# -- vocabularies --------------------------------------------------------------------

PEOPLE = [
    "Alice",
    "Bruno",
    "Chloe",
    "Dmitri",
    "Elena",
    "Farid",
    "Grace",
    "Hugo",
    "Ines",
    "Jonas",
    "Keiko",
    "Liam",
    "Mara",
    "Nikhil",
    "Olga",
    "Pablo",
    "Quinn",
    "Rosa",
    "Sven",
    "Tara",
    "Umar",
    "Vera",
    "Wen",
    "Yusuf",
    "Zoe",
    "Aaron",
    "Bianca",
    "Carlos",
    "Dana",
    "Emil",
    "Fatima",
    "Gustav",
    "Hana",
    "Ivan",
    "Julia",
    "Kofi",
    "Lena",
    "Marco",
    "Nadia",
    "Oscar",
]
SISTERS = ["Maya", "Clara", "Sofia", "Nina", "Priya", "Lucia", "Hannah", "Amira", "Greta", "Leila"]
PARTNERS = ["Sam", "Alex", "Robin", "Jamie", "Chris", "Morgan", "Kai", "Taylor", "Jordan", "Noor"]
FRIENDS = [
    "Ben",
    "Lucy",
    "Tom",
    "Aisha",
    "Pete",
    "Rachel",
    "Omar",
    "Katie",
    "Dan",
    "Mei",
    "Fran",
    "Josh",
]
PETS = ["Pepper", "Biscuit", "Luna", "Miso", "Otis", "Juniper", "Pickle", "Mochi", "Ziggy", "Hazel"]
BREEDS = ["beagle", "border collie", "whippet", "spaniel", "labrador", "dachshund", "terrier mix"]
CITIES = [
    "Lisbon",
    "Porto",
    "Leeds",
    "Bristol",
    "Lyon",
    "Utrecht",
    "Ghent",
    "Valencia",
    "Krakow",
    "Edinburgh",
    "Turin",
    "Graz",
]
COMPANIES = [
    "Northwind",
    "Helix Labs",
    "Bluefin",
    "Orbital",
    "Quarry",
    "Lumen Health",
    "Tidewater",
    "Fernly",
]
ROLES = [
    "data analyst",
    "product designer",
    "backend developer",
    "project manager",
    "UX researcher",
]
SIS_JOBS = ["nurse", "architect", "primary school teacher", "vet", "civil engineer", "pharmacist"]
ALLERGENS = ["shellfish", "peanuts", "sesame", "kiwi", "walnuts", "mustard"]
INSTRUMENTS = ["cello", "piano", "guitar", "violin", "saxophone", "drums"]
CARS = ["Golf", "Corolla", "Clio", "Yaris", "Octavia", "Civic", "Fiesta", "Polo"]
BOOKS = [
    "The Overstory",
    "Piranesi",
    "Klara and the Sun",
    "The Remains of the Day",
    "Circe",
    "Station Eleven",
    "A Gentleman in Moscow",
    "Lincoln in the Bardo",
]
TOWNS = [
    "Tavira",
    "Whitby",
    "Cassis",
    "Hallstatt",
    "Portree",
    "Giethoorn",
    "Collioure",
    "Aldeburgh",
]
RESTAURANTS = [
    "Casa Lupo",
    "The Olive Tree",
    "Mirabelle",
    "Nonna's Kitchen",
    "Blue Door",
    "Saffron House",
]
DISHES = ["risotto", "curry", "paella", "lasagne", "ramen", "stir fry", "shakshuka", "chilli"]
SHOWS = ["Severance", "The Bear", "Slow Horses", "Shogun", "Succession", "Dark"]


# -- small talk: the distractors ---------------------------------------------------------


def _small_talk(rng: random.Random, p: dict[str, str], count: int) -> list[list[tuple[str, str]]]:
    """``count`` different everyday exchanges, often sharing words with the planted facts."""
    friend = rng.choice(FRIENDS)
    city = rng.choice([c for c in CITIES if c not in (p["city1"], p["city2"])])
    dish = rng.choice(DISHES)
    ingredient = rng.choice([a for a in ALLERGENS if a != p["allergen"]])
    topics = [
        [
            (
                "user",
                f"Any idea what I could cook tonight? I have rice, onions and some {ingredient}.",
            ),
            (
                "assistant",
                f"A quick {dish} would work: fry the onions, add the rice and "
                f"stir the {ingredient} through at the end.",
            ),
            ("user", "Sounds good, I'll try that."),
        ],
        [
            (
                "user",
                f"My friend {friend} just adopted a cat from the shelter, a grumpy old tabby.",
            ),
            ("assistant", "Older cats are often calmer once they settle. Give it a few weeks."),
        ],
        [
            ("user", f"{friend} is moving to {city} for a new job, I'm going to miss them."),
            (
                "assistant",
                f"That's a big change. {city} is a lovely place to visit though, "
                "you'll have a reason to go.",
            ),
        ],
        [
            ("user", "Work was exhausting today, back-to-back meetings from nine to five."),
            ("assistant", "That sounds draining. Could you block an hour tomorrow to focus?"),
            ("user", "I'll try, but my manager keeps booking over it."),
        ],
        [
            ("user", f"We spent the weekend in {city}, the food was incredible."),
            ("assistant", f"What did you eat? {city} has a great market scene."),
            ("user", f"Mostly {dish} and far too much cake."),
        ],
        [
            ("user", "It has rained every single day this week."),
            ("assistant", "A good excuse for a film night. Anything on your list?"),
            ("user", f"We started {rng.choice(SHOWS)}, two episodes in and hooked."),
        ],
        [
            ("user", "My neighbour's dog barks all night, I barely slept."),
            ("assistant", "Earplugs help a bit; a friendly word with the neighbour might too."),
        ],
        [
            (
                "user",
                f"A colleague of mine just bought a {rng.choice(CARS)} and won't stop talking "
                "about it.",
            ),
            ("assistant", "New-car excitement usually fades after a month or two."),
        ],
        [
            ("user", "Can you remind me how long to boil an egg for a runny yolk?"),
            ("assistant", "About six minutes from boiling water, then straight into cold water."),
        ],
        [
            ("user", "I went for a long walk by the river after lunch, it cleared my head."),
            ("assistant", "Walks like that are great for resetting. Do you go often?"),
            ("user", "Not as often as I should."),
        ],
        [
            (
                "user",
                f"{friend} asked me to help them move flat on Saturday, my back already hurts.",
            ),
            ("assistant", "Lift with your legs and take breaks. Pizza afterwards is mandatory."),
        ],
        [
            ("user", "I need a present for my dad, he likes gardening and old jazz records."),
            (
                "assistant",
                "A good pair of pruning shears, or a reissue of a classic Blue Note album.",
            ),
        ],
        [
            ("user", f"{friend} started a new job at a bank and already hates the commute."),
            (
                "assistant",
                "Long commutes wear people down. Maybe they can work from home some days.",
            ),
        ],
        [
            ("user", "Our team is hiring again, I have to interview three people this week."),
            ("assistant", "Prepare the same core questions for each so you can compare fairly."),
        ],
        [
            (
                "user",
                f"I booked the dentist for next {rng.choice(['Monday', 'Thursday', 'Friday'])}, "
                "finally.",
            ),
            ("assistant", "Good, it's easy to keep putting that off."),
        ],
        [
            ("user", "Do you think it's worth learning a language with an app?"),
            ("assistant", "Apps help with vocabulary; pair them with conversation practice."),
        ],
        [
            ("user", f"My cousin is visiting from {city} next month, where should I take her?"),
            ("assistant", "A food market and a walk through the old town are always a hit."),
        ],
        [
            ("user", "The gym was packed this morning, I gave up on the squat rack."),
            ("assistant", "Going at lunchtime is usually quieter."),
        ],
        [
            ("user", f"{friend}'s puppy keeps chewing shoes, any tips I can pass on?"),
            (
                "assistant",
                "Plenty of chew toys, and praise the moment the puppy picks one instead.",
            ),
        ],
        [
            (
                "user",
                f"Thinking of making {dish} for friends on {rng.choice(['Friday', 'Sunday'])}, "
                "how much for six people?",
            ),
            (
                "assistant",
                "Plan on roughly 150 grams of the main ingredient per person, plus sides.",
            ),
        ],
        [
            ("user", f"My brother wants to sell his {rng.choice(CARS)}, is it a good first car?"),
            ("assistant", "Usually, yes: cheap to insure and easy to park."),
        ],
        [
            ("user", "Read anything good lately? I need something for the holidays."),
            ("assistant", f"{rng.choice(BOOKS)} is a popular pick, gripping but not too long."),
        ],
        [
            ("user", f"{friend} keeps sending me running memes since she signed up for a race."),
            ("assistant", "Maybe that's a hint to join her for a training run."),
        ],
        [
            ("user", "The landlord is finally fixing the boiler next week."),
            ("assistant", "About time, especially with the cold coming."),
        ],
        [
            ("user", f"Is {city} expensive to live in compared to here?"),
            (
                "assistant",
                f"Rents in {city} have gone up a lot, but food and transport are still cheaper.",
            ),
        ],
        [
            ("user", "I signed up for a pottery class on Wednesdays, just for fun."),
            ("assistant", "Lovely, working with your hands is a great way to switch off."),
        ],
        [
            ("user", "What's a good stretch for a stiff lower back?"),
            (
                "assistant",
                "Child's pose and knee-to-chest stretches, held for thirty seconds each.",
            ),
        ],
        [
            (
                "user",
                f"{friend} got engaged at the weekend, the wedding is in {rng.choice(MONTHS)}.",
            ),
            ("assistant", "How exciting! Are you invited?"),
            ("user", "Yes, and apparently I'm giving a speech."),
        ],
        [
            ("user", "My phone screen cracked again, third time this year."),
            (
                "assistant",
                "A case with raised edges and a glass protector would save you the repairs.",
            ),
        ],
        [
            (
                "user",
                f"The kids next door are learning the {rng.choice(INSTRUMENTS)}, every evening "
                "at seven.",
            ),
            ("assistant", "Hopefully they improve quickly!"),
        ],
    ]
    return rng.sample(topics, count)


# -- scenarios: what is planted, and how it is asked about ------------------------------


@dataclass(slots=True)
class _Plant:
    """Turns to put into one session; questions point at them by local index."""

    turns: list[tuple[str, str]]
    questions: list[tuple[str, str, tuple[int, ...]]]  # (kind, text, local evidence)
    #: Turns from an earlier plant this one's questions also need: (name, local index).
    needs: list[tuple[str, int]] = field(default_factory=list)
    name: str = ""
    fact: tuple[str, str] | None = None  # (key, fact text) remembered at the session's date


def _change(name: str, fact: tuple[str, str], *turns: tuple[str, str]) -> _Plant:
    """A plant stating a value of a fact that changes (``fact`` is its key and text)."""
    return _Plant(list(turns), [], name=name, fact=fact)


def _he(p: dict[str, str]) -> tuple[str, str]:
    return ("he", "him") if p["pet_sex"] == "m" else ("she", "her")


def _plants(rng: random.Random, p: dict[str, str]) -> list[list[_Plant]]:
    """The scenarios of one person, as groups of plants in date order within a group."""
    c = rng.choice
    he, _him = _he(p)
    allergy = _Plant(
        [
            (
                "user",
                c(
                    [
                        f"Just so you know, {p['allergen']} makes me really ill, I break out in "
                        "hives.",
                        f"Turns out I'm allergic to {p['allergen']}, found out the hard way at a "
                        "wedding.",
                        f"Please leave {p['allergen']} out of anything you suggest, my throat "
                        "swells up.",
                    ]
                ),
            ),
            ("assistant", "Noted, I'll keep that in mind for any recipes."),
        ],
        [
            (
                "paraphrase",
                c(
                    [
                        "Which food gives the user a bad reaction?",
                        "Is there any ingredient they can't eat?",
                        "What should be avoided when suggesting meals for them?",
                        "What is the user allergic to?",
                    ]
                ),
                (0,),
            ),
        ],
    )
    pet = _Plant(
        [
            (
                "user",
                c(
                    [
                        "We brought a puppy home from the rescue centre on Saturday!",
                        "We finally adopted a dog this weekend, the house is chaos.",
                    ]
                ),
            ),
            (
                "assistant",
                c(
                    [
                        "Congratulations! What's the little one called?",
                        "How exciting! Have you picked a name yet?",
                    ]
                ),
            ),
            (
                "user",
                f"{p['pet']}. A {p['breed']}, about five months old and already chewing "
                "everything.",
            ),
        ],
        [
            (
                "multi-hop",
                c(
                    [
                        "What is the name of the user's dog?",
                        "What did they call the puppy they adopted?",
                    ]
                ),
                (0, 2),
            ),
            ("paraphrase", "What breed is their new pet?", (0, 2)),
        ],
        name="pet",
    )
    vet = _Plant(
        [
            ("user", f"{p['pet']} had a rough week."),
            ("assistant", "Oh no, what happened?"),
            (
                "user",
                f"{he.capitalize()} got into the laundry basket and swallowed a sock, "
                "so we spent Tuesday night at the emergency clinic.",
            ),
        ],
        [
            ("name", f"What did {p['pet']} eat that needed a trip to the vet?", (0, 2)),
            ("multi-hop", "Why did the user's dog need emergency treatment?", (0, 2)),
        ],
        needs=[("pet", 2)],
    )
    sister = _Plant(
        [
            (
                "user",
                c(
                    [
                        f"My sister {p['sister']} is a {p['sis_job']}, she's the sensible one in "
                        "the family.",
                        f"Had a long call with my older sister, {p['sister']}. Being a "
                        f"{p['sis_job']} "
                        "is wearing her out.",
                    ]
                ),
            ),
            ("assistant", "It's good you two keep in touch."),
        ],
        [("paraphrase", f"What does {p['sister']} do for a living?", (0,))],
        name="sister",
    )
    sister_moves = _Plant(
        [
            ("user", f"Did I tell you {p['sister']} got the house in {p['sis_city']}?"),
            (
                "assistant",
                c(
                    [
                        "No! That's wonderful news, when does she get the keys?",
                        f"No! Tell me more about {p['sister']}'s new place.",
                    ]
                ),
            ),
            ("user", "Next month. It has a garden, so she's already planning vegetables."),
        ],
        [
            ("multi-hop", "Which city is the user's sister moving to?", (0,)),
            ("name", f"When does {p['sister']} get the keys to the house?", (0, 2)),
        ],
        needs=[("sister", 0)],
    )
    instrument = _Plant(
        [
            (
                "user",
                f"I'm going to start {p['instrument']} lessons next month, I've wanted to for "
                "years.",
            ),
            ("assistant", "That's a great goal. Having a teacher makes a big difference early on."),
        ],
        [
            (
                "tense",
                c(
                    [
                        "Which instrument has the user been learning?",
                        "What lessons did the user start?",
                    ]
                ),
                (0,),
            ),
        ],
    )
    practice = _Plant(
        [
            ("user", "My teacher says my scales are finally getting cleaner."),
            ("assistant", "Steady practice pays off. How often are you playing?"),
            ("user", "Twenty minutes most evenings, more at weekends."),
        ],
        [
            (
                "paraphrase",
                c(
                    [
                        "How much time does the user spend practising music?",
                        "How many evenings a week does the user practise?",
                    ]
                ),
                (0, 2),
            )
        ],
    )
    anniversary = _Plant(
        [
            ("user", f"{p['partner']} and I celebrated five years together yesterday."),
            ("assistant", "Congratulations! How did you celebrate?"),
            (
                "user",
                f"We went back to {p['restaurant']}, the place where we had our first dinner out.",
            ),
        ],
        [
            (
                "multi-hop",
                c(
                    [
                        "Which restaurant did the couple go to for their anniversary?",
                        f"Where did the user celebrate five years with {p['partner']}?",
                    ]
                ),
                (0, 2),
            ),
            ("name", f"Where did the user and {p['partner']} eat on their first date?", (2,)),
        ],
    )
    commute = _Plant(
        [
            (
                "user",
                c(
                    [
                        "I cycle to the office every day now, about eight kilometres each way.",
                        "Started biking in to the office, forty minutes door to door.",
                    ]
                ),
            ),
            ("assistant", "That's great exercise built into the day."),
        ],
        [
            (
                "paraphrase",
                c(["How does the user get to work?", "How does the user travel to the office?"]),
                (0,),
            )
        ],
    )
    book = _Plant(
        [
            ("user", f"I just finished {p['book']}, couldn't put it down."),
            ("assistant", "What did you like most about it?"),
            ("user", "The ending. I was in tears on the train."),
        ],
        [
            (
                "tense",
                c(
                    [
                        "Which novel was the user reading on their commute?",
                        "Which book did the user finish recently?",
                    ]
                ),
                (0,),
            )
        ],
    )
    trip = _Plant(
        [
            ("user", "Can you suggest somewhere quiet for a weekend away by the sea?"),
            (
                "assistant",
                f"How about {p['town']}? It's a small coastal town with good walks and seafood.",
            ),
            ("user", f"Perfect, booked two nights for {p['trip_month']}!"),
        ],
        [
            (
                "multi-hop",
                c(
                    [
                        "Where is the user going on their seaside break?",
                        "Which town did the user book for a weekend by the sea?",
                    ]
                ),
                (1, 2),
            ),
            ("tense", "Which town did the assistant recommend for the getaway?", (1,)),
        ],
    )
    birthday = _Plant(
        [
            (
                "user",
                f"It's my birthday on the {p['bday_day']}th of {p['bday_month']}, I'm turning "
                f"{p['age']}.",
            ),
            ("assistant", "Any plans to celebrate?"),
        ],
        [
            (
                "paraphrase",
                c(
                    [
                        "When was the user born, and how old are they?",
                        "When is the user's birthday?",
                    ]
                ),
                (0,),
            )
        ],
    )
    # Facts that change: a plant each for the old and the new value, remembered with a key.
    city = [
        _change(
            "city1",
            ("home_city", f"The user lives in {p['city1']}."),
            (
                "user",
                f"Living in {p['city1']} is great, the tram stops right outside our building.",
            ),
            ("assistant", "A good tram connection makes such a difference."),
        ),
        _change(
            "city2",
            ("home_city", f"The user lives in {p['city2']}."),
            (
                "user",
                f"First week living in {p['city2']} done! The new apartment is so much brighter.",
            ),
            ("assistant", "Congratulations on the move. Have you unpacked yet?"),
            ("user", "Half the boxes are still in the hallway."),
        ),
    ]
    job = [
        _change(
            "job1",
            ("employer", f"The user works at {p['company1']} as a {p['role1']}."),
            (
                "user",
                f"Work at {p['company1']} is hectic this quarter, the release keeps slipping.",
            ),
            ("assistant", "Slipping releases are stressful. Is the scope still changing?"),
        ),
        _change(
            "job2",
            ("employer", f"The user works at {p['company2']} as a {p['role2']}."),
            (
                "user",
                f"I handed in my notice today. My new job is at {p['company2']}, as a "
                f"{p['role2']}!",
            ),
            ("assistant", "Big step, congratulations! When do you start?"),
            ("user", "In three weeks."),
        ),
    ]
    car = [
        _change(
            "car1",
            ("car", f"The user drives a {p['car1']}."),
            (
                "user",
                f"Our old {p['car1']} made a horrible noise on the motorway again, I don't trust "
                "that car.",
            ),
            ("assistant", "Might be worth getting a mechanic to look before a long trip."),
        ),
        _change(
            "car2",
            ("car", f"The user drives a {p['car2']}."),
            (
                "user",
                f"We traded the old car in and picked up a second-hand {p['car2']}, it's so quiet.",
            ),
            ("assistant", "Nice upgrade. Quieter cars make long drives much easier."),
        ),
    ]
    running = [
        _change(
            "run1",
            ("running_goal", "The user is training for a 10k race."),
            (
                "user",
                "I ran 5k without stopping for the first time! My next running goal is a 10k in "
                "spring.",
            ),
            ("assistant", "Brilliant milestone. Build the distance slowly."),
        ),
        _change(
            "run2",
            ("running_goal", "The user is training for a half marathon."),
            (
                "user",
                f"Signed up for the {p['race_city']} half marathon, twelve weeks of training "
                "ahead.",
            ),
            ("assistant", "Exciting! A structured plan with one long run a week works well."),
        ),
    ]
    return [
        [allergy],
        [pet, vet],
        [sister, sister_moves],
        [instrument, practice],
        [anniversary],
        [commute],
        [book],
        [trip],
        [birthday],
        city,
        job,
        car,
        running,
    ]


_CHANGE_QUESTIONS = {
    "home_city": (
        ["Where is the user based these days?", "Which city does the user live in now?"],
        [
            "Which city was the user living in back in {month}?",
            "Where did the user live in {month}?",
        ],
    ),
    "employer": (
        [
            "Who does the user work for at the moment?",
            "What company employs them now?",
            "Where does the user work now?",
        ],
        [
            "Where was the user employed in {month}?",
            "Which company was the user working at in {month}?",
        ],
    ),
    "car": (
        ["What vehicle does the user currently drive?", "What car does the user have now?"],
        ["What was the user driving in {month}?", "Which car did the user own in {month}?"],
    ),
    "running_goal": (
        ["What race is the user preparing for now?", "Which running event are they training for?"],
        [
            "What distance was the user aiming for in {month}?",
            "What was the user's running goal in {month}?",
        ],
    ),
}


def _profile(rng: random.Random, person: str) -> dict[str, str]:
    city1, city2, sis_city, race_city = rng.sample(CITIES, 4)
    company1, company2 = rng.sample(COMPANIES, 2)
    car1, car2 = rng.sample(CARS, 2)
    return {
        "person": person,
        "sister": rng.choice(SISTERS),
        "sis_job": rng.choice(SIS_JOBS),
        "sis_city": sis_city,
        "partner": rng.choice(PARTNERS),
        "pet": rng.choice(PETS),
        "pet_sex": rng.choice("mf"),
        "breed": rng.choice(BREEDS),
        "allergen": rng.choice(ALLERGENS),
        "instrument": rng.choice(INSTRUMENTS),
        "restaurant": rng.choice(RESTAURANTS),
        "book": rng.choice(BOOKS),
        "town": rng.choice(TOWNS),
        "trip_month": rng.choice(MONTHS[5:9]),
        "bday_day": str(rng.randint(4, 28)),
        "bday_month": rng.choice(MONTHS),
        "age": str(rng.randint(24, 58)),
        "city1": city1,
        "city2": city2,
        "race_city": race_city,
        "company1": company1,
        "company2": company2,
        "role1": rng.choice(ROLES),
        "role2": rng.choice(ROLES),
        "car1": car1,
        "car2": car2,
    }


def generate(seed: int = 7, people: int = 8, sessions: int = 24) -> Corpus:
    """The corpus of ``people`` persons with ``sessions`` sessions each (``sessions`` >= 20)."""
    if sessions < 20:
        raise ValueError("sessions must be >= 20 (every scenario needs a session of its own)")
    rng = random.Random(seed)
    corpus = Corpus()
    names = [
        f"{PEOPLE[i % len(PEOPLE)]}{'' if i < len(PEOPLE) else i // len(PEOPLE)}"
        for i in range(people)
    ]
    for person in names:
        _person(rng, person, sessions, corpus)
    return corpus


def _person(rng: random.Random, person: str, sessions: int, corpus: Corpus) -> None:
    namespace = ("bench", person)
    p = _profile(rng, person)
    dates = sorted(
        START + timedelta(days=rng.randint(0, 240), hours=rng.randint(0, 4))
        for _ in range(sessions)
    )
    # Place the scenario groups: plants of a group in increasing sessions, far apart.
    slots: dict[int, list[_Plant]] = {}
    for group in _plants(rng, p):
        if len(group) == 1:
            chosen = [rng.randrange(sessions)]
        else:
            first = rng.randrange(0, sessions // 2 - 2)
            chosen = [first, rng.randrange(first + sessions // 3, sessions)]
        for plant, index in zip(group, chosen, strict=True):
            slots.setdefault(index, []).append(plant)
    placed: dict[str, list[str]] = {}  # plant name -> its message ids
    pending: list[tuple[_Plant, list[str]]] = []
    change_ids: dict[str, list[tuple[str, datetime, str]]] = {}  # key -> (turn id, date, text)
    for index, date in enumerate(dates):
        exchanges: list[list[tuple[str, str]]] = _small_talk(rng, p, rng.randint(3, 6))
        plants = slots.get(index, [])
        positions = sorted(rng.sample(range(len(exchanges) + len(plants)), len(plants)))
        for position, plant in zip(positions, plants, strict=True):
            exchanges.insert(position, plant)  # type: ignore[arg-type]
        messages: list[Message] = []
        for exchange in exchanges:
            turns = exchange.turns if isinstance(exchange, _Plant) else exchange
            ids = []
            for role, text in turns:
                message_id = f"{person}-s{index:02d}-t{len(messages):02d}"
                messages.append(Message(role, text, id=message_id))
                ids.append(message_id)
            if isinstance(exchange, _Plant):
                if exchange.name:
                    placed[exchange.name] = ids
                pending.append((exchange, ids))
                if exchange.fact is not None:
                    key, text = exchange.fact
                    corpus.facts.append(KeyFact(namespace, key, text, date))
                    change_ids.setdefault(key, []).append((ids[0], date, text))
        corpus.sessions.append(Session(namespace, date, messages))
    for plant, ids in pending:
        for kind, text, local in plant.questions:
            # Only a multi-hop question needs the earlier turns (a name, a first mention).
            needs = plant.needs if kind == "multi-hop" else []
            extra = tuple(placed[name][i] for name, i in needs)
            evidence = tuple(dict.fromkeys((*extra, *(ids[i] for i in local))))
            _ask(corpus, namespace, kind, text, evidence)
    for key, timeline in change_ids.items():
        (old_id, old_date, old_text), (new_id, new_date, new_text) = timeline
        now_texts, then_text = _CHANGE_QUESTIONS[key]
        _ask(
            corpus,
            namespace,
            "current",
            rng.choice(now_texts),
            (new_id,),
            key=key,
            expected=new_text,
        )
        between = old_date + (new_date - old_date) / 2
        _ask(
            corpus,
            namespace,
            "as-of",
            rng.choice(then_text).format(month=MONTHS[between.month - 1]),
            (old_id,),
            key=key,
            expected=old_text,
            as_of=between,
        )


def _ask(
    corpus: Corpus,
    namespace: tuple[str, ...],
    kind: str,
    text: str,
    evidence: tuple[str, ...],
    **more: object,
) -> None:
    question_id = f"{namespace[-1]}-q{sum(q.namespace == namespace for q in corpus.questions):02d}"
    corpus.questions.append(Question(question_id, namespace, text, kind, evidence, **more))  # type: ignore[arg-type]


def main() -> None:
    """Print a summary of the corpus and the first sessions of a person."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--people", type=int, default=8)
    parser.add_argument("--sessions", type=int, default=24)
    parser.add_argument("--show", type=int, default=2, help="sessions of the first person to print")
    args = parser.parse_args()
    corpus = generate(args.seed, args.people, args.sessions)
    kinds: dict[str, int] = {}
    for q in corpus.questions:
        kinds[q.kind] = kinds.get(q.kind, 0) + 1
    print(
        f"{len(corpus.sessions)} sessions, {corpus.messages()} messages, {len(corpus.facts)} key "
        f"facts, {len(corpus.questions)} questions: {kinds}\n"
    )
    for session in corpus.sessions[: args.show]:
        print(f"--- {session.namespace} {session.date:%Y-%m-%d}")
        for m in session.messages:
            print(f"  {m.id} {m.role:>9}: {m.text}")
    first = corpus.questions[0].namespace
    print()
    for q in corpus.questions:
        if q.namespace == first:
            when = f" as of {q.as_of:%Y-%m-%d}" if q.as_of else ""
            print(f"  {q.id} [{q.kind}] {q.text}{when} -> {', '.join(q.evidence)}")


if __name__ == "__main__":
    main()
