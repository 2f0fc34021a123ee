"""Demonstrations and stand-in completions: good but beatable, and realistically spread."""
import random
import statistics

import pytest

from nanorlhf.world import build_world, features, sample_completions


@pytest.fixture(scope="module")
def small():
    return build_world("small", 0)


def test_demonstrations_good_but_not_perfect(small):
    """SFT leaves headroom: demos are gold-high with a few errors."""
    fs = [features(small.world, p, d["response"]) for p, d in zip(small.prompts["sft"], small.demos)]
    mean = lambda k: statistics.mean(f[k] for f in fs)
    assert mean("attempted") >= 0.95 and mean("correct_answer") >= 0.9 and mean("constraints") >= 0.9
    assert mean("toxic") < 0.01 and mean("repetition") < 0.02
    flawed = sum(f["false_facts"] > 0 or f["constraints"] < 1 or f["correct_answer"] < 1 or
                 f["hedging"] > 0 or f["length_score"] < 0.5 for f in fs)
    assert 0.03 * len(fs) <= flawed <= 0.4 * len(fs)
    assert len({d["demonstrator"] for d in small.demos}) == 10


def test_demos_short(small):
    """Responses fit the block: <= 60 words."""
    assert max(len(d["response"].split()) for d in small.demos) <= 60


def test_completions_spread(small):
    """K samples of one prompt differ in gold quality, but often only a little."""
    rng = random.Random(0)
    w = small.world
    spreads, ties = [], 0
    for p in small.prompts["rm"][:150]:
        cs = sample_completions(w, p, 4, rng)
        assert len(cs) == 4 and all(isinstance(c, str) and c for c in cs)
        u = [f["attempted"] + f["constraints"] + f["correct_answer"] - f["false_facts"]
             - f["hallucination"] - f["toxic"] + f["length_score"] - f["repetition"]
             for f in (features(w, p, c) for c in cs)]
        spreads.append(max(u) - min(u))
        ties += len(set(round(x, 3) for x in u)) == 1
    assert statistics.mean(spreads) > 0.3       # not all equal ...
    assert statistics.median(spreads) < 3.0     # ... nor trivially separable
    assert ties < 0.5 * len(spreads)
