"""The critic-free stage (train_grpo.py) and its pieces where they meet the models: groups, rewards, the KL.

The estimators' maths is tests/test_estimators.py's; here, what train_grpo wires: G consecutive rows a prompt,
beta * KL subtracted before the group baseline, a verifiable reward read by rule, a coin that knows nothing.
"""


import json
import os

import pytest
import torch

import train_grpo
from nanorlhf.experience import make_group_experience
from nanorlhf.generate import Rollout
from nanorlhf.infra.config import parse_config
from nanorlhf.model import GPT, GPTConfig
from nanorlhf.pg import PGConfig, group_advantages
from nanorlhf.world import build_world
from nanorlhf.world.verifiers import checkable, random_rewards, verifiable

MC = GPTConfig(vocab_size=13, block_size=16, n_layer=1, n_head=1, n_embd=16)


def grouped_rollout():
    """Two prompts x G = 2 responses: rows 0-1 share a prompt, rows 2-3 another."""
    tokens = torch.tensor([[3, 4, 5, 12], [3, 4, 6, 12], [7, 8, 9, 12], [7, 8, 5, 12]])
    resp = torch.tensor([[0, 0, 1, 1]] * 4)
    return Rollout(tokens, torch.ones_like(tokens), resp, torch.zeros(4, 4), 2, 12)


def test_the_kl_is_subtracted_before_the_group_baseline():
    """k1_reward: each response's reward minus beta * sum_t (log pi - log pi_ref), then each group's advantages
    from those shaped rewards (rows grouped G at a time); a loss-term KL leaves the reward alone."""
    torch.manual_seed(0)
    policy, ref = GPT(MC), GPT(MC)
    ro, rewards = grouped_rollout(), torch.tensor([1.0, 0.0, 0.5, 0.5])
    hp = PGConfig(group_size=2, prompts_per_iteration=2, minibatch_size=4, beta=0.3, estimator="dr_grpo")
    exp = make_group_experience(policy, ref, None, ro, rewards, rm_bias=0.0, hp=hp)
    kl = exp["kl"].sum(1)
    assert kl.abs().sum() > 1e-3
    want = group_advantages((rewards - 0.3 * kl).view(2, 2), "dr_grpo").view(-1)
    assert torch.allclose(exp["advantages"], want, atol=1e-6)
    loss_kl = make_group_experience(policy, ref, None, ro, rewards, rm_bias=0.0,
                                    hp=PGConfig(**{**hp.__dict__, "kl": "k3_loss"}))
    assert torch.allclose(loss_kl["advantages"], group_advantages(rewards.view(2, 2), "dr_grpo").view(-1))


def test_verifiable_rewards_check_the_task_by_rule():
    """Closed QA, extract and classification answers are checked against the prompt's own answer key; a prompt with
    no rule (an open question, a story without constraints) has none."""
    data = build_world("tiny", 0)
    prompts = data.prompts["rm"] + data.prompts["sft"] + data.prompts["ppo"]
    seen = set()
    for p in prompts:
        if p.category == "classification" and "classification" not in seen:
            other = next(o for o in p.options if o != p.answer)
            assert verifiable(p, f"It is {p.answer}.") == (1.0 if not p.constraints else verifiable(p, p.answer))
            assert verifiable(p, f"It is {other}.") == 0.0
            seen.add(p.category)
        if p.category == "closed_qa" and p.answer and not p.constraints and "closed_qa" not in seen:
            assert verifiable(p, f"The text says: {p.answer}.") == 1.0 and verifiable(p, "I do not know.") == 0.0
            seen.add(p.category)
        if p.category == "open_qa":
            assert not checkable(p) and verifiable(p, "anything") is None
    assert seen == {"classification", "closed_qa"}


def test_the_random_control_is_a_fair_coin_whatever_the_text():
    """The control's rewards are 0 or 1, about half each, from the run's generator alone."""
    r = random_rewards(2000, torch.Generator().manual_seed(0))
    assert set(r.tolist()) <= {0.0, 1.0} and abs(r.mean().item() - 0.5) < 0.05


