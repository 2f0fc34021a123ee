"""One frontier for PPO and what came after it: gold against KL from SFT, each method's win rate against SFT.

From the pipeline's own sft_<size> and RM (and its ppo_<size>, ppo_ptx_<size>), this trains the critic-free
methods at the recipe's budget (the same episodes as PPO: iterations x P prompts x G responses), DPO on the RM's
comparisons, an RLVR run (GRPO on the tasks a rule can check, rewarded by the rule) and the random-reward
control, then measures every policy like the lineage's frontier (nanorlhf/evals/frontier.py), with best-of-n
beside them. Pass@k (k = 1..16) of SFT and of the RLVR policy on held-out verifiable tasks asks whether RL
sharpens pass@1 while SFT covers more at large k (Yue et al. 2025).

    python pipeline.py --preset=small                   # first: the SFT model, the RM, PPO and PPO-ptx
    python -m experiments.frontier --preset=small       # trains what is missing, then measures; writes out_dir/
                                                        # frontier.json, frontier.png, passk.png, frontier.md

Runs are cached like the pipeline's stages (out_dir/<name>/stage.json): a rerun only measures.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from typing import ClassVar

import train_dpo
import train_grpo
from nanorlhf.evals.context import EvalContext
from nanorlhf.evals.frontier import Run, frontier_section
from nanorlhf.evals.passk import passk_section
from nanorlhf.infra.cli import run
from nanorlhf.infra.config import parse_config, print_config
from nanorlhf.infra.device import resolve_device
from nanorlhf.infra.fileio import read_json, write_text
from nanorlhf.infra.lanes import run_lanes
from nanorlhf.infra.stages import Stages
from nanorlhf.pg import PGConfig
from nanorlhf.recipe import Recipe
from nanorlhf.world.judge import Judge

# (run name, method label on the frontier, train_grpo flags)
CRITIC_FREE = [("grpo", "GRPO", ["--estimator=grpo"]), ("dr_grpo", "Dr. GRPO", ["--estimator=dr_grpo",
               "--aggregation=constant"]), ("rloo", "RLOO", ["--estimator=rloo"]),
               ("reinforce_baseline", "REINFORCE-baseline", ["--estimator=reinforce_baseline"]),
               ("rlvr", "RLVR (GRPO, rule reward)", ["--estimator=grpo", "--reward=rlvr"]),
               ("random", "random reward (control)", ["--estimator=grpo", "--reward=random"])]


@dataclass
class Config:
    run_dir: str = "out/small"
    """the pipeline run: its sft_<size>, rm, ppo_<size> and ppo_ptx_<size>"""
    data_dir: str = "data/small"
    """the world data folder the run was trained on"""
    out_dir: str = "out/small/frontier"
    """where the runs, frontier.json and the figures go"""
    size: str = "1m"
    """which size of the run to start from"""
    recipe: Recipe = field(default_factory=Recipe)
    """the pipeline's recipe (nanorlhf/recipe.py): the episode budget, beta, lr and dtype of every RL run"""
    group_size: int = PGConfig.group_size
    """G, responses per prompt of the critic-free methods (P = the recipe's batch / G prompts an iteration)"""
    dpo_beta: float = train_dpo.Config.beta
    """DPO's beta (train_dpo.py's)"""
    bon_ns: str = "2,4,8,16"
    """best-of-n sizes"""
    n_eval: int = 300
    """test prompts per measurement"""
    passk: int = 16
    """samples per task for pass@k (k = 1..passk)"""
    lanes: int = 2
    """runs side by side on a CPU (nanorlhf/infra/lanes.py)"""
    seed: int = 0
    """seed of training and of the evaluation samples"""
    labeler_seed: int = 0
    """seed of the held-out labeler pool"""
    device: str = "cpu"
    """cpu, cuda, or auto"""
    fresh: bool = False
    """retrain every run even when cached"""

    POSITIVE: ClassVar[tuple] = ("group_size", "dpo_beta", "n_eval", "passk", "lanes")
    PRESETS: ClassVar[dict] = {
        "tiny": dict(run_dir="out/tiny", data_dir="data/tiny", out_dir="out/tiny/frontier", size="a", group_size=4,
                     bon_ns="2,4", n_eval=16, passk=4, **Recipe.PRESETS["tiny"]),
        "small": dict(**Recipe.PRESETS["small"]),
    }


