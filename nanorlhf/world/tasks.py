"""One generator per use-case category of InstructGPT Table 1.

Each generator returns a `Prompt`: the text a user would type plus the
structured fields the gold scorer needs (subject, attribute, answer,
constraints, passage, false premise, ...). The scorer never looks answers up
by id: it parses the response against these fields and the world.

Example:
    >>> import random
    >>> from nanorlhf.world.entities import make_world
    >>> from nanorlhf.world.scales import SCALES
    >>> w = make_world(SCALES["tiny"], 0)
    >>> p = GENERATORS["open_qa"](w, random.Random(1), STYLE0)
    >>> p.category, bool(p.text)
    ('open_qa', True)
"""
from dataclasses import dataclass, field, asdict

from . import phrasing, stories
from .entities import COLOURS, FOODS, JOBS, KINDS, MATERIALS, OBJECTS
from .lexicon import moon

CATEGORIES = ("generation", "open_qa", "brainstorming", "chat", "rewrite",
              "summarization", "classification", "other", "closed_qa", "extract")
# InstructGPT Table 1: use-case mix of the RM dataset, percent
TABLE1 = {"generation": 45.6, "open_qa": 12.4, "brainstorming": 11.2, "chat": 8.4,
          "rewrite": 6.6, "summarization": 4.2, "classification": 3.5, "other": 3.5,
          "closed_qa": 2.6, "extract": 1.9}
CLOSED_DOMAIN = ("summarization", "closed_qa", "extract")
ACTIVITIES = ("swim", "walk", "sing", "fish", "read", "play", "dance", "paint", "picnic",
              "climb", "rest", "explore")
RUDE = ("Give me the {obj}, you {ins}.", "Move out of my way, you {ins}.",
        "Only a {ins} would lose the {obj}.", "Stop talking, you {ins}, and fix the {obj}.")
POLITE = ("Could you please pass me the {obj}?", "Thank you for fixing the {obj}.",
          "Would you like to visit {place} with me?", "Your {obj} is lovely.",
          "Please bring the {obj} to {place} when you can.", "I would love to see {place} with you.",
          "Thank you, the {obj} at {place} looks lovely.")


@dataclass
class Prompt:
    id: str
    org: str
    category: str
    task: str                       # sub-type within the category, e.g. "story"
    text: str                       # the instruction as the user types it
    subject: str | None = None      # entity the prompt is about
    attribute: str | None = None    # asked attribute (open QA)
    answer: object = None           # gold answer: value / label / list / translation
    constraints: list = field(default_factory=list)   # [{"type":...}, ...]
    passage: str | None = None      # closed-domain input text
    source: str | None = None       # text to rewrite / classify / translate
    options: list = field(default_factory=list)       # classification labels
    false_premise: dict | None = None   # {"attribute", "claimed", "true"}
    nonexistent: dict | None = None     # {"name", "kind"}
    belief: dict | None = None          # the user's stated belief: {"attribute", "stated", "true", "holds"}
    items: str | None = None        # brainstorm item pool name

    def to_dict(self):
        return asdict(self)


@dataclass
class Style:
    """How an organisation phrases requests."""
    openers: tuple = ("",)          # prefixes for instructions
    constraint_rate: float = 0.4    # chance of each optional constraint
    thanks: float = 0.1             # chance of a closing "Thanks!"


STYLE0 = Style()


def prompt_from_dict(d) -> Prompt:
    """Rebuild a Prompt from a JSONL row (extra keys such as response are ignored)."""
    return Prompt(**{k: d[k] for k in Prompt.__dataclass_fields__ if k in d})


def _a(noun):
    """'owl' -> 'an owl', 'fox' -> 'a fox'."""
    return ("an " if noun[0] in "aeiou" else "a ") + noun


def _ask(rng, style, body):
    """Wrap an imperative body ("write a story ...") in the org's phrasing."""
    op = rng.choice(style.openers)
    if op.endswith("?"):            # "Can you ?" -> "Can you write ...?"
        text = f"{op[:-1].rstrip()} {body}?"
    else:
        text = f"{op} {body}." if op else f"{body[0].upper()}{body[1:]}."
    return text + (" Thanks!" if rng.random() < style.thanks else "")


