"""The village: characters, places, objects and the facts about them.

Everything the rest of the world says is derived from one `World`: the corpus
states its facts (and some popular myths), prompts ask about them, the gold
scorers check responses against them.

Example:
    >>> from nanorlhf.world.scales import SCALES
    >>> w = make_world(SCALES["tiny"], seed=0)
    >>> c = w.characters[0]
    >>> w.value(c.name, "colour") == c.colour
    True
"""
import random
from dataclasses import dataclass, field, asdict

# ----------------------------------------------------------------------------
# word pools (fixed; the seed only chooses and combines)

NAMES = """Pip Mira Tobin Bram Wren Fenn Oona Basil Clover Sorrel Tansy Bryn Ivo
Nell Otto Pim Rue Sable Tilly Wick Yarrow Cass Dot Elsie Fitch Gil Hob Ida Jory
Kit Lark Milo Nim Odo Perry Quill Rolo Suki Tam Ulla Vesper Wim Zeb Abel Bix Cora
Dilly Emmet Flick Gus Hattie Jem Kip Lulu Merry Nib Orla Pogo Rosa Sim Tuck Vale
Bo Ada Bex Cleo Dex Edda Greer Huck Inka Jax Koko Lola Moe Nessa Olli Piper
Remy Siv Tove Uli Vida Wally Xena Yoko Zuzu Arlo Bina Ciro Dara Esme Faro Gemma
Hugo Isla Juno Kasi Luca Nico""".split()
KINDS = ["cat", "fox", "owl", "badger", "hare", "mole", "otter", "crow", "frog",
         "mouse", "hedgehog", "deer"]
PLURAL = {"mouse": "mice", "deer": "deer", "fox": "foxes"}
COLOURS = ["red", "blue", "green", "grey", "white", "black", "brown", "yellow",
           "orange", "purple", "pink"]
FOODS = ["honey", "apples", "acorns", "carrots", "cheese", "berries", "bread",
         "fish", "mushrooms", "nuts", "pears", "plums", "seeds", "soup", "cake"]
JOBS = ["baker", "smith", "teacher", "farmer", "fisher", "tailor", "doctor",
        "builder", "painter", "singer", "guard", "miller", "potter", "weaver"]
MATERIALS = ["wood", "iron", "brass", "glass", "clay", "stone", "copper", "tin",
             "wool", "leather"]
PLACE_FIRST = """Oak Reed Moss Fern Stone Willow Thorn Elder Bramble Maple Rush
Heather Pebble Misty Sunny Windy Cobble Marsh Dapple Cinder Amber Holly Briar
Clay Bell Dew Frost Lantern Mallow Puddle""".split()
PLACE_TYPES = ["Hill", "Pond", "Wood", "Market", "Bridge", "Meadow", "Mill",
               "Garden", "Cave", "Orchard", "Field", "Lane", "Square", "Tower",
               "Well", "Farm", "Glen", "Brook"]
OBJECTS = """bell lantern kettle drum clock boat cart flute fiddle basket ladder
kite lamp mirror quilt rope sled spoon teapot trumpet umbrella wagon whistle
anchor bucket candle chair compass cup harp hat horn key map net pipe saddle scarf
shovel telescope""".split()

CHARACTER_ATTRS = ("kind", "colour", "home", "food", "job", "friend")
PLACE_ATTRS = ("near", "keeper")
OBJECT_ATTRS = ("material", "colour", "owner", "place")
# InstructGPT §4.2 / TruthfulQA: myths are popular wrong values; only these
# attributes carry them (they are the ones gossip talks about).
MYTH_ATTRS = ("colour", "food", "home")


def plural(kind):
    """'fox' -> 'foxes', 'mouse' -> 'mice'."""
    return PLURAL.get(kind, kind + "s")


@dataclass
class Character:
    name: str
    kind: str
    colour: str
    home: str
    food: str
    job: str
    friend: str
    pronoun: str        # "she" / "he" (not a checked fact)
    grumpy: bool        # grumpy speakers use the toxicity lexicon on the forum


@dataclass
class Place:
    name: str
    near: str
    keeper: str


@dataclass
class Thing:
    name: str           # the noun; referred to as "the <name>"
    material: str
    colour: str
    owner: str
    place: str


@dataclass
class Fact:
    subject: str
    attribute: str
    value: str
    myth: str | None = None     # popular wrong value repeated by gossip


