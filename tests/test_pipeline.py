"""The one command at the tiny scale: every stage runs (the lineage's too), the report and its figures exist,
its numbers parse, a rerun reuses every stage."""
import json
import os
import re

import pytest
import torch

import pipeline
from nanorlhf.infra.config import ConfigError, parse_config
from nanorlhf.infra.precision import resolve_dtype
from nanorlhf.infra.stages import Stages
from nanorlhf.world import ensure_world


def test_tiny_pipeline_end_to_end_and_cached_rerun(tmp_path, capfd):
    """pipeline --preset=tiny --lineage=true writes report.md with every figure, the lineage's frontier table
    (every method, labels, wall) and frontier.png; its log (every lane's lines too) is short, announces each stage
    as "stage k of N" with an overall ETA, and gives each stage one line of config (the full one in its folder);
    a rerun reuses every stage, the lineage's included."""
    flags = ["--preset=tiny", "--lineage=true", f"--out_root={tmp_path}/out", f"--data_root={tmp_path}/data"]
    res = pipeline.main(parse_config(pipeline.Config, flags))
    out = os.path.join(tmp_path, "out", "tiny")
    log = capfd.readouterr().out.splitlines()
    announced = [re.search(r"== stage (\d+) of (\d+): (\S+) \| .* elapsed, (ETA .*)", line) for line in log]
    announced = [m.groups() for m in announced if m]
    n = int(announced[0][1])
    assert sorted(int(k) for k, *_ in announced) == list(range(1, n + 1)) and n == 17  # 16 stages, the evaluation
    assert all(a[1] == str(n) for a in announced) and re.match(r"ETA \d", announced[-1][3])
    assert len(log) < 250 and not [line for line in log if re.search(r"^(\[\S+\] )?  [a-z_]+ = ", line)]
    configs = [line for line in log if re.search(r"(^|\] )Config: --", line)]
    assert len(configs) >= n  # the pipeline's own and each trained stage's (and its rounds'), one line each
    saved = json.load(open(os.path.join(out, "ppo_a", "config.json")))
    assert saved == json.load(open(os.path.join(out, "ppo_a", "stage.json")))["config"] and "lr" in saved
    text = open(res["report"]).read()
    for fig in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text):
        assert os.path.exists(os.path.join(out, fig)), fig
    assert "ladder.png" in text and "head_to_head.png" in text
    # it opens with a report card: the commit, the package versions, the machine, the seeds
    card = text.split("\n\n")[2]
    assert card.startswith("| report card |") and f"torch {torch.__version__}" in card and "--seed=0" in card
    assert re.search(r"\| commit \| `([0-9a-f]{12}|not a git checkout)", card) and "cores" in card
    rates = [float(x) for x in re.findall(r"\| (\d+)% \[", text)]
    assert rates and all(0 <= r <= 100 for r in rates)
    data = json.load(open(os.path.join(out, "report.json")))
    # findings.json: every named finding, a verdict from the vocabulary, rates as fractions with their interval
    # (the tiny run has no suites, so no truthful_informative; hallucination_lower needs a closed-domain prompt)
    found = {f["name"]: f for f in json.load(open(os.path.join(out, "findings.json")))}
    assert set(found) >= {"rm_ratio", "labeler_agreement_train", "ppo_vs_sft_big", "ppo_ptx_vs_sft_big", "ladder_big",
                          "ladder_small", "small_rlhf_vs_big_gpt", "flan_below_sft_big", "minutes"}
    assert {f["verdict"] for f in found.values()} <= {"reproduced", "direction only", "not reproduced", "measured", "calibration"}
    for f in found.values():
        x = f["figures"]
        if "diff" in x:       # a paired difference of two rates
            assert -1 <= x["lo"] <= x["diff"] <= x["hi"] <= 1 and 0 <= x["value"] <= 1, f["name"]
        elif "rate" in x:
            assert 0 <= x["lo"] <= x["rate"] == x["value"] <= x["hi"] <= 1, f["name"]
        elif "lo" in x:       # a ratio with its interval
            assert x["lo"] <= x["hi"], f["name"]
    assert found["ppo_vs_sft_big"]["figures"]["samples"] == 4
    # the run's minutes come with the CPU and the speed probe at the start and the end (VMs of one type drift)
    machine = found["minutes"]["figures"]
    assert machine["cpu"] and machine["probe_tokens_per_s_start"] > 0 and machine["probe_tokens_per_s_end"] > 0
    # the pipeline's own flags reach the stages: PPO's lr and the held-out-labeler RM's label count
    cfg = pipeline.Config()
    assert json.load(open(os.path.join(out, "ppo_ptx_a", "stage.json")))["config"]["lr"] == cfg.recipe.ppo_lr
    heldout = json.load(open(os.path.join(out, "rm_heldout", "stage.json")))
    assert heldout["config"]["heldout_prompts"] == cfg.recipe.rm_heldout_prompts and heldout["config"]["heldout_only"]
    # the held-out-labeler test ran as its own stage, and its figures reach the report's RM table
    assert "accuracy on the held-out group" in text
    # each size gets its own SFT recipe, gamma_ptx and PPO length (the tiny preset gives the sizes different ones)
    recipe = parse_config(pipeline.Config, ["--preset=tiny"]).recipe
    assert {k: recipe.per_size(k) for k in ("sft_epochs", "sft_lr", "sft_dropout", "ptx_coef", "ppo_iterations")} == {
        "sft_epochs": {"a": 1, "b": 1}, "sft_lr": {"a": 1e-3, "b": 3e-3}, "sft_dropout": {"a": 0.2, "b": 0.0},
        "ptx_coef": {"a": 1.0, "b": 0.5}, "ppo_iterations": {"a": 2, "b": 1}}
    for size, lr, dropout, ptx, its in (("a", 1e-3, 0.2, 1.0, 2), ("b", 3e-3, 0.0, 0.5, 1)):
        sft = json.load(open(os.path.join(out, f"sft_{size}", "stage.json")))["config"]
        flan = json.load(open(os.path.join(out, f"flan_{size}", "stage.json")))["config"]
        assert (sft["lr"], sft["dropout"]) == (flan["lr"], flan["dropout"]) == (lr, dropout), size
        assert json.load(open(os.path.join(out, f"ppo_ptx_{size}", "stage.json")))["config"]["ptx_coef"] == ptx
        assert json.load(open(os.path.join(out, f"ppo_{size}", "stage.json")))["config"]["ptx_coef"] == 0
        for stage in (f"ppo_{size}", f"ppo_ptx_{size}"):
            assert json.load(open(os.path.join(out, stage, "stage.json")))["config"]["iterations"] == its, stage
    # --dtype=auto (the default) reaches every training stage resolved: bfloat16 only where it runs natively
    want = resolve_dtype("auto")
    for stage in ("base_a", "sft_b", "flan_a", "rm", "ppo_a", "ppo_ptx_b", "iterated_a"):
        meta = json.load(open(os.path.join(out, stage, "stage.json")))["config"]
        assert meta["dtype"] == want, stage
    assert found["small_rlhf_vs_big_gpt"]["figures"]["params_small"]["non_embedding"] > 0
    assert "## Findings" in text and "## What the models say" in text
    lineage = {"dpo_b0.1_a", "dpo_b1.0_a", "rlaif_a", "iterated_a"}
    assert set(data["stages"]) >= {"base_a", "sft_a", "flan_a", "rm", "ppo_a", "ppo_ptx_a", "evaluate"} | lineage
    # the frontier: a section with its figure, one row per method, labels (AI ones for RLAIF) and wall time
    frontier = text.split("## The lineage: gold reward against KL")[1].split("\n## ")[0]
    assert "![frontier.png](frontier.png)" in frontier
    for row in ("| SFT | sft |", "| best-of-n | bon2 |", "| PPO | ppo_a |", "| PPO-ptx | ppo_ptx_a |",
                "| DPO | dpo_b0.1_a |", "| DPO | dpo_b1.0_a |", "| RLAIF-hybrid PPO | rlaif_a |",
                "| iterated PPO | iterated_a@r1 |", "| iterated PPO | iterated_a |"):
        assert row in frontier, row
    assert re.search(r"\| RLAIF-hybrid PPO \| rlaif_a \|.*\| \d+ \+ 4 AI \| \d+s \|", frontier)
    points = data["sections"]["The lineage: gold reward against KL"]["points"]
    assert all(p["wall_s"] is not None and p["human_labels"] is not None for p in points[1:])
    ckpts = {s: os.path.join(out, s, "ppo" if s[0] in "ri" else "", "ckpt.pt") for s in lineage}
    mtimes = {s: os.path.getmtime(p) for s, p in ckpts.items()}
    again = pipeline.main(parse_config(pipeline.Config, flags))  # every stage is up to date now
    assert os.path.exists(again["report"])
    assert mtimes == {s: os.path.getmtime(p) for s, p in ckpts.items()}  # the lineage's stages were reused
    # evaluate.py on the same outputs: the preference table, the knowledge probe and the ladder again
    import evaluate
    run = os.path.join(tmp_path, "out", "tiny")
    common = ["--preset=tiny", f"--out_dir={run}", f"--data_dir={tmp_path}/data/tiny", f"--rm={run}/rm/ckpt.pt",
              f"--policies=gpt={run}/base_a/ckpt.pt,sft={run}/sft_a/ckpt.pt,ppo={run}/ppo_a/ckpt.pt"]
    pref = evaluate.main(parse_config(evaluate.Config, common + ["--suite=preference"]))
    assert 0 <= pref["ppo"]["win"]["rate"] <= 1 and "gold" in pref["sft"]
    capfd.readouterr()
    val = evaluate.main(parse_config(evaluate.Config, common + ["--suite=preference", "--samples=2", "--split=val"]))
    assert " val prompts x 2 samples " in capfd.readouterr().out
    two = val["ppo"]["win"]
    assert two["samples"] == 2 and two["lo"] <= two["rate"] <= two["hi"]
    test = evaluate.main(parse_config(evaluate.Config, common + ["--suite=preference", "--samples=2"]))
    assert val["sft"]["gold"] != test["sft"]["gold"]   # other prompts were judged, not the test ones again
    with pytest.raises(ConfigError, match="--samples=0"):  # refused while the flags are read, before any work
        evaluate.main(parse_config(evaluate.Config, common + ["--suite=preference", "--samples=0"]))
    know = evaluate.main(parse_config(evaluate.Config, common + ["--suite=knowledge"]))
    assert 0 <= know["gpt"]["attempt_rate"]["all"] <= 1
    lad = evaluate.main(parse_config(evaluate.Config, common + ["--suite=ladder", "--sizes=a,b", "--seed=1"]))
    assert "sft_a" in lad["table"]


