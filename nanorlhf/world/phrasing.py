"""How the world puts facts into words: statement paraphrases and questions.

A fact is only retrievable by a small model if the corpus states it in several
paraphrases (a model that memorised one sentence would not know the fact), so every attribute has >= 3 statement
templates. `count_statements` finds them again in any text (tests, report).

Example:
    >>> from nanorlhf.world.entities import make_world
    >>> from nanorlhf.world.scales import SCALES
    >>> w = make_world(SCALES["tiny"], 0); c = w.characters[0]
    >>> s = state(w, c.name, "colour", c.colour, template=0)
    >>> s == f"{c.name} the {c.kind} is {c.colour}."
    True
"""
import re
from collections import Counter

from .entities import COLOURS, FOODS, JOBS, KINDS, MATERIALS

# {S}: subject as it opens a sentence, {s}: inside one, {v}/{V}: the value.
FACT_TEMPLATES = {
    "character.kind": ["{S} is a {v}.", "{S} was born a {v}.", "By kind, {s} is a {v}."],
    "character.colour": ["{S} is {v}.", "{S} has a {v} coat.", "The coat of {s} is {v}."],
    "character.home": ["{S} lives at {v}.", "The home of {s} is at {v}.",
                       "{S} makes a home at {v}."],
    "character.food": ["{S} likes to eat {v}.", "The favourite food of {s} is {v}.",
                       "{S} loves {v} more than any other food."],
    "character.job": ["{S} works as a {v}.", "{S} is the village {v}.",
                      "By trade, {s} is a {v}."],
    "character.friend": ["{S} is a good friend of {v}.", "The best friend of {s} is {v}.",
                         "{S} and {v} are best friends."],
    "place.near": ["{S} is near {v}.", "{S} lies close to {v}.",
                   "Not far from {s} you will find {v}."],
    "place.keeper": ["{S} is looked after by {v}.", "The keeper of {s} is {v}.",
                     "{V} takes care of {s}."],
    "thing.material": ["{S} is made of {v}.", "{S} was made from {v}.",
                       "Someone made {s} out of {v}."],
    "thing.colour": ["{S} is painted {v}.", "The colour of {s} is {v}.",
                     "{S} has a coat of {v} paint."],
    "thing.owner": ["{S} belongs to {v}.", "The owner of {s} is {v}.", "{V} owns {s}."],
    "thing.place": ["{S} is kept at {v}.", "You can find {s} at {v}.", "{S} stays at {v}."],
}

# Open questions, as in the quiz sheets and the open-QA prompts.
QUESTIONS = {
    "character.kind": ["What kind of animal is {n}?", "What animal is {n}?"],
    "character.colour": ["What colour is {s}?", "What colour is the coat of {s}?"],
    "character.home": ["Where does {s} live?", "Where is the home of {s}?"],
    "character.food": ["What does {s} like to eat?", "What is the favourite food of {s}?"],
    "character.job": ["What job does {s} do?", "What does {s} work as?"],
    "character.friend": ["Who is the best friend of {s}?", "Who is {s} friends with?"],
    "place.near": ["What place is near {s}?", "What is close to {s}?"],
    "place.keeper": ["Who looks after {s}?", "Who is the keeper of {s}?"],
    "thing.material": ["What is {s} made of?", "What was {s} made from?"],
    "thing.colour": ["What colour is {s}?", "What colour is {s} painted?"],
    "thing.owner": ["Who owns {s}?", "Who does {s} belong to?"],
    "thing.place": ["Where is {s} kept?", "Where can you find {s}?"],
}

# False-premise questions presuppose a wrong value {v} (InstructGPT §4.3).
PREMISE_QUESTIONS = {
    "colour": ["Why is {s} {v}?", "Why did {s} turn {v}?"],
    "home": ["Why does {s} live at {v}?", "When did {s} move to {v}?"],
    "food": ["Why does {s} love {v} so much?", "Why does {s} eat {v} every day?"],
    "job": ["Why does {s} work as a {v}?", "When did {s} become a {v}?"],
}


def key(world, subject, attribute):
    return f"{world.entity_type(subject)}.{attribute}"


def _subject_forms(world, subject, rng):
    e = world.entity(subject)
    t = world.entity_type(subject)
    if t == "character":
        s = rng.choice([e.name, f"{e.name} the {e.kind}"]) if rng else f"{e.name} the {e.kind}"
    elif t == "thing":
        s = f"the {e.name}"
    else:
        s = e.name
    return s, s[0].upper() + s[1:]


def state(world, subject, attribute, value, rng=None, template=None):
    """One sentence stating subject.attribute = value (true or not)."""
    temps = FACT_TEMPLATES[key(world, subject, attribute)]
    t = temps[template if template is not None else rng.randrange(len(temps))]
    if attribute == "kind":         # "Pip the fox is a fox" reads badly
        s = S = subject
    else:
        s, S = _subject_forms(world, subject, rng)
    out = t.format(s=s, S=S, v=value, V=value[0].upper() + value[1:])
    return re.sub(r"\ba (?=[aeiou])", "an ", out)


def question(world, subject, attribute, rng):
    qs = QUESTIONS[key(world, subject, attribute)]
    s, _ = _subject_forms(world, subject, rng)
    return rng.choice(qs).format(s=s, n=subject)


def premise_question(world, subject, attribute, wrong, rng):
    s, _ = _subject_forms(world, subject, rng)
    return rng.choice(PREMISE_QUESTIONS[attribute]).format(s=s, v=wrong)


# ----------------------------------------------------------------------------
# finding statements again (tests and the report)

def _pools(world):
    chars = [c.name for c in world.characters]
    places = [p.name for p in world.places]
    return {"kind": KINDS, "colour": COLOURS, "home": places, "food": FOODS, "job": JOBS,
            "friend": chars, "near": places, "keeper": chars, "material": MATERIALS,
            "owner": chars, "place": places}


def _alt(xs):
    return "|".join(re.escape(x) for x in sorted(xs, key=len, reverse=True))


def statement_patterns(world):
    """[(key, template_index, compiled regex with groups subj and val)]."""
    pools = _pools(world)
    kinds = _alt(KINDS)
    subj = {"character": rf"(?P<subj>{_alt(c.name for c in world.characters)})(?: the (?:{kinds}))?",
            "place": rf"(?P<subj>{_alt(p.name for p in world.places)})",
            "thing": rf"[Tt]he (?P<subj>{_alt(o.name for o in world.objects)})"}
    out = []
    for k, temps in FACT_TEMPLATES.items():
        etype, attr = k.split(".")
        for i, t in enumerate(temps):
            pat = re.escape(t).replace("a\\ \\{v\\}", "an?\\ \\{v\\}")
            for ph in ("\\{S\\}", "\\{s\\}"):
                pat = pat.replace(ph, subj[etype], 1)
            val = rf"(?P<val>{_alt(pools[attr])})"
            pat = pat.replace("\\{v\\}", val).replace("\\{V\\}", val)
            out.append((k, i, re.compile(r"(?<![A-Za-z])" + pat)))
    return out


def count_statements(world, text, patterns=None):
    """Counter of (subject, attribute, value, template_index) stated in text."""
    c = Counter()
    for k, i, rx in patterns or statement_patterns(world):
        attr = k.split(".")[1]
        for m in rx.finditer(text):
            c[(m.group("subj"), attr, m.group("val"), i)] += 1
    return c
