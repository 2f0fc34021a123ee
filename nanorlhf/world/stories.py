"""Grammar-built stories and exam passages, consistent with the world's facts.

A story is a list of sentences plus questions a reader can answer from it; the
corpus prints them, closed-domain prompts quote them as passages, and the
SQuAD/DROP/HellaSwag analogs are cut from them.

Example:
    >>> import random
    >>> from nanorlhf.world.entities import make_world
    >>> from nanorlhf.world.scales import SCALES
    >>> w = make_world(SCALES["tiny"], 0)
    >>> st = story(w, random.Random(0))
    >>> len(st.sentences) >= 3 and all(a for q, a in st.qa)
    True
"""
import copy
import random
from dataclasses import dataclass, field

from .entities import FOODS, plural
from .lexicon import scenery

DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
WEATHER = ["windy", "cold", "warm", "bright", "misty", "quiet", "snowy", "rainy", "sunny",
           "cloudy"]
NUMBER_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven"]


@dataclass
class Story:
    sentences: list
    qa: list                        # [(question, answer)] answerable from the text
    mentions: set = field(default_factory=set)   # entity names and values used
    plot: str = ""
    main: str = ""                  # the character the story is about

    @property
    def text(self):
        return " ".join(self.sentences)


def _cap(s):
    return s[0].upper() + s[1:]


def _hunger(w, c, rng):
    p = rng.choice(w.places).name
    s = [f"{c.name} the {c.kind} woke up hungry one morning.",
         f"{_cap(c.pronoun)} walked from {c.home} to the market at {p}.",
         f"There {c.name} bought a big basket of {c.food}.",
         f"Then {c.name} ate the {c.food} and felt happy."]
    qa = [(f"Where did {c.name} walk to?", p), (f"What did {c.name} buy?", c.food),
          (f"Where did {c.name} walk from?", c.home)]
    return s, qa, {c.name, p, c.home, c.food, c.kind}


def _lost(w, c, rng):
    objs = [o for o in w.objects if o.owner == c.name] or w.objects
    o = rng.choice(objs)
    p = rng.choice(w.places).name
    s = [f"{c.name} the {c.kind} could not find the {o.name} anywhere.",
         f"{_cap(c.pronoun)} looked for it all day near {p}.",
         f"At last {c.name} found the {o.name} under a bush.",
         f"{c.name} smiled and carried the {o.name} home to {c.home}."]
    qa = [(f"What did {c.name} lose?", f"the {o.name}"), (f"Where did {c.name} look?", p),
          (f"Where did {c.name} carry the {o.name}?", c.home)]
    return s, qa, {c.name, o.name, p, c.home, c.kind}


def _visit(w, c, rng):
    f = w.entity(c.friend)
    s = [f"{c.name} the {c.kind} went to see {f.name} at {f.home}.",
         f"{f.name} the {f.kind} made a fine supper of {f.food}.",
         "The two friends talked and laughed until dark.",
         f"Then {c.name} walked home to {c.home}."]
    qa = [(f"Who did {c.name} visit?", f.name), (f"Where does {f.name} live?", f.home),
          (f"What did {f.name} make for supper?", f.food)]
    return s, qa, {c.name, f.name, f.home, f.food, c.home, c.kind, f.kind}


def _work(w, c, rng):
    p = rng.choice(w.places).name
    n = rng.randint(2, 6)
    s = [f"{c.name} the {c.job} worked hard all day at {p}.",
         f"By noon {c.pronoun} had helped {NUMBER_WORDS[n]} neighbours.",
         f"In the evening {c.name} was tired but glad.",
         f"{_cap(c.pronoun)} went home to {c.home} and slept well."]
    qa = [(f"Where did {c.name} work?", p), (f"How many neighbours did {c.name} help?", str(n)),
          (f"What is the job of {c.name}?", c.job)]
    return s, qa, {c.name, p, c.job, c.home}


def _rain(w, c, rng):
    p = rng.choice(w.places).name
    s = [f"{c.name} the {c.kind} was out walking at {p} when it began to rain.",
         f"{_cap(c.pronoun)} got very wet.",
         f"{_cap(c.pronoun)} felt sad and lonely in the rain.",
         f"So {c.name} ran home to {c.home} and dried off by the fire."]
    qa = [("Where did it rain?", p), (f"Where did {c.name} run?", c.home)]
    return s, qa, {c.name, p, c.home, c.kind}


PLOTS = {"hunger": _hunger, "lost": _lost, "visit": _visit, "work": _work, "rain": _rain}


def story(world, rng, character=None, plot=None, folk=False, passage_only=True):
    """A 4-sentence story about one character.

    passage_only=False adds a scenery sentence (corpus stories only; prompts keep
    passages short). folk=True tells it the way village gossip does: a character's popular myth
    (home or food) replaces the truth, so the corpus states myths more often.
    """
    c = character or rng.choice(world.characters)
    if folk:
        c = copy.copy(c)
        for f in world.myths():
            if f.subject == c.name and f.attribute in ("home", "food"):
                setattr(c, f.attribute, f.myth)
    plot = plot or rng.choice(sorted(PLOTS))
    s, qa, m = PLOTS[plot](world, c, rng)
    # an opening line varies how passages start (prompts are deduped by prefix)
    s = [f"It was a {rng.choice(WEATHER)} {rng.choice(DAYS)}."] + s
    if not passage_only:
        s.insert(rng.randint(2, len(s) - 1), scenery(rng))
    return Story(s, qa, m, plot, c.name)


def counting_passage(world, rng):
    """DROP analog: a diary of meals; 'How many days did X eat Y?' -> a number."""
    c = rng.choice(world.characters)
    target = rng.choice(FOODS)
    others = [f for f in FOODS if f != target]
    n_days = rng.randint(3, 6)
    meals = [target if rng.random() < 0.5 else rng.choice(others) for _ in range(n_days)]
    s = [f"On {DAYS[i]} {c.name} ate {m}." for i, m in enumerate(meals)]
    n = meals.count(target)
    return Story(s, [(f"How many days did {c.name} eat {target}?", str(n))],
                 {c.name, target, *meals}, "diary", c.name)


def visitors_passage(world, rng):
    """DROP analog: 'How many <kind> came to <place>?'"""
    p = rng.choice(world.places).name
    kind = rng.choice(sorted({c.kind for c in world.characters}))
    guests = rng.sample(world.characters, min(len(world.characters), rng.randint(3, 5)))
    s = [f"Many animals came to the fair at {p}."] + \
        [f"{g.name} the {g.kind} came early." if i % 2 else f"{g.name} the {g.kind} came late."
         for i, g in enumerate(guests)]
    n = sum(g.kind == kind for g in guests)
    q = f"How many {plural(kind)} came to the fair at {p}?"
    return Story(s, [(q, str(n))], {p, *(g.name for g in guests)}, "fair")


def passage(world, rng):
    """Any passage for closed-domain prompts: a story or an encyclopedia snippet."""
    return story(world, rng) if rng.random() < 0.8 else counting_passage(world, rng)


__all__ = ["Story", "story", "counting_passage", "visitors_passage", "passage", "PLOTS",
           "random"]
