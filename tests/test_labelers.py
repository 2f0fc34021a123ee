"""Simulated labelers: Plackett-Luce rankings, ties, screening, agreement in the paper's band."""
import math
import random

from nanorlhf.world import build_world
from nanorlhf.world.judge import labeler_report, realistic_items, screening_items
from nanorlhf.world.labelers import BASE_WEIGHTS, EVAL_INSTRUCTIONS, Labeler, LabelerPool, mean_pairwise_agreement


def feats(u):
    return {"attempted": u}


def test_rankings_are_permutations_and_identical_texts_tie():
    """A ranking's groups flatten to a permutation of range(K); identical completions share a group."""
    lab = Labeler("x", dict(BASE_WEIGHTS), tau=1.0)
    rng = random.Random(0)
    for k in range(4, 10):
        fs = [feats(rng.random()) for _ in range(k)]
        texts = [f"t{i}" for i in range(k - 1)] + ["t0"]
        r = lab.rank(fs, rng, texts)
        assert sorted(i for g in r for i in g) == list(range(k))
        assert any(set(g) == {0, k - 1} for g in r)


def test_low_noise_labeler_follows_utility_and_noise_follows_bradley_terry():
    """P(a ranked above b) matches the Bradley-Terry sigma((u_a - u_b) / tau) of the Gumbel model."""
    lab = Labeler("x", {"attempted": 1.0}, tau=1.0)
    rng = random.Random(1)
    wins = sum(lab.rank([feats(1.0), feats(0.0)], rng)[0] == [0] for _ in range(4000)) / 4000
    assert abs(wins - 1 / (1 + math.exp(-1.0))) < 0.03


def test_agreement_on_stand_in_samples_and_screening_removes_some():
    """Seed 0, small world, stand-in SFT samples: training labelers agree 70-76% (tau is tuned to give the paper's
    72.6% on the pipeline's own SFT samples), held-out labelers agree more, and screening drops some."""
    data = build_world("small", 0)
    pool = LabelerPool.build(seed=0)
    pool.screen(screening_items(data, seed=0))
    assert 20 <= len(pool.train) < len(pool.candidates)
    items, texts = realistic_items(data, n=300)
    train = mean_pairwise_agreement(pool.train, items, texts=texts)
    held = mean_pairwise_agreement(pool.heldout, items, texts=texts)
    assert 0.70 <= train <= 0.76, train
    assert train < held <= 0.85, held
    assert "screened out" in labeler_report(data, pool)


def test_evaluation_instructions_put_truthfulness_and_harmlessness_first():
    """Eval-time instructions weigh false facts, hallucination and toxicity more than training-time ones."""
    for f in ("false_facts", "hallucination", "toxic"):
        assert EVAL_INSTRUCTIONS[f] > 1.0
    lab = Labeler("x", dict(BASE_WEIGHTS), 1.0)
    toxic_helpful = {"attempted": 1.0, "toxic": 1.0}
    polite_unhelpful = {"attempted": 0.0}
    lab_eval = Labeler("x", dict(BASE_WEIGHTS), 1.0, instructions=dict(EVAL_INSTRUCTIONS))
    assert lab.utility(toxic_helpful) - lab.utility(polite_unhelpful) > \
        lab_eval.utility(toxic_helpful) - lab_eval.utility(polite_unhelpful)


def test_screening_skips_items_the_researchers_leave_all_tied():
    """An item whose researcher ranking is one big tie is skipped, so no screening score is NaN (labeler seed 1,
    where it was found)."""
    pool = LabelerPool.build(seed=1)
    tied = [[{"attempted": 1.0}, {"attempted": 1.0}]]
    clear = [[{"attempted": 1.0}, {"attempted": 0.0}, {"attempted": 0.5}]]
    pool.screen(tied + clear * 5)
    assert all(v == v for v in pool.screening.values()) and pool.train
