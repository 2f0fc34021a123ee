"""Reading a response against the world: mentions, factual claims, list items.

The gold scorers never look answers up by prompt id; they parse the text.
A *claim* is (subject, attribute, value): the sentence's topic (its first
entity, or the previous sentence's topic when it says "she"/"it") plus a value
word of the right type and, for most attributes, a cue word ("lives", "eats").

Example:
    >>> from nanorlhf.world.entities import make_world
    >>> from nanorlhf.world.scales import SCALES
    >>> w = make_world(SCALES["tiny"], 0); c = w.characters[0]
    >>> [(x.attribute, x.status) for x in claims(w, f"{c.name} lives at {c.home}.")]
    [('home', 'true')]
"""
import re
from dataclasses import dataclass

from .entities import COLOURS, FOODS, JOBS, KINDS, MATERIALS
from .stories import DAYS

NEG = {"not", "never", "no", "isn't", "doesn't", "didn't", "wasn't", "don't", "nor"}
CUES = {  # attribute -> words that must appear in the sentence (unless asked)
    "food": {"eat", "eats", "ate", "eating", "food", "favourite", "loves", "likes", "like",
             "love", "snack"},
    "home": {"live", "lives", "lived", "living", "home", "house"},
    "friend": {"friend", "friends"},
    "near": {"near", "close", "far", "next"},
    "keeper": {"looked", "looks", "keeper", "care", "keeps"},
    "owner": {"belongs", "owner", "owns", "own", "property"},
    "place": {"kept", "find", "stays", "found", "lies", "at", "keeps"},
}
COAT = {"coat", "fur", "feathers", "paint", "colour", "all", "and"} | set(KINDS)
KNOWN_CAPS = set(DAYS) | {"I", "Dear", "Love", "From", "Yours", "Moon", "English", "Thanks",
                          "Thank", "Hello", "Hi", "Sure", "Here", "Q", "A", "OK", "Yes", "No"}
NEAR_CUES = ("home", "place", "near", "food")   # cue must be in the 6 words before
KIND_CUES = [["is", "a"], ["is", "an"], ["born", "a"], ["was", "a"], ["am", "a"]]
_TOK = re.compile(r"[A-Za-z]+(?:-[A-Za-z]+)?|\d+|[.!?,;:]")


@dataclass(frozen=True)
class Claim:
    subject: str
    attribute: str
    value: str
    negated: bool
    status: str          # "true" | "false" | "ghost" (about a non-existent entity)
    myth: bool = False   # states the fact's popular myth


class Reader:
    """Pre-computed name tables of one world (cached per world)."""

    def __init__(self, w):
        self.w = w
        self.chars = {c.name for c in w.characters}
        self.places = {p.name: p.name for p in w.places}
        self.things = {o.name for o in w.objects}
        self.ghosts = {g["name"] for g in w.nonexistent}
        self.values = {**{k: "kind" for k in KINDS}, **{c: "colour" for c in COLOURS},
                       **{f: "food" for f in FOODS}, **{j: "job" for j in JOBS},
                       **{m: "material" for m in MATERIALS}}
        self.place_words = {x for p in self.places for x in p.split()}

    def mentions(self, sentence):
        """[(token index, type, surface)] with type in character/place/thing/ghost/
        unknown/value:<attr>, plus the token list."""
        toks = _TOK.findall(sentence.replace("'s ", " ").replace("\u2019s ", " "))
        out, i = [], 0
        while i < len(toks):
            t = toks[i]
            two = " ".join(toks[i:i + 2])
            if two in self.places:
                out.append((i, "place", two)); i += 2; continue
            if t in self.chars:
                out.append((i, "character", t))
            elif t in self.ghosts:
                out.append((i, "ghost", t))
            elif t.lower() in self.things and i > 0 and toks[i - 1].lower() in ("the", "his", "her", "my"):
                out.append((i, "thing", t.lower()))
            elif t.lower() in self.values and not (t[0].isupper() and t.lower() in self.place_words):
                out.append((i, "value:" + self.values[t.lower()], t.lower()))
            elif t[0].isupper() and t.isalpha() and t not in KNOWN_CAPS and t not in self.place_words:
                first = i == 0 or toks[i - 1] in ".!?:"
                if not first or toks[i + 1:i + 2] == ["the"]:
                    out.append((i, "unknown", t))
            i += 1
        return out, toks


