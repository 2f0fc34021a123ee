"""What the reward model pays for (nanorlhf/evals/reward_features.py): the within-prompt fit on made-up data,
the gold's weights against the judge itself, and the diagnostic end to end on a tiny world."""
import dataclasses
import json

import numpy as np
import torch

from nanorlhf.checkpoint import save_checkpoint
from nanorlhf.evals import reward_features as rf
from nanorlhf.evals.context import EvalContext
from nanorlhf.evals.reward_features import (correct_in_place, fact_edit_effect, gold_weights, reward_features,
                                           within_prompt_corr, within_prompt_fit)
from nanorlhf.model import GPT, GPTConfig, ScalarHeadModel
from nanorlhf.tokenizer import Tokenizer
from nanorlhf.world import build_world, write_world
from nanorlhf.world.judge import Judge


def test_within_prompt_fit_recovers_coefficients_under_prompt_offsets_that_fool_a_pooled_fit():
    """y = X b + a per-prompt offset correlated with X: the centred fit returns b; a pooled fit does not;
    a feature constant inside every prompt gets 0."""
    rng = np.random.default_rng(0)
    groups = np.repeat(np.arange(50), 4)
    offset = rng.normal(size=50)[groups] * 3
    X = np.stack([rng.normal(size=200) + offset, rng.normal(size=200), np.repeat(rng.normal(size=50), 4)], axis=1)
    b = np.array([0.5, -2.0, 0.0])
    y = X @ b + offset * 4
    assert np.allclose(within_prompt_fit(X, y, groups), b, atol=1e-9)
    pooled = np.linalg.lstsq(X, y, rcond=None)[0]
    assert abs(pooled[0] - b[0]) > 1.0
    assert within_prompt_corr(y, y + offset, groups) == 1.0


def test_gold_is_the_weighted_sum_of_the_features_with_gold_weights(tmp_path):
    """judge.gold(row, text) == sum_f w_f * x_f for the weights the diagnostic reports, on the labelers'
    demonstrations: the weights are read from the labelers the gold score averages (the instructions' part
    is guarded end to end below, where a feature they reweight varies)."""
    data = str(tmp_path / "data")
    wd = build_world("tiny", 0)
    write_world(wd, data)
    judge = Judge(data)
    w = gold_weights(judge.pool)
    sft = [{**p.to_dict(), "prompt": p.text} for p in judge.data.prompts["sft"][:10]]
    test = [{**p.to_dict(), "prompt": p.text} for p in judge.data.prompts["test"][:10]]
    texts = [d["response"] for d in wd.demos[:10]]
    for r, t in zip(sft + test, texts + texts):  # each demonstration on its own prompt and on another one
        feats = judge.features(r, t)
        assert abs(judge.gold(r, t) - sum(w.get(f, 0.0) * x for f, x in feats.items())) < 1e-9


def test_reward_features_end_to_end_gives_the_gold_weights_back(tmp_path):
    """On tiny untrained policies: one row per policy in the data, the gold's coefficients equal its weights
    wherever the feature varies, and the section's numbers are JSON."""
    data = str(tmp_path / "data")
    wd = build_world("tiny", 0)
    write_world(wd, data)
    tok = Tokenizer.train("\n\n".join(d["text"] for d in wd.corpus), 512)
    tok.save(str(tmp_path / "tok.tiktoken"))
    cfg = GPTConfig(vocab_size=tok.vocab_size, block_size=128, n_layer=1, n_head=2, n_embd=32)
    extra = {"model_config": dataclasses.asdict(cfg), "tokenizer": str(tmp_path / "tok.tiktoken")}
    paths = {}
    for i, name in enumerate(["sft", "ppo"]):
        torch.manual_seed(i)
        paths[name] = str(tmp_path / f"{name}.pt")
        save_checkpoint(paths[name], model=GPT(cfg).state_dict(), config={}, extra=extra)
    save_checkpoint(str(tmp_path / "rm.pt"), model=ScalarHeadModel(cfg).state_dict(), config={},
                    extra={**extra, "bias": 0.0})
    judge = Judge(data)
    ctx = EvalContext(judge, data, str(tmp_path / "out"), paths, rm=str(tmp_path / "rm.pt"), max_new_tokens=8)
    rows = [{**p.to_dict(), "prompt": p.text} for p in judge.data.prompts["val"][:8]]
    sec = reward_features(ctx, rows, samples=2)
    assert set(sec.data) == {"sft", "ppo"} and "|---" in sec.markdown
    w = gold_weights(judge.pool)
    for p, d in sec.data.items():
        varied = [f for f, c in d["gold_coef"].items() if c != 0.0]
        assert varied, p
        for f in varied:
            assert abs(d["gold_coef"][f] - w[f]) < 1e-6, (p, f)
    json.dumps(sec.data)
    assert all(d["fact_edit"]["answers"] == 2 * len(rows) for d in sec.data.values())