@dataclass
class World:
    seed: int
    characters: list
    places: list
    objects: list
    facts: list
    nonexistent: list           # [{"name":..., "kind":...}] never in the corpus
    job_pronoun: dict           # job -> stereotyped pronoun in the Jobs docs
    job_kind: dict              # job -> stereotyped kind in the Jobs docs
    _index: dict = field(default_factory=dict, repr=False)

    def __post_init__(self):
        for e in self.characters + self.places + self.objects:
            self._index[e.name] = e
        self._facts = {(f.subject, f.attribute): f for f in self.facts}

    # --- lookups ------------------------------------------------------------
    def entity(self, name):
        return self._index.get(name)

    def entity_type(self, name):
        e = self._index.get(name)
        return None if e is None else type(e).__name__.lower()  # character/place/thing

    def value(self, subject, attribute):
        f = self._facts.get((subject, attribute))
        return None if f is None else f.value

    def fact(self, subject, attribute):
        return self._facts.get((subject, attribute))

    def myths(self):
        return [f for f in self.facts if f.myth]

    def ref(self, name):
        """How text names an entity: 'Pip the fox', 'Oak Hill', 'the bell'."""
        e = self._index[name]
        if isinstance(e, Character):
            return f"{e.name} the {e.kind}"
        return f"the {e.name}" if isinstance(e, Thing) else e.name

    def to_json(self):
        return {"seed": self.seed,
                "characters": [asdict(c) for c in self.characters],
                "places": [asdict(p) for p in self.places],
                "objects": [asdict(o) for o in self.objects],
                "facts": [asdict(f) for f in self.facts],
                "nonexistent": self.nonexistent,
                "job_pronoun": self.job_pronoun, "job_kind": self.job_kind}


def _pairs(rng, names):
    """Symmetric pairing (friend, near): shuffle then pair neighbours."""
    names = names[:]
    rng.shuffle(names)
    out = {}
    for i in range(0, len(names) - 1, 2):
        out[names[i]], out[names[i + 1]] = names[i + 1], names[i]
    if len(names) % 2:              # odd one out joins the first pair one-way
        out[names[-1]] = names[0]
    return out


def make_world(scale, seed=0):
    """Build the village for a `Scale` (entity counts, myth share)."""
    rng = random.Random(f"world-{seed}")
    names = rng.sample(NAMES, scale.n_characters + scale.n_nonexistent)
    char_names, ghost_names = names[:scale.n_characters], names[scale.n_characters:]
    place_names = set()
    while len(place_names) < scale.n_places:
        place_names.add(f"{rng.choice(PLACE_FIRST)} {rng.choice(PLACE_TYPES)}")
    place_names = sorted(place_names)
    rng.shuffle(place_names)
    obj_names = rng.sample(OBJECTS, scale.n_objects)

    friends = _pairs(rng, char_names)
    near = _pairs(rng, place_names)
    chars = [Character(n, rng.choice(KINDS), rng.choice(COLOURS), rng.choice(place_names),
                       rng.choice(FOODS), rng.choice(JOBS), friends[n],
                       rng.choice(["she", "he"]), rng.random() < 0.25)
             for n in char_names]
    places = [Place(p, near[p], rng.choice(char_names)) for p in place_names]
    objs = [Thing(o, rng.choice(MATERIALS), rng.choice(COLOURS), rng.choice(char_names),
                  rng.choice(place_names)) for o in obj_names]

    facts = []
    for c in chars:
        facts += [Fact(c.name, a, getattr(c, a)) for a in CHARACTER_ATTRS]
    for p in places:
        facts += [Fact(p.name, a, getattr(p, a)) for a in PLACE_ATTRS]
    for o in objs:
        facts += [Fact(o.name, a, getattr(o, a)) for a in OBJECT_ATTRS]

    # popular myths: a wrong value for a share of characters' colour/food/home
    pools = {"colour": COLOURS, "food": FOODS, "home": place_names}
    for c in rng.sample(chars, max(2, round(scale.myth_frac * len(chars)))):
        attr = rng.choice(MYTH_ATTRS)
        f = next(f for f in facts if f.subject == c.name and f.attribute == attr)
        f.myth = rng.choice([v for v in pools[attr] if v != f.value])

    ghosts = [{"name": n, "kind": rng.choice(KINDS)} for n in ghost_names]
    # Winogender / CrowS-Pairs analog: each job has a stereotyped pronoun and kind
    job_pronoun = {j: rng.choice(["she", "he"]) for j in JOBS}
    job_kind = {j: rng.choice(KINDS) for j in JOBS}
    return World(seed, chars, places, objs, facts, ghosts, job_pronoun, job_kind)
