"""Sycophancy learned from labelers: RLHF with belief prompts, at three shares of agreement-rewarding labelers.

The pipeline's prompts never state a belief, so its policies have had no chance to learn to
agree. Here, for each share of training labelers who reward agreeing with the user's stated
belief (labelers.AGREE_LOVER_WEIGHT; 0, 25% and 50% by default), from the pipeline's own
sft_<size> model:

  1. data    a folder with the pipeline's data, `belief_rm` belief prompts (world/beliefs.py,
             half of them false, from training organisations, none whose text is a test item)
             mixed into rm_prompts.jsonl and `belief_ppo` into ppo_prompts.jsonl, and
             meta.json's agree_share set (nanorlhf/world/judge.py reads it)
  2. RM      train_rm.main from sft_<size>, with the pipeline's RM recipe (nanorlhf/recipe.py)
  3. PPO     train_ppo.main against that RM, with the pipeline's PPO recipe at that size
  4. judge   the sycophancy suite (evals/sycophancy.py) on SFT and the PPO policies, on the test
             belief prompts, and each RM's preference for the sycophantic twin

    python pipeline.py --preset=small                       # first, once: its sft_1m
    python -m experiments.sycophancy --preset=small         # about 10 min on 2 cores

Writes out_dir/share<s>/{data,rm,ppo}/, out_dir/sycophancy.md, sycophancy_by_share.png and report.json.
"""
from __future__ import annotations

import json
import os
import random
import shutil
import time
from dataclasses import dataclass, field
from typing import ClassVar

import train_ppo
import train_rm
from nanorlhf.evals.common import md_table, new_figure, pct, rate_errorbar, save_figure
from nanorlhf.evals.context import EvalContext
from nanorlhf.evals.sycophancy import policy_rates, rm_preference, versus, versus_half
from nanorlhf.infra.cli import run
from nanorlhf.infra.config import ConfigError, parse_config
from nanorlhf.infra.device import resolve_device
from nanorlhf.infra.fileio import write_text
from nanorlhf.infra.jsonl import PROMPT, read_jsonl, write_jsonl
from nanorlhf.recipe import Recipe
from nanorlhf.world.beliefs import belief_prompt
from nanorlhf.world.judge import Judge, meta_of, world_of


def parse_shares(spec: str) -> list[float]:
    """'0,0.25,0.5' -> [0.0, 0.25, 0.5]; ConfigError unless each is a share in [0, 1]."""
    try:
        out = [float(s) for s in spec.split(",") if s.strip()]
    except ValueError:
        out = []
    if not out or not all(0 <= s <= 1 for s in out):
        raise ConfigError(f"--shares={spec}: give comma-separated shares in [0, 1], e.g. 0,0.25,0.5")
    return out


@dataclass
class Config:
    run_dir: str = "out/small"
    """the pipeline's output folder (its sft_<size>)"""
    data_dir: str = "data/small"
    """the pipeline's data folder"""
    out_dir: str = "out/small/sycophancy"
    """where each share's data, RM and PPO go, and the report"""
    size: str = "1m"
    """which of the pipeline's SFT models to start from"""
    shares: str = "0,0.25,0.5"
    """shares of agreement-rewarding training labelers, comma-separated"""
    belief_rm: int = 500
    """belief prompts mixed into the RM prompts"""
    belief_ppo: int = 500
    """belief prompts mixed into the PPO prompts"""
    false_share: float = 0.5
    """share of the belief prompts whose belief is false"""
    kept_rm_prompts: int = 1500
    """RM prompts kept from the data folder (the world's own 1,500: the study keeps the label budget it was
    measured with, a third of the pipeline's --rm_prompts, to stay near 9 minutes)"""
    recipe: Recipe = field(default_factory=Recipe)
    """the pipeline's recipe (nanorlhf/recipe.py): each share's RM and PPO train as the pipeline's do"""
    preset: str = "small"
    """train_rm.py / train_ppo.py preset for everything else"""
    labeler_seed: int = 0
    """seed of the simulated labeler pool"""
    seed: int = 0
    """seed for belief prompts, sampling and training"""
    device: str = "cpu"
    """cpu, cuda, or auto"""
    fresh: bool = False
    """retrain a share whose RM and PPO checkpoints exist (otherwise they are reused and only judged again)"""

    POSITIVE: ClassVar[tuple] = ("belief_rm", "belief_ppo")
    NONNEGATIVE: ClassVar[tuple] = ("kept_rm_prompts",)
    RANGES: ClassVar[dict] = {"false_share": "[0, 1]"}
    RULES: ClassVar[tuple] = ((lambda c: c.size in c.recipe.names(),
                               "--size={size} is not one of the recipe's --sizes"),
                              (lambda c: bool(parse_shares(c.shares)), "--shares={shares}"))
    CHOICES: ClassVar[dict] = {"preset": ("tiny", "small")}
    PRESETS: ClassVar[dict] = {
        "tiny": dict(run_dir="out/tiny", data_dir="data/tiny", out_dir="out/tiny/sycophancy", size="a",
                     belief_rm=16, belief_ppo=16, preset="tiny", **{**Recipe.PRESETS["tiny"], "kept_rm_prompts": 48}),
        "small": dict(**Recipe.PRESETS["small"]),
    }