def _tiny_case(tmp_path, split="val"):
    """A tiny world's judge, a prompt row of `split`, a character and a place that is not its home."""
    data = str(tmp_path / "data")
    write_world(build_world("tiny", 0), data)
    judge = Judge(data)
    c = judge.world.characters[0]
    wrong = next(p.name for p in judge.world.places if p.name != c.home)
    p = judge.data.prompts[split][0]
    return judge, {**p.to_dict(), "prompt": p.text}, c, wrong


def test_correct_in_place_swaps_a_false_value_for_the_true_one_and_changes_nothing_else(tmp_path):
    """A stated false home becomes the true home: one false fact fewer, the gold up, every feature but the
    facts' the same; an answer with no false claim, or one whose false value occurs twice, is left alone (None)."""
    judge, row, c, wrong = _tiny_case(tmp_path)
    text = f"{c.name} lives at {wrong}."
    fixed = correct_in_place(judge, row, text)
    assert fixed == f"{c.name} lives at {c.home}."
    before, after = judge.features(row, text), judge.features(row, fixed)
    assert (before["false_facts"], after["false_facts"]) == (1.0, 0.0)
    assert judge.gold(row, fixed) > judge.gold(row, text)
    assert correct_in_place(judge, row, fixed) is None
    assert correct_in_place(judge, row, f"{c.name} lives at {wrong}. {wrong} is far.") is None


def test_fact_edit_effect_is_the_corrected_answers_score_minus_the_originals(tmp_path, monkeypatch):
    """With a stand-in RM that scores 1 exactly where the true value is named, every edit raises it by 1
    (the difference is taken after minus before) and the gold rises; answers with nothing to edit are counted."""
    judge, row, c, wrong = _tiny_case(tmp_path)
    monkeypatch.setattr(rf, "score_texts", lambda rm, tok, prompts, texts, device, bias:
                        torch.tensor([float(c.home in t) for t in texts]))
    ctx = type("Ctx", (), {"judge": judge, "device": "cpu", "reward_model": lambda self: (None, None, 0.0)})()
    pairs = [(row, f"{c.name} lives at {wrong}."), (row, f"{c.name} lives at {wrong}!"), (row, "Hello.")]
    e = fact_edit_effect(ctx, pairs, [judge.features(r, t) for r, t in pairs])
    assert (e["answers"], e["with_false_fact"], e["edited"]) == (3, 2, 2)
    assert e["rm_change"] == 1.0 and e["rm_raised"] == 1.0 and e["rm_change_se"] == 0.0
    assert e["gold_change"] > 0


def test_fact_pairs_add_one_corrected_over_original_pair_after_each_comparison_that_has_one(tmp_path):
    """experiments/fact_pairs.py: every comparison is kept in order; one with a correctable false completion is
    followed by a two-way comparison ranking the corrected text first, with one false fact fewer; the result
    loads as comparisons (the schema train_rm.py checks)."""
    from experiments.fact_pairs import with_fact_pairs
    from nanorlhf.infra.jsonl import write_jsonl
    from nanorlhf.world.comparisons import load_comparisons
    judge, row, c, wrong = _tiny_case(tmp_path, "rm")
    base = {"prompt_id": row["id"], "prompt": row["prompt"], "labeler": "L1", "source": "sim"}
    cmps = [{**base, "id": "a", "completions": ["Hello.", f"{c.name} lives at {wrong}.", "Hi.", "Yes."],
             "ranking": [[0], [2], [3], [1]], "likert": [4, 2, 4, 4]},
            {**base, "id": "b", "completions": ["Hello.", "Hi.", "Yes.", "No."], "ranking": [[0], [1], [2], [3]]}]
    out = with_fact_pairs(judge, cmps, {row["id"]: row})
    assert [x["id"] for x in out] == ["a", "a-fact", "b"]
    pair = out[1]
    assert pair["completions"] == [f"{c.name} lives at {c.home}.", f"{c.name} lives at {wrong}."]
    assert pair["ranking"] == [[0], [1]] and "likert" not in pair
    f0, f1 = (judge.features(row, t)["false_facts"] for t in pair["completions"])
    assert (f0, f1) == (0.0, 1.0)
    write_jsonl(str(tmp_path / "c.jsonl"), out)
    assert len(load_comparisons(str(tmp_path / "c.jsonl"))) == 3
