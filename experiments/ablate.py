"""Ablations: switch off one implementation detail of RLHF at a time and measure what it costs.

Every row starts from the pipeline's own checkpoints (base, SFT and RM of the largest size,
and the RM's comparisons) and changes exactly one flag of train_ppo.py (or of train_sft.py /
train_rm.py for the details that live there). Each policy is then measured like the lineage
frontier: gold score of one sample per test prompt, held-out-labeler win rate against SFT
(95% interval), KL from SFT; and its training's stability (largest KL, iterations with a
plain-words warning, skipped steps). The "baseline, seed 1" row is the noise floor.

    python pipeline.py --preset=small          # first: the checkpoints this starts from
    python -m experiments.ablate --preset=small            # ~85 min on 2 cores; rewrites the table in docs/details.md
    python -m experiments.ablate --preset=small --only=baseline,no_whiten
    python -m experiments.ablate --preset=small --only=ptx,dropout --train_only=true   # split rows over processes

Writes out_dir/ablation.md, out_dir/ablation.json, out_dir/ablation.png and, with --doc, replaces
the generated block of docs/details.md (and copies the figure beside it). Runs are cached
like the pipeline's stages: a rerun retrains only rows whose flags or inputs changed.
"""
from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass, field, replace
from typing import ClassVar

import train_ppo
import train_rm
import train_sft
from nanorlhf.evals.common import md_table, new_figure, pct, save_figure
from nanorlhf.evals.context import EvalContext
from nanorlhf.evals.frontier import Run, measure
from nanorlhf.infra.cli import run
from nanorlhf.infra.config import parse_config, print_config
from nanorlhf.infra.device import resolve_device
from nanorlhf.infra.fileio import write_text
from nanorlhf.infra.stages import Stages
from nanorlhf.ppo import diagnose
from nanorlhf.recipe import Recipe
from nanorlhf.world.judge import Judge

# (name, the detail switched, stage whose flags change, flags)
ABLATIONS = [
    ("baseline", "none: the recipe as the pipeline runs it", "ppo", []),
    ("seed1", "none, another seed (the noise floor)", "ppo", ["--seed=1"]),
    ("sft_prompt_loss", "SFT loss on prompt tokens too (response-only mask off)", "sft", ["--loss_on_prompt=true"]),
    ("rm_pairs", "RM pairs shuffled as separate items (K-way batching off), then PPO", "rm", ["--kway_batch=false"]),
    ("no_claim_checks", "the labelers' claim checks off (the RM on ranked samples alone, as the paper), then PPO",
     "rm", ["--claim_checks=false", "--fact_checks=0"]),
    ("no_rm_bias", "RM bias normalisation off", "ppo", ["--normalize_reward=false"]),
    ("value_from_sft", "value function from SFT with a fresh head, not from the RM", "ppo", ["--value_init=sft"]),
    ("kl_in_loss", "KL as a loss term (k3, GRPO-style), not a per-token reward", "ppo",
     ["--kl_in_reward=false", "--kl_estimator=k3"]),
    ("kl_k3", "KL estimator k3 instead of k1 in the reward", "ppo", ["--kl_estimator=k3"]),
    ("gae_lam1", "GAE lambda 1 (Monte-Carlo returns) instead of 0.95", "ppo", ["--lam=1.0"]),
    ("no_whiten", "advantage whitening off", "ppo", ["--whiten_advantages=false"]),
    ("no_value_clip", "value clipping off", "ppo", ["--clip_value=false"]),
    ("reward_last_column", "RM read at the final column, not the true last token", "ppo",
     ["--reward_at_last_token=false"]),
    ("eos_penalty", "added: -1 for responses without <|endoftext|>", "ppo", ["--eos_penalty=1.0"]),
    ("ptx", "added: PPO-ptx, gamma_ptx = 1", "ppo", ["--ptx_coef=1.0"]),
    ("adaptive_kl", "added: adaptive KL controller, target 2 nats", "ppo", ["--target_kl=2.0"]),
    ("dropout", "dropout 0.1 on during RL (paper: off)", "ppo", ["--dropout=0.1"]),
    ("temp_consistent", "sampling at T = 0.7, log-probs at T = 0.7 (reference for the next row)", "ppo",
     ["--temperature=0.7"]),
    ("temp_mismatch", "sampling at T = 0.7, log-probs at T = 1 (temperature inconsistent)", "ppo",
     ["--temperature=0.7", "--logprob_temperature=1.0"]),
]


