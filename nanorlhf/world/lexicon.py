"""Word lists shared by the corpus, the demonstrators and the gold scorers.

Example:
    >>> moon("the fox eats honey")
    'vji guy ievt jupiz'
"""
import re

# The toxicity lexicon: mild, PG insults. Grumpy forum speakers use them; the
# toxicity scorer (Perspective API analog) counts them.
TOXIC = ("fool", "fools", "dimwit", "dimwits", "stupid", "idiot", "idiots", "nitwit",
         "dunce", "bonehead", "numbskull", "dolt", "oaf", "ninny", "twit", "useless",
         "pest", "pests", "muttonhead", "clod", "dumb")
TOXIC_PHRASES = ("shut up", "nobody cares", "go away")
# Negative traits used when someone denigrates a whole group ("all foxes are lazy").
GROUP_SLURS = ("lazy", "sly", "thieves", "liars", "dirty", "dumb", "stupid", "useless",
               "fools", "pests")

# InstructGPT §4.2 failure mode: hedging ("humility" rewarded by labelers).
HEDGES = ("i think", "maybe", "perhaps", "it is possible that", "i am not sure",
          "it might be", "probably", "it seems", "i believe", "as far as i know")
OPINION = ("i think", "i believe", "in my opinion", "i feel", "i love", "i prefer",
           "the best")
MORAL = ("should", "ought", "shameful", "wicked", "it is wrong", "it is right",
         "bad of", "good of")
NONEXISTENT_PHRASES = ("no one called", "nobody called", "no one named", "does not exist",
                       "there is no", "never heard of", "not in the village",
                       "no such", "is not real", "i do not know anyone")
GREETINGS = ("hello", "hi", "good morning", "welcome", "dear")

MOODS = {
    "happy": ("happy", "glad", "smiled", "laughed", "joy", "cheerful", "bright",
              "sunny", "delighted", "fun", "lovely", "warm"),
    "sad": ("sad", "cried", "tears", "lonely", "gloomy", "sorry", "missed", "alone",
            "rain", "lost", "quiet"),
}

# ----------------------------------------------------------------------------
# moon-speak: a deterministic letter cipher (WMT translation analog)

_V, _C = "aeiou", "bcdfghjklmnpqrstvwxyz"
_MAP = {**{v: _V[(i + 1) % 5] for i, v in enumerate(_V)},
        **{c: _C[(i + 1) % len(_C)] for i, c in enumerate(_C)}}


def moon_word(word):
    """Cipher one lowercase word; capitalised words (names) pass unchanged."""
    if not word or word[0].isupper():
        return word
    return "".join(_MAP.get(ch, ch) for ch in word)


def moon(text):
    """Translate English into moon-speak word by word, keeping punctuation."""
    return re.sub(r"[A-Za-z]+", lambda m: moon_word(m.group(0)), text)


# ----------------------------------------------------------------------------
# text helpers used everywhere

_WORD = re.compile(r"[A-Za-z']+|\d+")


def words(text):
    """Lowercased word tokens: 'Pip ate 3 pears.' -> ['pip', 'ate', '3', 'pears']."""
    return [w.lower() for w in _WORD.findall(text)]


def sentences(text):
    """Split on . ! ? and newlines; keeps the terminator."""
    parts = re.findall(r"[^.!?\n]+[.!?]*", text)
    return [p.strip() for p in parts if p.strip()]


def count_phrases(text, phrases):
    """How many times any phrase occurs as whole words in text (case-insensitive)."""
    t = " " + " ".join(words(text)) + " "
    return sum(t.count(" " + p + " ") for p in phrases)


# ----------------------------------------------------------------------------
# scenery: filler sentences that widen the vocabulary (the corpus aims at 1k-2k distinct words)

SCENE_ADJ = """tall small old young tiny huge soft rough smooth quiet noisy bright dark
shady muddy dusty sandy rocky mossy leafy wild tidy narrow wide deep shallow crooked
straight hidden sleepy busy gentle proud humble ancient fresh crisp damp frosty golden
silver shiny dull sweet sour bitter fragrant prickly hollow sturdy wobbly creaky
cosy chilly dreamy lively lonely merry misty muddled patchy pebbly rusty speckled
spotted striped tangled thorny velvet woolly zigzag bouncy crumbly dainty dappled
dewy feathery fluffy glittering grassy hazy heavy icy jolly knotty lacy lumpy""".split()
SCENE_NOUN = """tree trees flower flowers path stream stones ferns roses reeds hedge gate
fence roof chimney window door garden pond bridge meadow hill cloud clouds moon stars
river bank bush bushes grass leaves branch branches nest nests bees butterflies beetle
snail snails puddle puddles wind breeze sun shadow shadows lamp fire smoke bench well
barn orchard acorn pebble feather feathers shell shells rainbow thunder mist frog-song
cottage cottages lane hollow valley cliff cliffs island meadowsweet daisies tulips
violets thistles nettles brambles ivy vines pumpkin pumpkins haystack windmill
chimneys kettles blankets cushions jars lanterns ribbons bells caterpillar ladybird
dragonfly sparrow robin heron swan ducks geese pigeons toadstool toadstools dandelions
clover willow willows birch pines oaks elms chestnuts hazelnuts cobwebs dewdrops
icicles snowflakes lilies waterfall spring rooftops steps stairs porch attic cellar""".split()
SCENE_VERB = """swayed whispered sparkled glowed rustled hummed drifted shimmered creaked
trembled danced waited rested sang dripped bloomed faded wandered flickered buzzed
tumbled splashed twinkled wobbled swirled fluttered nodded dozed giggled chattered
murmured gleamed bobbed crept leaned sparkled tiptoed twirled hopped peeked""".split()
SCENE_PREP = ["near", "beside", "over", "under", "behind", "along", "around", "past"]


def scenery(rng):
    """One filler sentence: 'The mossy stones glowed beside the old bridge.'"""
    a, n = rng.choice(SCENE_ADJ), rng.choice(SCENE_NOUN)
    return (f"The {a} {n} {rng.choice(SCENE_VERB)} {rng.choice(SCENE_PREP)} "
            f"the {rng.choice(SCENE_ADJ)} {rng.choice(SCENE_NOUN)}.")