def _constraints(w, rng, style, subject_words):
    cons, parts = [], []
    if rng.random() < style.constraint_rate:
        word = rng.choice([*FOODS, *(o.name for o in w.objects)])
        if word not in subject_words:
            cons.append({"type": "mention", "word": word})
            parts.append(f"Mention {word}")
    if rng.random() < style.constraint_rate * 0.6:
        mood = rng.choice(["happy", "sad"])
        cons.append({"type": "mood", "mood": mood})
        parts.append(f"Make it {mood}")
    if rng.random() < style.constraint_rate * 0.6:
        n = rng.choice([20, 30, 40])
        cons.append({"type": "max_words", "n": n})
        parts.append(f"Use at most {n} words")
    if rng.random() < style.constraint_rate * 0.3:
        word = rng.choice(["very", "really", "little", "lovely"])
        cons.append({"type": "avoid", "word": word})
        parts.append(f"Do not use the word '{word}'")
    return cons, "".join(f" {p}." for p in parts)


# ----------------------------------------------------------------------------
# the ten categories

ADJS = ("short", "funny", "sweet", "gentle", "little", "cosy", "silly", "brave", "bedtime",
        "simple", "kind")
FORMS = ("story", "tale", "poem", "song", "rhyme", "diary entry", "fable", "speech")


def generation(w, rng, style):
    task = rng.choice(["story", "story", "story", "letter", "description", "note"])
    c = rng.choice(w.characters)
    verb = rng.choice(["write", "compose", "make up", "tell me"])
    if task == "story":
        subj, form = c.name, rng.choice(FORMS)
        body = f"{verb} a {rng.choice(ADJS)} {form} about {w.ref(c.name)}"
    elif task == "letter":
        subj, body = c.name, f"write a {rng.choice(ADJS)} letter from {c.name} to {c.friend}"
    elif task == "description":
        subj = rng.choice([c.name, rng.choice(w.places).name, rng.choice(w.objects).name])
        body = f"{rng.choice(['describe', 'tell me about', 'paint a picture of'])} {w.ref(subj)}"
    else:
        p = rng.choice(w.places).name
        subj, body = c.name, f"write a {rng.choice(ADJS)} note from {c.name} inviting friends to {p}"
    cons, tail = _constraints(w, rng, style, {subj})
    return Prompt("", "", "generation", task, _ask(rng, style, body) + tail, subject=subj,
                  constraints=cons)


def open_qa(w, rng, style):
    r = rng.random()
    if r < 0.1:                     # questions about things that do not exist
        g = rng.choice(w.nonexistent)
        attr = rng.choice(["colour", "home", "food", "job"])
        q = {"colour": "What colour is {s}?", "home": "Where does {s} live?",
             "food": "What does {s} like to eat?", "job": "What job does {s} do?"}[attr]
        return Prompt("", "", "open_qa", "nonexistent", q.format(s=f"{g['name']} the {g['kind']}"),
                      subject=g["name"], attribute=attr, answer=None, nonexistent=dict(g))
    if r < 0.25:                    # false premise (InstructGPT §4.3)
        c = rng.choice(w.characters)
        attr = rng.choice(["colour", "home", "food", "job"])
        f = w.fact(c.name, attr)
        pool = {"colour": COLOURS, "food": FOODS, "job": JOBS,
                "home": [p.name for p in w.places]}[attr]
        wrong = f.myth or rng.choice([v for v in pool if v != f.value])
        return Prompt("", "", "open_qa", "false_premise",
                      phrasing.premise_question(w, c.name, attr, wrong, rng), subject=c.name,
                      attribute=attr, answer=f.value,
                      false_premise={"attribute": attr, "claimed": wrong, "true": f.value})
    myths = w.myths()
    f = rng.choice(myths) if (r < 0.4 and myths) else rng.choice(w.facts)
    op = rng.choice(["", "", "Quick question: ", "Tell me, ", "Hi! ", "Question: ",
                     "I wonder, ", "Hey, ", "Please tell me, "])
    q = phrasing.question(w, f.subject, f.attribute, rng)
    text = op + (q[0].lower() + q[1:] if op[-2:] == ", " else q)
    return Prompt("", "", "open_qa", "myth" if f.myth else "fact", text, subject=f.subject,
                  attribute=f.attribute, answer=f.value)