@dataclass
class Config:
    run_dir: str = "out/small"
    """the pipeline run whose base_<size>, sft_<size> and rm this starts from"""
    size: str = "1m"
    """model size name in the pipeline run (the largest)"""
    data_dir: str = "data/small"
    """world data folder"""
    out_dir: str = "out/small/ablate"
    """where each row's run folder, the table and the figure go"""
    recipe: Recipe = field(default_factory=Recipe)
    """the pipeline run's recipe (nanorlhf/recipe.py): the baseline row is its PPO at --size, and every other row
    changes one flag of it; give the pipeline run's own flags here when it was run with any"""
    n_eval: int = 200
    """test prompts per measurement"""
    only: str = ""
    """comma-separated row names (default: all)"""
    doc: str = "docs/details.md"
    """markdown file whose generated block gets the table ('' = leave docs alone)"""
    seed: int = 0
    """seed of the evaluation samples"""
    labeler_seed: int = 0
    """seed of the held-out labeler pool"""
    device: str = "cpu"
    """cpu, cuda, or auto"""
    fresh: bool = False
    """retrain every row even when cached"""
    train_only: bool = False
    """train the rows and stop (to split rows over processes with --only; a later full run measures)"""

    # values checked before any work starts (nanorlhf/infra/config.py check_values)
    POSITIVE: ClassVar[tuple] = ("n_eval",)
    RULES: ClassVar[tuple] = ((lambda c: c.size in c.recipe.names(),
                               "--size={size} is not one of the recipe's --sizes"),)

    PRESETS: ClassVar[dict] = {
        "tiny": dict(run_dir="out/tiny", size="a", data_dir="data/tiny", out_dir="out/tiny/ablate", n_eval=16, doc="",
                     **Recipe.PRESETS["tiny"]),
        "small": dict(**Recipe.PRESETS["small"]),
    }


def row_config(cfg: Config, name: str, stage: str, flags: list[str]):
    """The config of one row's stage: the pipeline's own (its recipe at --size, from its checkpoints) with the row's
    flags on top. stage "sft" and "rm" rows retrain that stage (the RM on the pipeline's comparisons); the PPO of an
    "rm" row is row_config(cfg, name, "ppo", []) against the retrained RM."""
    run, out, r = cfg.run_dir, cfg.out_dir, cfg.recipe.resolved(resolve_device(cfg.device))
    common = ["--preset=" + ("tiny" if "tiny" in cfg.data_dir else "small"), f"--device={cfg.device}",
              f"--seed={cfg.seed}", f"--data_dir={cfg.data_dir}", f"--out_dir={out}/{name}"]
    sft, rm = f"{run}/sft_{cfg.size}/ckpt.pt", f"{run}/rm/ckpt.pt"
    if stage == "sft":
        return parse_config(train_sft.Config, common + [f"--base={run}/base_{cfg.size}/ckpt.pt",
                                                        *r.sft_flags(cfg.size), *flags])
    if stage == "rm":
        return parse_config(train_rm.Config, common[:-1] + [f"--sft={sft}", f"--comparisons={run}/rm/comparisons.jsonl",
                                                            f"--out_dir={out}/{name}_rm", *r.rm_flags(), *flags])
    return parse_config(train_ppo.Config, common + [f"--sft={sft}", f"--rm={rm}", *r.ppo_flags(cfg.size), *flags])