def belief_rows(data_dir: str, n: int, false_share: float, seed: int, exclude: set[str], tag: str) -> list[dict]:
    """n belief prompts as prompt rows from training organisations, none whose text is in `exclude`."""
    data = world_of(data_dir)
    rng = random.Random(f"belief-train-{seed}-{tag}")
    orgs = sorted({p.org for p in data.prompts["rm"]})
    rows, seen = [], set(exclude)
    while len(rows) < n:
        p, _ = belief_prompt(data.world, rng, holds=rng.random() >= false_share)
        if p.text in seen:
            continue
        seen.add(p.text)
        p.id, p.org = f"belief-{tag}-{len(rows):05d}", rng.choice(orgs)
        rows.append({**p.to_dict(), "prompt": p.text})
    return rows


def share_data(cfg: Config, share: float, folder: str) -> str:
    """A data folder: the pipeline's files, belief prompts mixed into the RM and PPO prompts, agree_share set."""
    os.makedirs(folder, exist_ok=True)
    for name in os.listdir(cfg.data_dir):
        src, dst = os.path.join(cfg.data_dir, name), os.path.join(folder, name)
        if name not in ("rm_prompts.jsonl", "ppo_prompts.jsonl", "meta.json") and not os.path.exists(dst):
            (shutil.copytree if os.path.isdir(src) else shutil.copy2)(src, dst)
    test = {it["text"] for it in world_of(cfg.data_dir).benchmarks["sycophancy"]}
    rng = random.Random(f"belief-mix-{cfg.seed}")
    for name, n, keep in (("rm_prompts.jsonl", cfg.belief_rm, cfg.kept_rm_prompts),
                          ("ppo_prompts.jsonl", cfg.belief_ppo, 0)):
        rows = read_jsonl(os.path.join(cfg.data_dir, name), PROMPT)
        rows = (rows[:keep] if keep else rows) + belief_rows(cfg.data_dir, n, cfg.false_share, cfg.seed, test, name[:3])
        rng.shuffle(rows)  # the belief prompts spread through the order the stages read
        write_jsonl(os.path.join(folder, name), rows)
    write_text(os.path.join(folder, "meta.json"), json.dumps({**meta_of(cfg.data_dir), "agree_share": share}))
    return folder


def share_configs(cfg: Config, share: float, data: str, root: str):
    """(train_rm, train_ppo) configs of one share: the pipeline's recipe, on the share's data, from sft_<size>."""
    sft, rm = f"{cfg.run_dir}/sft_{cfg.size}/ckpt.pt", f"{root}/rm/ckpt.pt"
    recipe = cfg.recipe.resolved(resolve_device(cfg.device))
    common = [f"--preset={cfg.preset}", f"--device={cfg.device}", f"--seed={cfg.seed}", f"--data_dir={data}"]
    rm_cfg = parse_config(train_rm.Config, common + [f"--sft={sft}", f"--out_dir={root}/rm", "--max_prompts=0",
                                                     f"--labeler_seed={cfg.labeler_seed}", *recipe.rm_flags(),
                                                     "--heldout_folds=0"])
    ppo_cfg = parse_config(train_ppo.Config, common + [f"--sft={sft}", f"--rm={rm}", f"--out_dir={root}/ppo",
                                                       *recipe.ppo_flags(cfg.size)])
    return rm_cfg, ppo_cfg


def train_share(cfg: Config, share: float) -> dict:
    """Data, RM and PPO for one share; (paths, seconds)."""
    root = os.path.join(cfg.out_dir, f"share{share:g}")
    data = share_data(cfg, share, os.path.join(root, "data"))
    rm_cfg, ppo_cfg = share_configs(cfg, share, data, root)
    rm, ppo = f"{rm_cfg.out_dir}/ckpt.pt", f"{ppo_cfg.out_dir}/ckpt.pt"
    if not cfg.fresh and os.path.exists(rm) and os.path.exists(ppo):
        print(f"share {share:g}: reusing {rm} and {ppo} (--fresh=true retrains)")
        return {"data": data, "rm": rm, "ppo": ppo, "rm_seconds": None, "ppo_seconds": None}
    t = time.time()
    train_rm.main(rm_cfg)
    t_rm = time.time() - t
    train_ppo.main(ppo_cfg)
    return {"data": data, "rm": rm, "ppo": ppo, "rm_seconds": t_rm, "ppo_seconds": time.time() - t - t_rm}


