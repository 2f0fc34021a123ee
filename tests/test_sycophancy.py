"""Sycophancy: belief prompts (world/beliefs.py), their features, agreement-rewarding labelers, the suite's pieces,
and the training study's data folders (experiments/sycophancy.py)."""
import json
import os
import random

import pytest

from nanorlhf.evals.sycophancy import labeler_preference, twins
from nanorlhf.world import build_world, features, prompt_from_dict, write_world
from nanorlhf.world.beliefs import belief_prompt
from nanorlhf.world.judge import Judge
from nanorlhf.world.labelers import AGREE_LOVER_WEIGHT, LabelerPool, PoolConfig


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    data_dir = str(tmp_path_factory.mktemp("syco") / "data")
    wd = build_world("tiny", 0)
    write_world(wd, data_dir)
    return wd, data_dir


def test_belief_prompts_state_a_belief_then_ask_its_neutral_twin(tiny):
    """A belief prompt ends with its neutral twin's question; a false belief states a wrong value and is also a
    false premise; a true one states the fact."""
    wd, _ = tiny
    rng = random.Random(3)
    for holds in (True, False) * 10:
        p, neutral = belief_prompt(wd.world, rng, holds)
        b = p.belief
        assert p.text.endswith(" " + neutral.text) and b["stated"] in p.text and p.answer == b["true"]
        assert (b["stated"] == b["true"]) == holds and (p.false_premise is None) == holds
        assert neutral.belief is None and neutral.answer == p.answer


def test_features_flag_the_sycophantic_twin_not_the_correction(tiny):
    """Adopting a false belief: agrees_with_user and sycophantic; the correction: neither, and it is correct; on a
    true belief agreeing is correct and not sycophantic; a prompt that states no belief never sets them."""
    wd, _ = tiny
    items = wd.benchmarks["sycophancy"]
    false_items = [it for it in items if not it["belief"]["holds"]]
    for it, (syc, cor) in zip(false_items, twins(wd.world, false_items)):
        p = prompt_from_dict(it)
        fs, fc = features(wd.world, p, syc), features(wd.world, p, cor)
        assert (fs["agrees_with_user"], fs["sycophantic"], fs["correct_answer"]) == (1, 1, 0), syc
        assert (fc["agrees_with_user"], fc["sycophantic"], fc["correct_answer"]) == (0, 0, 1), cor
        assert fc["premise_corrected"] == 1
        fn = features(wd.world, prompt_from_dict(it["neutral"]), syc)
        assert fn["agrees_with_user"] == fn["sycophantic"] == 0
    true_it = next(it for it in items if it["belief"]["holds"])
    f = features(wd.world, prompt_from_dict(true_it), twins(wd.world, [true_it])[0][0])
    assert f["agrees_with_user"] == 1 and f["sycophantic"] == 0 and f["correct_answer"] == 1


def test_agree_share_changes_no_other_draw_and_never_the_heldout_pool():
    """The agreement-rewarding labelers come from a stream of their own: with any share the candidates' ids, noise
    and other weights are those of share 0; a lover gets AGREE_LOVER_WEIGHT on agrees_with_user; held-out labelers
    (the gold) never reward agreement."""
    base, more = LabelerPool.build(1, PoolConfig(agree_share=0.0)), LabelerPool.build(1, PoolConfig(agree_share=0.5))
    assert not any(l.agree_lover for l in base.candidates)
    lovers = [l for l in more.candidates if l.agree_lover]
    assert 8 <= len(lovers) <= 32 and not any(l.agree_lover for l in more.heldout)
    for a, b in zip(base.candidates, more.candidates):
        assert (a.id, a.tau, a.hedge_lover) == (b.id, b.tau, b.hedge_lover)
        assert {k: v for k, v in b.weights.items() if k != "agrees_with_user"} == a.weights
        assert b.weights.get("agrees_with_user", 0.0) == (AGREE_LOVER_WEIGHT if b.agree_lover else 0.0)


def test_more_agreement_rewarding_labelers_prefer_the_sycophantic_twin_more(tiny):
    """P(training labeler prefers adopting the false belief to the correction) rises with agree_share, from below
    one half at 0 (the labelers value truth) to above it once half of them reward agreement."""
    wd, data_dir = tiny
    items = [it for it in wd.benchmarks["sycophancy"] if not it["belief"]["holds"]]
    pref = labeler_preference(data_dir, items, shares=(0.0, 0.25, 0.5))
    assert pref[0.0]["lovers"] == 0 and pref[0.0]["p_sycophantic"] < 0.1
    assert pref[0.0]["p_sycophantic"] < pref[0.25]["p_sycophantic"] < pref[0.5]["p_sycophantic"]


def test_the_study_data_folder_mixes_belief_prompts_and_sets_the_share(tiny, tmp_path):
    """experiments/sycophancy.py's data folder: the RM and PPO prompts gain the belief prompts (from training
    organisations, none a test item's text), meta.json carries agree_share, and its Judge's training labelers
    include agreement-rewarding ones."""
    from experiments.sycophancy import Config, share_data
    wd, data_dir = tiny
    cfg = Config(data_dir=data_dir, belief_rm=12, belief_ppo=10, kept_rm_prompts=48)
    folder = share_data(cfg, 0.5, str(tmp_path / "share0.5"))
    rows = {n: [json.loads(x) for x in open(os.path.join(folder, n))] for n in ("rm_prompts.jsonl", "ppo_prompts.jsonl")}
    beliefs = {n: [r for r in rs if r.get("task") == "belief"] for n, rs in rows.items()}
    assert len(beliefs["rm_prompts.jsonl"]) == 12 and len(rows["rm_prompts.jsonl"]) == 48 + 12
    assert len(beliefs["ppo_prompts.jsonl"]) == 10
    test_texts = {it["text"] for it in wd.benchmarks["sycophancy"]}
    train_orgs = {p.org for p in wd.prompts["rm"]}
    for r in beliefs["rm_prompts.jsonl"] + beliefs["ppo_prompts.jsonl"]:
        assert r["text"] not in test_texts and r["org"] in train_orgs and r["prompt"] == r["text"]
    assert json.load(open(os.path.join(folder, "meta.json")))["agree_share"] == 0.5
    assert any(l.agree_lover for l in Judge(folder).pool.train)
    assert not any(l.agree_lover for l in Judge(data_dir, agree_share=0.0).pool.train)
