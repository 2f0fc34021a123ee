"""Stand-in SFT samples, for calibrating simulated labelers before any model exists.

InstructGPT §3.5 ranks K = 4..9 samples of one prompt. Real samples of one
prompt are often close in quality; here each completion is a demonstrator's
answer with zero, one or two defects drawn independently, so the gold
utilities of the K completions spread realistically (a labeler-agreement
target of ~73% needs pairs that are not trivially separable).

Example:
    >>> import random
    >>> from nanorlhf.world.entities import make_world
    >>> from nanorlhf.world.scales import SCALES
    >>> from nanorlhf.world.tasks import GENERATORS, STYLE0
    >>> w = make_world(SCALES["tiny"], 0); rng = random.Random(0)
    >>> p = GENERATORS["generation"](w, rng, STYLE0)
    >>> len(sample_completions(w, p, 4, rng))
    4
"""
from . import phrasing
from .demos import DEMONSTRATORS, write
from .lexicon import sentences

# defect -> probability per completion
DEFECTS = {"wrong_fact": 0.15, "miss_constraint": 0.15, "hedge": 0.15, "too_long": 0.12,
           "too_short": 0.08, "repeat": 0.08, "off_task": 0.08, "rude": 0.04}


def _ramble(world, p, rng):
    """Extra true but unasked-for sentences (the length hack, made honest)."""
    f = rng.sample(world.facts, 3)
    return " ".join(phrasing.state(world, x.subject, x.attribute, x.value, rng) for x in f)


def _continue(world, p, rng):
    """What a base model does: write more questions instead of an answer."""
    f = rng.sample(world.facts, 2)
    return " ".join(phrasing.question(world, x.subject, x.attribute, rng) for x in f)


def apply_defect(world, p, text, defect, rng):
    """Post-edit a response with one surface defect."""
    if defect == "hedge":
        return rng.choice(["I think ", "Maybe ", "I am not sure, but "]) + text[0].lower() + text[1:]
    if defect == "too_long":
        return text + " " + _ramble(world, p, rng)
    if defect == "too_short":
        return " ".join(text.split()[:max(1, len(text.split()) // 3)])
    if defect == "repeat":
        last = (sentences(text) or [text])[-1]
        return text + (" " + last) * rng.randint(1, 3)
    if defect == "off_task":
        return _continue(world, p, rng) if rng.random() < 0.7 else p.text + " " + _continue(world, p, rng)
    if defect == "rude":
        return rng.choice(["Fine, you fool. ", "Ugh, what a stupid question. "]) + text
    return text


def sample_completions(world, p, k, rng):
    """k plausible SFT-model samples for prompt p, with varied defects."""
    out = []
    for _ in range(k):
        d = rng.choice(DEMONSTRATORS)
        hits = [x for x, q in DEFECTS.items() if rng.random() < q]
        text = write(world, p, rng, d, wrong="wrong_fact" in hits,
                     skip_constraints="miss_constraint" in hits)
        for x in hits:
            text = apply_defect(world, p, text, x, rng)
        out.append(text)
    return out