def train_row(cfg: Config, st: Stages, name: str, stage: str, flags: list[str]) -> str:
    """Train one row; returns its policy checkpoint (an SFT row is measured as a policy itself)."""
    c = row_config(cfg, name, stage, flags)
    if stage == "sft":
        st.run(name, train_sft.main, c, [c.base], f"{c.out_dir}/ckpt.pt")
        return f"{c.out_dir}/ckpt.pt"
    if stage == "rm":
        st.run(f"{name}_rm", train_rm.main, c, [c.sft, c.comparisons], f"{c.out_dir}/ckpt.pt")
        c = replace(row_config(cfg, name, "ppo", []), rm=f"{c.out_dir}/ckpt.pt")
    st.run(name, train_ppo.main, c, [c.sft, c.rm], f"{c.out_dir}/ckpt.pt")
    return f"{c.out_dir}/ckpt.pt"


def stability(folder: str) -> dict:
    """From a PPO run's metrics.jsonl: the largest KL, iterations with a warning, and skipped steps."""
    path, meta = os.path.join(folder, "metrics.jsonl"), os.path.join(folder, "stage.json")
    rows = [json.loads(x) for x in open(path)] if os.path.exists(path) else []
    rows = [r for r in rows if "objective/kl" in r]
    if not rows:
        return {}
    max_new = json.load(open(meta))["config"]["max_new_tokens"] if os.path.exists(meta) else 48
    return {"max_train_kl": max(r["objective/kl"] for r in rows),
            "warn_iters": sum(bool(diagnose(r, max_new)) for r in rows),
            "final_score": rows[-1]["objective/score"]}


def rm_accuracy(folder: str) -> float | None:
    path = os.path.join(folder, "report.json")
    return json.load(open(path)).get("val_accuracy") if os.path.exists(path) else None


def table(points: list[dict]) -> str:
    base = next(p["gold"] for p in points if p["name"] == "baseline")
    rows = []
    for p in points:
        win = "—" if p["lo"] is None else f"{pct(p['win'])} [{pct(p['lo'])}, {pct(p['hi'])}]"
        st = p.get("stability", {})
        note = f"RM val acc {p['rm_acc']:.1%}" if p.get("rm_acc") is not None else ""
        rows.append([p["name"], p["detail"], f"{p['gold']:+.2f}",
                     "—" if p["name"] in ("sft", "baseline") else f"{p['gold'] - base:+.2f}",
                     win, f"{p['kl']:.2f}", f"{st['max_train_kl']:.1f}" if st else "—",
                     str(st["warn_iters"]) if st else "—", note])
    return md_table(["row", "detail switched", "gold", "Δ gold vs baseline", "win vs SFT [95%]", "KL",
                     "max train KL", "warning iters", "notes"], rows)


def plot(points: list[dict], ctx) -> str:
    fig, (a1, a2) = new_figure(2, width=6.0, height=5.0)
    rows = [p for p in points if p["name"] != "sft"]
    base = next(p["gold"] for p in points if p["name"] == "baseline")
    y = range(len(rows))
    a1.barh(list(y), [p["gold"] - base for p in rows], color=["grey" if p["name"] in ("baseline", "seed1")
                                                               else "tab:blue" for p in rows])
    a1.set_yticks(list(y), [p["name"] for p in rows])
    a1.invert_yaxis()
    a1.axvline(0, color="k", lw=0.8)
    a1.set_xlabel("gold score minus the baseline's")
    a1.set_title("what switching each detail costs")
    for p in points:
        a2.scatter(p["kl"], p["gold"], color="k" if p["name"] in ("sft", "baseline") else "tab:blue")
        a2.annotate(p["name"], (p["kl"], p["gold"]), fontsize=7)
    a2.set_xlabel("KL from SFT (nats)")
    a2.set_ylabel("gold score")
    a2.set_title("gold against KL")
    return save_figure(fig, ctx, "ablation.png")