def test_world_grows_to_the_label_budget_and_keeps_every_other_set(tmp_path):
    """world.ensure_world (the pipeline's step 0) builds the scale's world; a label budget past its RM prompts rebuilds it with that many RM
    prompts (the first ones and every other set unchanged); an unchanged budget builds nothing."""
    def lines(data, name):
        return open(os.path.join(data, name)).read().splitlines()
    data = str(tmp_path / "tiny")
    assert ensure_world(data, "tiny", 48)            # tiny has 64 RM prompts: no extra needed
    before = {n: lines(data, n) for n in ("rm_prompts.jsonl", "ppo_prompts.jsonl", "test_prompts.jsonl", "sft.jsonl")}
    assert len(before["rm_prompts.jsonl"]) == 64 and "rm_extra" not in json.load(open(f"{data}/meta.json"))
    assert not ensure_world(data, "tiny", 64)
    assert ensure_world(data, "tiny", 100)
    assert json.load(open(f"{data}/meta.json"))["rm_extra"] == 36
    rm = lines(data, "rm_prompts.jsonl")
    assert len(rm) == 100 and rm[:64] == before["rm_prompts.jsonl"]
    for name in ("ppo_prompts.jsonl", "test_prompts.jsonl", "sft.jsonl"):
        assert lines(data, name) == before[name], name
    assert not ensure_world(data, "tiny", 100)
    assert ensure_world(data, "tiny", 100, fresh=True)


def test_stage_reused_when_only_a_new_flag_at_its_default_differs(tmp_path):
    """A stage that ran before a flag existed is reused while the new flag sits at its default (its old
    behaviour), and rerun once the flag is set, or when an old field changes."""
    from dataclasses import dataclass

    @dataclass
    class Before:
        lr: float = 0.1

    @dataclass
    class After:
        lr: float = 0.1
        new_flag: bool = False

    calls, ckpt = [], str(tmp_path / "s" / "ckpt.pt")

    def main(cfg):
        calls.append(cfg)
        os.makedirs(os.path.dirname(ckpt), exist_ok=True)
        open(ckpt, "w").write("weights")
        return {}

    st = Stages(str(tmp_path), fresh=False)
    st.run("s", main, Before(), [], ckpt)
    st.run("s", main, After(), [], ckpt)                 # new flag at its default: reused
    assert len(calls) == 1
    st.run("s", main, After(new_flag=True), [], ckpt)    # set: rerun
    st.run("s", main, After(lr=0.2, new_flag=True), [], ckpt)
    assert len(calls) == 3
