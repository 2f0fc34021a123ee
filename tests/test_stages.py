"""Smoke tests of the three stages on the tiny world: each script's main() runs end to end for a few
steps, and the training identities (non-finite steps, lr 0, K-way loss) hold on real models."""
import json
import os

import pytest
import torch

import train_ppo
import train_rm
from nanorlhf.infra.config import ConfigError, parse_config


def ppo_flags(s, name, *extra):
    return ["--preset=tiny", f"--sft={s['out']}/sft/ckpt.pt", f"--rm={s['out']}/rm/ckpt.pt",
            f"--data_dir={s['data']}", f"--out_dir={s['out']}/{name}", *extra]


def test_sft_and_rm_outputs(stages):
    """SFT keeps every epoch's weights and reports finite losses; the RM saves comparisons and a report."""
    assert os.path.exists(os.path.join(stages["out"], "sft", "epoch1.pt"))
    assert all(v == v for v in stages["sft"]["val_losses"])
    rep = stages["rm"]["report"]
    assert 0 <= rep["val_accuracy"] <= 1 and 0 <= rep["labeler_agreement"] <= 1
    assert os.path.exists(os.path.join(stages["out"], "rm", "comparisons.jsonl"))


def test_ppo_runs_and_kl_starts_at_zero(stages):
    """Two PPO iterations run; at the first, policy = reference so the KL is exactly 0."""
    res = train_ppo.main(parse_config(train_ppo.Config, ppo_flags(stages, "ppo")))
    first = res["metrics"][0]
    assert first["objective/kl"] == 0.0
    assert len(res["metrics"]) == 2 and all(m["objective/score"] is not None for m in res["metrics"])


def test_kl_as_a_loss_refuses_the_k1_estimator(stages):
    """--kl_in_reward=false with k1 is refused: as a loss k1's gradient ignores pi_ref, so nothing holds the policy."""
    with pytest.raises(ValueError, match="kl_estimator=k3"):
        train_ppo.main(parse_config(train_ppo.Config, ppo_flags(stages, "ppo_k1loss", "--kl_in_reward=false")))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_ppo_with_zero_learning_rate_is_the_identity(stages, dtype, monkeypatch):
    """With lr = 0: ratio = 1, approx KL = 0, clip fraction = 0 (up to float noise of batching). Under bfloat16
    too, with the rollouts' bfloat16 KV cache (forced on, whatever this CPU): the old log-probs are recomputed
    under the same autocast as the new ones, so the ratio does not carry the gap between sampling and scoring."""
    import nanorlhf.infra.precision as precision
    import nanorlhf.rollout as rollout
    monkeypatch.setattr(precision, "fast_bfloat16", lambda device="cpu": True)
    caches, real = [], rollout.generate_in_length_groups
    monkeypatch.setattr(rollout, "generate_in_length_groups",
                        lambda *a, **k: caches.append(a[2].cache_dtype) or real(*a, **k))
    res = train_ppo.main(parse_config(train_ppo.Config, ppo_flags(stages, f"ppo_lr0_{dtype}", "--lr=0",
                                                                  "--iterations=1", f"--dtype={dtype}",
                                                                  f"--rollout_cache={dtype}")))
    m = res["metrics"][0]
    assert abs(m["ppo/ratio_mean"] - 1) < 1e-5 and abs(m["ppo/approx_kl"]) < 1e-6 and m["ppo/clipfrac"] == 0
    assert caches == [dtype]


def test_one_ppo_step_changes_every_parameter(stages):
    """After one PPO iteration (with ptx) every trainable parameter of policy and value has changed."""
    before_p = {k: v.clone() for k, v in torch.load(os.path.join(stages["out"], "sft", "ckpt.pt"),
                                                    weights_only=True)["model"].items()}
    res = train_ppo.main(parse_config(train_ppo.Config, ppo_flags(stages, "ppo1", "--iterations=1", "--ppo_epochs=1",
                                                                  "--minibatch_size=8", "--ptx_coef=1")))
    after = res["policy"].state_dict()
    unchanged = [k for k, v in before_p.items() if torch.equal(v, after[k])]
    assert unchanged == []


def test_nan_reward_skips_the_step_and_is_counted(stages, monkeypatch):
    """A NaN RM score skips that iteration (counted); three in a row stop the run with a message."""
    import nanorlhf.experience as experience
    real = experience.score_sequences
    monkeypatch.setattr(experience, "score_sequences", lambda *a, **k: real(*a, **k) * float("nan"))
    with pytest.raises(RuntimeError, match="non-finite"):
        train_ppo.main(parse_config(train_ppo.Config, ppo_flags(stages, "ppo_nan", "--iterations=4")))