def brainstorming(w, rng, style):
    n = rng.randint(2, 5)
    c = rng.choice(w.characters)
    task = rng.choice(["food", "gift", "place", "activity", "make"])
    n_txt = rng.choice([str(n), stories.NUMBER_WORDS[n]])
    body = {"food": f"list {n_txt} foods {c.name} could bring to a picnic",
            "make": f"list {n_txt} things {w.ref(c.name)} could make from {rng.choice(MATERIALS)}",
            "gift": f"give me {n_txt} gift ideas for {w.ref(c.name)}",
            "place": f"list {n_txt} places {w.ref(c.name)} could visit in the village",
            "activity": f"list {n_txt} things to do at {rng.choice(w.places).name}"}[task]
    cons = [{"type": "n_items", "n": n}]
    return Prompt("", "", "brainstorming", task, _ask(rng, style, body),
                  subject=c.name if task != "activity" else None,
                  constraints=cons, items=task)


def chat(w, rng, style):
    task = rng.choice(["greet", "cheer_up", "recommend", "thanks", "lost"])
    o = rng.choice(w.objects)
    kind, place = rng.choice(KINDS), rng.choice(w.places).name
    hi = rng.choice(["Hi", "Hello", "Good morning", "Hey there"]) + rng.choice(
        ["", ", friend", ", neighbour", ", pal", " again"])
    text = {"greet": rng.choice([f"{hi}! I am {_a(kind)} from {place}. How are you today?",
                                 f"{hi}! I just came back from {place}. How is your day going?"]),
            "cheer_up": rng.choice([f"I feel sad today because I lost my {o.name}. Can you cheer me up?",
                                    f"I had a bad day at {place}. Say something nice to me."]),
            "recommend": rng.choice([f"I am {_a(kind)} and new in the village. Which place should I visit?",
                                     f"{hi}! I am {_a(kind)} from far away. Which place should I visit?",
                                     f"{hi}! Where should I go for a walk today, other than {place}?"]),
            "thanks": rng.choice([f"Thank you for helping me find the {o.name}!",
                                  f"{hi}! Thank you for the visit to {place}.",
                                  f"{hi}, thanks for the {rng.choice(FOODS)}, you are kind."]),
            "lost": rng.choice([f"I cannot find the {o.name}. Where should I look?",
                                f"{hi}! Have you seen the {o.name}? Where should I look?"])}[task]
    cons = [{"type": "mood", "mood": "happy"}] if task == "cheer_up" else []
    return Prompt("", "", "chat", task, text, subject=o.name if task == "lost" else None,
                  answer=o.place if task == "lost" else None, constraints=cons)


def rewrite(w, rng, style):
    task = rng.choice(["polite", "shorter", "happier"])
    o = rng.choice(w.objects).name
    if task == "polite":
        from .corpus import INSULTS
        src = rng.choice(RUDE).format(obj=o, ins=rng.choice(INSULTS))
        keep = [o] if o in src else []
        return Prompt("", "", "rewrite", task, f"'{src}' " + _ask(rng, style, "rewrite this to be polite"),
                      source=src, answer=keep)
    st = stories.story(w, rng, plot="rain" if task == "happier" else None)
    c = st.main
    if task == "shorter":
        src = " ".join(st.sentences[:4])
        n = rng.choice([12, 15, 20])
        return Prompt("", "", "rewrite", task, f"'{src}' " + _ask(rng, style, "make this shorter")
                      + f" Use at most {n} words.", subject=c, source=src, answer=[c],
                      constraints=[{"type": "max_words", "n": n}])
    src = " ".join(st.sentences[1:4])
    return Prompt("", "", "rewrite", task, f"'{src}' " + _ask(rng, style, "rewrite this to sound happy"),
                  subject=c, source=src, answer=[c], constraints=[{"type": "mood", "mood": "happy"}])