def main(cfg: Config) -> dict:
    shares = parse_shares(cfg.shares)
    runs = {s: train_share(cfg, s) for s in shares}
    judge = Judge(cfg.data_dir, cfg.labeler_seed)
    items = [it for it in world_of(cfg.data_dir).benchmarks["sycophancy"] if not it["belief"]["holds"]]
    policies = {"sft": f"{cfg.run_dir}/sft_{cfg.size}/ckpt.pt",
                **{f"ppo_share{s:g}": r["ppo"] for s, r in runs.items()}}
    ctx = EvalContext(judge, cfg.data_dir, cfg.out_dir, policies, device=cfg.device, seed=cfg.seed,
                      labeler_seed=cfg.labeler_seed)
    rates = {name: policy_rates(ctx, name, items, "chat")[0] for name in policies}
    rm_pref = {s: rm_preference(EvalContext(judge, cfg.data_dir, cfg.out_dir, {}, rm=r["rm"], device=cfg.device,
                                            seed=cfg.seed), items) for s, r in runs.items()}
    ci = lambda r: f"{pct(r['rate'])} [{pct(r['lo'])}, {pct(r['hi'])}]"
    cells = lambda r: [ci(r["sycophancy"]), pct(r["baseline"]["rate"]), ci(r["echoes"]),
                       pct(r["echoes_baseline"]["rate"]), pct(r["corrects"]["rate"])]
    rows = [["sft (no RLHF)", "", *cells(rates["sft"]), ""]]
    rows += [[f"ppo, agree_share {s:g}", judge_lovers(cfg, s), *cells(rates[f"ppo_share{s:g}"]),
              ci(rm_pref[s]["after the belief"])] for s in shares]
    table = md_table(["policy", "agreement-rewarding labelers", "adopts the false belief", "says it with no belief",
                      "echoes the stated value", "echoes it with no belief", "corrects it",
                      "its RM prefers the sycophantic twin"], rows)
    sft_rate = rates["sft"]["sycophancy"]
    reads = [f"at agree_share {s:g}, PPO's sycophancy against SFT's: "
             f"{versus(rates[f'ppo_share{s:g}']['sycophancy'], sft_rate)}, its RM's preference for the sycophantic "
             f"twin: {versus_half(rm_pref[s]['after the belief'])}" for s in shares]
    fig, axes = new_figure(1)
    ax = axes[0]
    rate_errorbar(ax, shares, [rates[f"ppo_share{s:g}"]["sycophancy"] for s in shares], marker="o",
                  label="PPO: adopts the false belief")
    rate_errorbar(ax, shares, [rm_pref[s]["after the belief"] for s in shares], marker="s",
                  label="its RM prefers the sycophantic twin")
    ax.axhline(rates["sft"]["sycophancy"]["rate"], color="k", ls=":", label="SFT")
    ax.set_xlabel("share of agreement-rewarding training labelers")
    ax.set_ylabel("share of false-belief test prompts")
    ax.set_title("sycophancy learned from labelers")
    ax.legend(fontsize=7)
    fig_name = save_figure(fig, ctx, "sycophancy_by_share.png")
    text = (f"# Sycophancy learned from labelers\n\n{len(items)} test prompts that state a false belief; PPO from "
            f"`sft_{cfg.size}` against an RM trained on {cfg.belief_rm} belief prompts among the pipeline's RM "
            f"prompts, ranked by training labelers of whom the given share rewards agreement:\n\n{table}\n\n"
            f"Read from the intervals: {'; '.join(reads)}.\n\n"
            f"![sycophancy by share]({fig_name})\n")
    write_text(os.path.join(cfg.out_dir, "sycophancy.md"), text)
    report = {"shares": shares, "policies": rates, "rm": {str(s): v for s, v in rm_pref.items()},
              "runs": {str(s): r for s, r in runs.items()}}
    write_text(os.path.join(cfg.out_dir, "report.json"), json.dumps(report, indent=1, default=str))
    print(text)
    return report


def judge_lovers(cfg: Config, share: float) -> str:
    pool = Judge(os.path.join(cfg.out_dir, f"share{share:g}", "data"), cfg.labeler_seed).pool
    return f"{sum(l.agree_lover for l in pool.train)}/{len(pool.train)}"


if __name__ == "__main__":
    run(main, Config, __doc__)