def test_one_rm_step_changes_every_parameter(stages):
    """After one RM step on real comparisons every trainable parameter changed and the loss is finite. The head's
    bias may not: the pairwise loss sees only differences of rewards, so its gradient is zero to rounding (which
    Adam may or may not turn into a step, CPU by CPU), and section 3.5's normalisation sets it after training."""
    from nanorlhf.checkpoint import load_model
    from nanorlhf.model import ScalarHeadModel
    from nanorlhf.rankings import ranking_to_ranks, usable
    from nanorlhf.reward import RewardConfig, fit_reward_model, rm_batch_loss, score_texts
    from nanorlhf.world.comparisons import load_comparisons
    sft, tok, _ = load_model(os.path.join(stages["out"], "sft", "ckpt.pt"))
    rm = ScalarHeadModel.from_gpt(sft)
    before = {k: v.clone() for k, v in rm.state_dict().items()}
    cmp = usable(load_comparisons(os.path.join(stages["out"], "rm", "comparisons.jsonl"))[:4])
    losses = fit_reward_model(rm, tok, cmp, RewardConfig(lr=1e-3, epochs=1, batch_prompts=4), seed=0)
    assert len(losses) == 1 and losses[0] == losses[0]
    assert [k for k, v in rm.state_dict().items() if torch.equal(v, before[k]) and k != "head.bias"] == []
    rewards = [score_texts(rm, tok, [c["prompt"]] * len(c["completions"]), c["completions"], "cpu") for c in cmp]
    rm.zero_grad()
    rm_batch_loss(rewards, [ranking_to_ranks(c["ranking"]) for c in cmp]).backward()
    assert rm.head.bias.grad.abs().item() < 1e-4 * rm.head.weight.grad.abs().max().item()


def test_rm_score_is_read_at_the_last_response_token_whatever_the_padding(stages):
    """The RM score of a completion is the same right-padded (training) and left-padded (PPO rollout)."""
    from nanorlhf.chat import chat_prompt
    from nanorlhf.checkpoint import load_model
    from nanorlhf.masks import last_token_index
    from nanorlhf.reward import encode_texts, score_sequences
    rm, tok, _ = load_model(os.path.join(stages["out"], "rm", "ckpt.pt"), kind="scalar")
    comps = ["Pip is a fox.", "No.", "Pip the red fox lives at the mill and likes plums."]
    t, a, r = encode_texts(tok, ["Who is Pip?"] * len(comps), comps, rm.cfg.block_size)
    right = score_sequences(rm, t, a, r)
    n = a.sum(1)
    left_t, left_a, left_r = torch.zeros_like(t), torch.zeros_like(a), torch.zeros_like(r)
    for i in range(len(comps)):  # move each row's tokens to the right edge
        left_t[i, -n[i]:], left_a[i, -n[i]:], left_r[i, -n[i]:] = t[i, :n[i]], a[i, :n[i]], r[i, :n[i]]
    left = score_sequences(rm, left_t, left_a, left_r)
    assert torch.allclose(right, left, atol=1e-5)
    assert (last_token_index(left_r) == t.size(1) - 1).all()
    p = len(chat_prompt(tok, "Who is Pip?"))
    assert r[0, :p].sum() == 0 and r[0, p:n[0]].all()   # the mask covers exactly completion + end token


def test_value_starts_as_the_rm_on_the_reward_scale(stages):
    """The value function starts as the RM with the RM's bias folded into its head: at the last response token it
    predicts exactly the (bias-corrected) RM score PPO will be rewarded with."""
    from nanorlhf.checkpoint import load_model
    from nanorlhf.experience import value_from_rm
    from nanorlhf.masks import last_token_index
    from nanorlhf.reward import encode_texts, score_sequences
    rm, tok, ck = load_model(os.path.join(stages["out"], "rm", "ckpt.pt"), kind="scalar")
    bias = ck["extra"]["bias"]
    value = value_from_rm(rm, bias).eval()
    t, a, r = encode_texts(tok, ["Who is Pip?"] * 2, ["Pip is a fox.", "No."], rm.cfg.block_size)
    with torch.no_grad():
        at_last = value(t, attention_mask=a).gather(1, last_token_index(r)[:, None]).squeeze(1)
        assert torch.allclose(at_last, score_sequences(rm, t, a, r, bias), atol=1e-5)
    assert bias != 0.0 and not torch.equal(value.head.bias, rm.head.bias)   # rm itself is left as it was


def test_heldout_only_gives_the_rm_stage_s_own_held_out_labeler_figures(stages, tmp_path):
    """train_rm --heldout_only (the pipeline's rm_heldout stage, run beside PPO) on an RM run's comparisons
    gives the held-out-labeler figures that run computed itself, and writes them to heldout.json; without
    --comparisons it refuses before any training."""
    flags = ["--preset=tiny", f"--sft={stages['out']}/sft/ckpt.pt", f"--data_dir={stages['data']}",
             f"--out_dir={tmp_path}/heldout", "--heldout_only=true"]
    with pytest.raises(ConfigError, match="comparisons"):  # while the flags are read
        train_rm.main(parse_config(train_rm.Config, flags))
    res = train_rm.main(parse_config(train_rm.Config, flags + [f"--comparisons={stages['out']}/rm/comparisons.jsonl"]))
    assert res["heldout"] == stages["rm"]["report"]["heldout"]
    with open(os.path.join(tmp_path, "heldout", "heldout.json")) as f:
        assert json.load(f) == res["heldout"]