def summarization(w, rng, style):
    st = stories.story(w, rng)
    c = st.main
    n = rng.choice([15, 20, 25])
    body = rng.choice(["summarize this story in one sentence", "give a one-sentence summary of this"])
    cons = [{"type": "max_words", "n": n}] if rng.random() < style.constraint_rate else []
    tail = f" Use at most {n} words." if cons else ""
    return Prompt("", "", "summarization", st.plot, f"{st.text} " + _ask(rng, style, body) + tail,
                  subject=c, passage=st.text, answer=[c], constraints=cons)


def classification(w, rng, style):
    task = rng.choice(["tone", "mood", "kind"])
    if task == "tone":
        lab = rng.choice(["polite", "rude"])
        from .corpus import INSULTS
        src = rng.choice(RUDE if lab == "rude" else POLITE).format(
            obj=rng.choice(w.objects).name, ins=rng.choice(INSULTS), place=rng.choice(w.places).name)
        return Prompt("", "", "classification", task, f"'{src}' Is this message polite or rude?",
                      source=src, options=["polite", "rude"], answer=lab)
    if task == "mood":
        st = stories.story(w, rng, plot=rng.choice(["rain", "hunger"]))
        lab = "sad" if st.plot == "rain" else "happy"
        src = st.sentences[3] if lab == "sad" else st.sentences[4]
        return Prompt("", "", "classification", task, f"'{src}' Is this sentence happy or sad?",
                      source=src, options=["happy", "sad"], answer=lab)
    c = rng.choice(w.characters)
    other = rng.choice([k for k in KINDS if k != c.kind])
    opts = [c.kind, other] if rng.random() < 0.5 else [other, c.kind]
    return Prompt("", "", "classification", task, f"Is {c.name} {_a(opts[0])} or {_a(opts[1])}?",
                  subject=c.name, attribute="kind", options=opts, answer=c.kind)


def other(w, rng, style):
    f = rng.choice(w.facts)
    en = phrasing.state(w, f.subject, f.attribute, f.value, rng)
    if en.split()[0] in ("The", "Someone", "Not", "By", "You"):
        en = en[0].lower() + en[1:]
    return Prompt("", "", "other", "translate", f"'{en}' " + _ask(rng, style, "translate this into moon-speak"),
                  source=en, answer=moon(en))


def closed_qa(w, rng, style):
    st = stories.story(w, rng)
    if rng.random() < 0.2:          # the passage does not say: answering is hallucinating
        c = next((c for c in w.characters if c.name in st.mentions), w.characters[0])
        q, a = f"What does {c.name} like to eat?", None
        if c.food in st.mentions:
            q, a = st.qa[0]
    else:
        q, a = rng.choice(st.qa)
    head = rng.choice(["Answer using the text.", "Read this and answer.", "Use only this text."])
    return Prompt("", "", "closed_qa", "unanswerable" if a is None else "span",
                  f"{st.text} {head} {q}", passage=st.text, answer=a,
                  subject=st.main)


def extract(w, rng, style):
    st = stories.story(w, rng)
    task = rng.choice(["characters", "places"])
    names = {c.name for c in w.characters} if task == "characters" else {p.name for p in w.places}
    gold = [m for m in sorted(st.mentions) if m in names]
    body = f"list every {'character' if task == 'characters' else 'place'} named in this text"
    return Prompt("", "", "extract", task, f"{st.text} " + _ask(rng, style, body),
                  passage=st.text, answer=gold)


GENERATORS = {c: globals()[c] for c in CATEGORIES}
__all__ = ["Prompt", "Style", "STYLE0", "GENERATORS", "CATEGORIES", "TABLE1", "CLOSED_DOMAIN",
           "ACTIVITIES", "OBJECTS"]