def test_train_grpo_runs_on_the_tiny_world_with_each_reward(stages, monkeypatch):
    """train_grpo.main for two iterations with the RM, a verifiable reward and the coin: finite metrics with
    the fixed names, a checkpoint, and for RLVR only prompts a rule can check."""
    read = []

    def rule(prompt, text):                  # the rule reward, recording which prompts it was asked to read
        read.append(checkable(prompt))
        return verifiable(prompt, text)
    monkeypatch.setattr(train_grpo, "verifiable", rule)
    for reward, est in (("rm", "grpo"), ("rlvr", "rloo"), ("random", "dr_grpo")):
        flags = ["--preset=tiny", f"--sft={stages['out']}/sft/ckpt.pt", f"--rm={stages['out']}/rm/ckpt.pt",
                 f"--data_dir={stages['data']}", f"--out_dir={stages['out']}/grpo_{reward}", f"--reward={reward}",
                 f"--estimator={est}"]
        res = train_grpo.main(parse_config(train_grpo.Config, flags))
        m = res["metrics"][-1]
        for k in ("objective/reward", "objective/kl", "entropy", "clipfrac_low", "clipfrac_high",
                  "pg/equal_groups", "response/length", "response/cut_off"):
            assert k in m and m[k] == m[k], (reward, k)
        assert res["ckpt"].endswith("ckpt.pt")
    assert read and all(read)                 # RLVR sampled only prompts a rule can check


def test_pass_at_k_is_the_share_of_k_subsets_with_a_pass():
    """Chen et al.'s estimator equals brute force: of every k-subset of n samples (c of them pass), the share
    holding at least one pass; k = 1 is c / n and k > n - c is certain."""
    from itertools import combinations

    from nanorlhf.evals.passk import pass_at_k
    for n, c in ((6, 0), (6, 2), (7, 3), (5, 5)):
        samples = [1] * c + [0] * (n - c)
        for k in range(1, n + 1):
            subsets = list(combinations(samples, k))
            assert pass_at_k(n, c, k) == pytest.approx(sum(any(s) for s in subsets) / len(subsets)), (n, c, k)
    assert pass_at_k(16, 4, 1) == pytest.approx(0.25)


def test_the_frontier_driver_trains_every_method_and_measures_them_on_the_tiny_world(stages, tmp_path):
    """experiments.frontier from a run folder (SFT and RM): every critic-free run, RLVR, the coin and DPO trained and
    measured with best-of-n; RM-reward runs carry the RM's labels, the rule and the coin none; each gold change is
    SFT's gold subtracted, with a paired interval; pass@k rises with k for each policy, and a rerun only measures
    (the runs are cached)."""
    from experiments import frontier
    run = tmp_path / "run"
    run.mkdir()
    os.symlink(os.path.join(stages["out"], "sft"), run / "sft_a")
    os.symlink(os.path.join(stages["out"], "rm"), run / "rm")
    flags = ["--preset=tiny", f"--run_dir={run}", f"--data_dir={stages['data']}", f"--out_dir={tmp_path / 'f'}",
             "--lanes=1", "--n_eval=8"]
    report = frontier.main(parse_config(frontier.Config, flags))
    rm_labels = json.load(open(os.path.join(stages["out"], "rm", "report.json")))["n_train_comparisons"]
    pts = report["points"]
    assert {"sft", "bon2", "bon4", "grpo", "dr_grpo", "rloo", "reinforce_baseline", "rlvr", "random", "dpo"} <= set(pts)
    assert all(pts[m]["labels"] == rm_labels for m in ("bon2", "grpo", "dr_grpo", "rloo", "reinforce_baseline"))
    assert pts["rlvr"]["labels"] == 0 and pts["random"]["labels"] == 0 and pts["dpo"]["labels"] > 0
    assert pts["sft"]["gold_vs_sft"] is None
    for name, p in pts.items():               # each gold change is paired against SFT's answers, with its interval
        if name != "sft":
            d = p["gold_vs_sft"]
            assert d["diff"] == pytest.approx(p["gold"] - pts["sft"]["gold"]) and d["lo"] <= d["diff"] <= d["hi"], name
    for name, curve in report["passk"]["curves"].items():
        values = [curve[k] for k in sorted(curve)]
        assert values == sorted(values) and 0 <= values[0] <= values[-1] <= 1, name
    assert report["passk"]["top_k"] == max(report["passk"]["curves"]["sft"])
    md = open(tmp_path / "f" / "frontier.md").read()
    assert md.startswith("## PPO and what came after it") and "| RLOO | rloo |" in md and "## Pass@k" in md
    again = frontier.main(parse_config(frontier.Config, flags))
    assert again["train_s"] < report["train_s"] and again["points"]["grpo"] == pts["grpo"]