def jobs(cfg: Config) -> list[tuple]:
    """Stages.run arguments of every run to train: the critic-free ones, then DPO."""
    r, preset = cfg.recipe.resolved(resolve_device(cfg.device)), "tiny" if "tiny" in cfg.data_dir else "small"
    sft, rm, out = f"{cfg.run_dir}/sft_{cfg.size}/ckpt.pt", f"{cfg.run_dir}/rm/ckpt.pt", cfg.out_dir
    common = [f"--preset={preset}", f"--device={cfg.device}", f"--seed={cfg.seed}", f"--data_dir={cfg.data_dir}",
              f"--sft={sft}", f"--rm={rm}", *r.grpo_flags(cfg.size, cfg.group_size)]
    out_jobs = []
    for name, _, flags in CRITIC_FREE:
        c = parse_config(train_grpo.Config, common + [f"--out_dir={out}/{name}", *flags])
        out_jobs.append((name, train_grpo.main, c, [sft] + ([rm] if c.reward == "rm" else []), f"{out}/{name}/ckpt.pt"))
    cmp = f"{cfg.run_dir}/rm/comparisons.jsonl"
    d = parse_config(train_dpo.Config, [f"--preset={preset}", f"--device={cfg.device}", f"--seed={cfg.seed}",
                                        f"--sft={sft}", f"--comparisons={cmp}", f"--out_dir={out}/dpo",
                                        f"--val_comparisons={cfg.run_dir}/rm/val_comparisons.jsonl",
                                        f"--beta={cfg.dpo_beta}"])
    out_jobs.append(("dpo", train_dpo.main, d, [sft, cmp], f"{out}/dpo/ckpt.pt"))
    return out_jobs


def main(cfg: Config) -> dict:
    print_config(cfg)
    t0, device = time.time(), resolve_device(cfg.device)
    for need in (f"{cfg.run_dir}/sft_{cfg.size}/ckpt.pt", f"{cfg.run_dir}/rm/ckpt.pt"):
        if not os.path.exists(need):
            raise SystemExit(f"{need} not found: run `python pipeline.py --preset=...` first")
    st = Stages(cfg.out_dir, cfg.fresh)
    todo = jobs(cfg)
    n_lanes = cfg.lanes if device == "cpu" else 1
    run_lanes(st, [todo[i::n_lanes] for i in range(n_lanes)], n_lanes)
    train_s = time.time() - t0
    rm_labels = read_json(f"{cfg.run_dir}/rm/report.json").get("n_train_comparisons")  # every RM-reward run's labels
    runs = [Run(f"bon{n}", "best-of-n", n=n, human_labels=rm_labels) for n in map(int, cfg.bon_ns.split(","))]
    for name, method in ((f"ppo_{cfg.size}", "PPO"), (f"ppo_ptx_{cfg.size}", "PPO-ptx")):
        if os.path.exists(f"{cfg.run_dir}/{name}/ckpt.pt"):
            runs.append(Run(name, method, f"{cfg.run_dir}/{name}/ckpt.pt", human_labels=rm_labels, ai_labels=0,
                            wall_s=read_json(f"{cfg.run_dir}/{name}/stage.json").get("seconds")))
    runs += [Run(name, method, f"{cfg.out_dir}/{name}/ckpt.pt", ai_labels=0, wall_s=st.log.get(name, {}).get("seconds"),
                 human_labels=0 if name in ("rlvr", "random") else rm_labels) for name, method, _ in CRITIC_FREE]
    runs.append(Run("dpo", "DPO", f"{cfg.out_dir}/dpo/ckpt.pt", wall_s=st.log.get("dpo", {}).get("seconds")))
    judge = Judge(cfg.data_dir, labeler_seed=cfg.labeler_seed)
    ctx = EvalContext(judge, cfg.data_dir, cfg.out_dir, {"sft": f"{cfg.run_dir}/sft_{cfg.size}/ckpt.pt",
                                                         "rlvr": f"{cfg.out_dir}/rlvr/ckpt.pt"},
                      rm=f"{cfg.run_dir}/rm/ckpt.pt", device=device, seed=cfg.seed, labeler_seed=cfg.labeler_seed,
                      n=cfg.n_eval)
    front = frontier_section(ctx, runs)
    passk = passk_section(ctx, ["sft", "rlvr"], cfg.passk)
    points = {p["name"]: {"method": p["method"], "kl": p["kl"], "gold": p["gold"], "gold_vs_sft": p["gold_vs_sft"],
                          "win_vs_sft": {"rate": p["win"], "lo": p["lo"], "hi": p["hi"]},
                          "labels": p["human_labels"]}
              for p in front.data["points"]}
    report = {"points": points, "passk": passk.data, "train_s": train_s, "seconds": time.time() - t0}
    write_text(os.path.join(cfg.out_dir, "frontier.json"), json.dumps(report, indent=1))
    md = f"## PPO and what came after it: gold against KL\n\n{front.markdown}\n\n## {passk.title}\n\n{passk.markdown}\n"
    write_text(os.path.join(cfg.out_dir, "frontier.md"), md)
    print(md)
    print(f"done in {(time.time() - t0) / 60:.1f} min (training {train_s / 60:.1f} min) -> {cfg.out_dir}")
    return report


if __name__ == "__main__":
    run(main, Config, __doc__)