def write_doc(doc: str, md: str, figure: str) -> None:
    """Replace the generated block of the doc (between the two markers) with the new table and figure."""
    begin, end = "<!-- BEGIN GENERATED: python -m experiments.ablate --preset=small -->", "<!-- END GENERATED -->"
    text = open(doc).read()
    if begin not in text or end not in text:
        raise ValueError(f"{doc} has no generated block ({begin} ... {end})")
    fig_dst = os.path.join(os.path.dirname(doc), "details_ablation.png")
    shutil.copyfile(figure, fig_dst)
    head, rest = text.split(begin, 1)
    tail = rest.split(end, 1)[1]
    write_text(doc, f"{head}{begin}\n{md}\n\n![ablations](details_ablation.png)\n{end}{tail}")


def main(cfg: Config) -> list[dict]:
    print_config(cfg)
    t0 = time.time()
    rows = [a for a in ABLATIONS if not cfg.only or a[0] in cfg.only.split(",")]
    unknown = set(filter(None, cfg.only.split(","))) - {a[0] for a in ABLATIONS}
    if unknown:
        raise SystemExit(f"unknown ablation rows {sorted(unknown)}; known: {[a[0] for a in ABLATIONS]}")
    if not cfg.train_only and not any(a[0] == "baseline" for a in rows):     # checked before hours of training
        raise SystemExit("the table compares against the baseline row: include it in --only")
    for need in (f"{cfg.run_dir}/sft_{cfg.size}/ckpt.pt", f"{cfg.run_dir}/rm/ckpt.pt"):
        if not os.path.exists(need):
            raise SystemExit(f"{need} not found: run `python pipeline.py --preset=...` first")
    st = Stages(cfg.out_dir, cfg.fresh)
    ckpts = {name: train_row(cfg, st, name, stage, flags) for name, _, stage, flags in rows}
    train_s = time.time() - t0
    if cfg.train_only:
        print(f"trained {len(rows)} rows in {train_s / 60:.1f} min; run without --train_only to measure")
        return []

    judge = Judge(cfg.data_dir, labeler_seed=cfg.labeler_seed)
    ctx = EvalContext(judge, cfg.data_dir, cfg.out_dir, {"sft": f"{cfg.run_dir}/sft_{cfg.size}/ckpt.pt"},
                      rm=f"{cfg.run_dir}/rm/ckpt.pt", device=cfg.device, seed=cfg.seed,
                      labeler_seed=cfg.labeler_seed, n=cfg.n_eval)
    runs = [Run(name, "PPO", ckpts[name], human_labels=0, ai_labels=0, wall_s=0.0) for name, *_ in rows]
    points = measure(ctx, runs)
    details = {a[0]: a[1] for a in ABLATIONS}
    for p in points:
        p["detail"] = "SFT itself" if p["name"] == "sft" else details[p["name"]]
        p["stability"] = stability(os.path.join(cfg.out_dir, p["name"])) if p["name"] != "sft" else {}
        p["rm_acc"] = rm_accuracy(os.path.join(cfg.out_dir, f"{p['name']}_rm"))
        p["train_s"] = st.log.get(p["name"], {}).get("seconds")
    md = table(points) + (f"\n\nRM validation accuracy of the pipeline's RM: "
                          f"{rm_accuracy(f'{cfg.run_dir}/rm'):.1%}." if rm_accuracy(f"{cfg.run_dir}/rm") else "")
    fig = os.path.join(cfg.out_dir, plot(points, ctx))
    write_text(os.path.join(cfg.out_dir, "ablation.md"), md + "\n")
    write_text(os.path.join(cfg.out_dir, "ablation.json"), json.dumps(points, indent=1, default=str))
    if cfg.doc:
        write_doc(cfg.doc, md, fig)
    print(md)
    print(f"done in {(time.time() - t0) / 60:.1f} min (training {train_s / 60:.1f} min) -> {cfg.out_dir}/ablation.md")
    return points


if __name__ == "__main__":
    run(main, Config, __doc__)