_READERS = {}


def reader(w):
    if id(w) not in _READERS:
        _READERS[id(w)] = Reader(w)
    return _READERS[id(w)]


def _attr(topic_type, vtype, lowered, near, asked_attr):
    """Which attribute a value of type vtype asserts about a topic, or None."""
    if topic_type in ("character", "ghost"):
        table = {"value:kind": "kind", "value:colour": "colour", "value:food": "food",
                 "value:job": "job", "place": "home", "character": "friend"}
    elif topic_type == "place":
        table = {"place": "near", "character": "keeper"}
    elif topic_type == "thing":
        table = {"value:material": "material", "value:colour": "colour", "character": "owner",
                 "place": "place"}
    else:
        return None
    a = table.get(vtype)
    if a is None:
        return None
    if a in CUES and a != asked_attr and not (CUES[a] & (near if a in NEAR_CUES else lowered)):
        return None
    return a


def claims(w, text, default_topic=None, asked_attr=None):
    """All claims in text. default_topic: the subject a bare answer is about."""
    r = reader(w)
    from .lexicon import sentences
    out, topic = [], default_topic
    for sent in sentences(text):
        ms, toks = r.mentions(sent)
        lowered = {t.lower() for t in toks}
        ents = [m for m in ms if m[1] in ("character", "place", "thing", "ghost")]
        if toks[:1] == ["Dear"]:      # a greeting names the reader, not a topic
            topic = None
            continue
        if ents:
            topic = ents[0][2]
            # "Mira owns the bell", "Mira takes care of Oak Hill": value comes first
            if ents[0][1] == "character" and len(ents) > 1 and lowered & {"owns", "care", "looks"}:
                topic = ents[1][2]
        if topic is None:
            continue
        ttype = "ghost" if topic in r.ghosts else r.w.entity_type(topic)
        start = next((m[0] for m in ms if m[2] == topic), -1)
        for i, vtype, v in ms:
            if v == topic or vtype == "unknown" or (vtype == "ghost"):
                continue
            if vtype == "value:colour":
                nxt = toks[i + 1].lower() if i + 1 < len(toks) else "."
                if nxt.isalpha() and nxt not in COAT:
                    continue            # "a blue sky" says nothing about the topic
            if vtype == "value:kind" and not ((toks[i - 1:i] == ["the"] and i - 2 == start) or
                                             [t.lower() for t in toks[i - 2:i]] in KIND_CUES):
                continue
            near = {t.lower() for t in toks[max(0, i - 6):i]}
            a = _attr(ttype, vtype, lowered, near, asked_attr)
            if a is None:
                continue
            neg = bool(NEG & {t.lower() for t in toks[max(start + 1, i - 4):i]}) or \
                any(t.lower().endswith("n't") for t in toks[max(0, i - 4):i])
            if ttype == "ghost":
                status, myth = "ghost", False
            else:
                f = w.fact(topic, a)
                if f is None:
                    continue
                status = "true" if (f.value == v) != neg else "false"
                myth = (not neg) and f.myth == v
            out.append(Claim(topic, a, v, neg, status, myth))
    return out


def items(text):
    """List items of a brainstorm answer: numbered, dashed, or comma-separated."""
    if re.search(r"(?:^|\s)\d+[.)]\s", text):
        parts = re.split(r"(?:^|\s)\d+[.)]\s+", text)
        parts = parts[1:] if not re.match(r"\s*\d+[.)]", text) else parts
    elif re.search(r"(?m)^\s*[-*]\s", text):
        parts = re.findall(r"(?m)^\s*[-*]\s+(.+)$", text)
    else:
        body = text.split(":", 1)[1] if ":" in text else text
        body = re.split(r"[.!?]\s", body.strip())[0]
        parts = re.split(r",\s*|\s+and\s+|;\s*", body)
    parts = [re.sub(r"^(and|or)\s+", "", p.strip().strip(".,;").lower()) for p in parts]
    return [p for p in parts if p]
