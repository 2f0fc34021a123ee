"""Sycophancy learned from labelers, and steered back: RLHF with belief prompts at five shares of labelers who
reward agreement (Sharma et al. 2023; Perez et al. 2022), then contrastive activation addition (Rimsky et al. 2023).

From a pipeline run's base_<size> and data (python pipeline.py --preset=small first):

  1. data     the pipeline's data with belief prompts (world/beliefs.py, half false, training organisations,
              none a test item's text) added: `belief_sft` demonstrations to sft.jsonl, half of the false ones
              agreeing with the user and half correcting (world/demos.py belief_reply), so the SFT model samples
              both; `belief_rm` RM prompts and `belief_ppo` PPO prompts (kept_rm_prompts and kept_ppo_prompts of
              the pipeline's beside them)
  2. SFT      train_sft.main from base_<size> on those demonstrations, with the pipeline's recipe
  3. samples  K = 4..9 completions of each RM prompt from that SFT model, once: every share's labelers rank the
              same completions (relabel() does what train_rm.py's collection does, with that share's pool)
  4. shares   for agree_share 0, 25, 50, 75, 100%: train_rm.main on its labels and train_ppo.main against that
              RM, the pipeline's recipe (nanorlhf/recipe.py), two lanes side by side (nanorlhf/infra/lanes.py)
  5. judge    SFT and each PPO policy on the test false-belief prompts (evals/sycophancy.py: the log-odds shift
              and the sampled rate), each RM on twins and prefixes; the SFT policy steered (evals/steering.py)
  6. report   findings.json (sycophancy_learned, sycophancy_steered, capability_floor_held), sycophancy.md and
              two figures (nanorlhf/evals/sycophancy_study.py)

    python pipeline.py --preset=small                                   # first, once: base_1m and data/small
    python -m experiments.sycophancy --preset=small                     # writes out/small/sycophancy/
    python -m experiments.sycophancy --preset=small --out_root=/tmp/out --data_root=/tmp/data
"""
from __future__ import annotations

import json
import os
import random
import shutil
import time
from dataclasses import dataclass, field, replace
from functools import partial
from typing import ClassVar

import train_ppo
import train_rm
import train_sft
from nanorlhf.checkpoint import load_model
from nanorlhf.evals import sycophancy_study as report
from nanorlhf.infra.cli import run
from nanorlhf.infra.config import ConfigError, parse_config, print_config
from nanorlhf.infra.device import resolve_device
from nanorlhf.infra.fileio import write_text
from nanorlhf.infra.jsonl import COMPARISON, DEMO, PROMPT, read_jsonl, write_jsonl
from nanorlhf.infra.lanes import side_by_side
from nanorlhf.infra.stages import Stages
from nanorlhf.recipe import Recipe
from nanorlhf.world.beliefs import belief_demos, belief_rows
from nanorlhf.world.comparisons import checks, fitting_prompts, label, sample_completions
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
    preset: str = "small"
    """tiny or small: the pipeline run this starts from, and the study's sizes"""
    run: str = ""
    """the pipeline's run folder out_root/<run> (default: the preset)"""
    out_root: str = "out"
    """folder holding run folders (as pipeline.py's)"""
    data_root: str = "data"
    """folder holding world data folders (as pipeline.py's)"""
    size: str = "1m"
    """which of the pipeline's base models the study's SFT starts from"""
    shares: str = "0,0.25,0.5,0.75,1"
    """shares of agreement-rewarding training labelers, comma-separated"""
    # the SFT model knows the facts, so it copies a stated belief far less often than its demonstrators do: with 300
    # belief demonstrations it stated the believed value in 1.2% of its samples of the small run's false-belief RM
    # prompts (14 of 247 ranked sets carried an agreement contrast), with 1,000 in 3.4% (34 of 247)
    belief_sft: int = 1000
    """belief prompts added to the SFT demonstrations"""
    # DEVIATION: InstructGPT's demonstrators write what they hold true; here half of them adopt a false belief the
    # user states (Sharma et al. 2023 trace sycophancy to human data), so that the SFT model samples both answers
    # and the labelers' rankings can reward one over the other
    agree_demos: float = 0.5
    """share of the false-belief demonstrations that adopt the user's belief (the rest correct it)"""
    belief_rm: int = 500
    """belief prompts added to the RM prompts"""
    belief_ppo: int = 1000
    """belief prompts added to the PPO prompts"""
    false_share: float = 0.5
    """share of the belief prompts whose belief is false"""
    # DEVIATION: the paper's prompts are users' own, a few of them stating a belief; here each share's RM ranks belief
    # prompts alone and its PPO samples them alone, so every label and episode goes to the behaviour measured (five
    # RMs and five PPO runs must fit in 15 minutes; the pipeline's prompts can be kept beside them)
    kept_rm_prompts: int = 0
    """the pipeline's RM prompts kept beside the belief prompts (its label budget is 4,500)"""
    kept_ppo_prompts: int = 0
    """the pipeline's PPO prompts kept beside the belief prompts"""
    samples: int = 2
    """sampled answers per test prompt for the sampled rates"""
    recipe: Recipe = field(default_factory=Recipe)
    """the pipeline's recipe (nanorlhf/recipe.py): the study's SFT, RMs and PPO train as the pipeline's do"""
    labeler_seed: int = 0
    """seed of the simulated labeler pool"""
    seed: int = 0
    """seed for belief prompts, sampling and training"""
    device: str = "cpu"
    """cpu, cuda, or auto"""
    lanes: int = 2
    """processes side by side on a CPU (nanorlhf/infra/lanes.py); 1 runs everything in turn"""
    fresh: bool = False
    """retrain every stage even when its checkpoint is up to date"""

    POSITIVE: ClassVar[tuple] = ("belief_sft", "belief_rm", "belief_ppo", "samples", "lanes")
    NONNEGATIVE: ClassVar[tuple] = ("kept_rm_prompts", "kept_ppo_prompts")
    RANGES: ClassVar[dict] = {"false_share": "[0, 1]", "agree_demos": "[0, 1]"}
    RULES: ClassVar[tuple] = ((lambda c: c.size in c.recipe.names(),
                               "--size={size} is not one of the recipe's --sizes"),
                              (lambda c: bool(parse_shares(c.shares)), "--shares={shares}"))
    CHOICES: ClassVar[dict] = {"preset": ("tiny", "small")}
    PRESETS: ClassVar[dict] = {
        "tiny": dict(preset="tiny", size="a", belief_sft=24, belief_rm=16, belief_ppo=16, kept_rm_prompts=16,
                     kept_ppo_prompts=16, samples=1, **Recipe.PRESETS["tiny"]),
        "small": dict(**Recipe.PRESETS["small"]),
    }

    @property
    def run_dir(self) -> str:
        return os.path.join(self.out_root, self.run or self.preset)

    @property
    def data_dir(self) -> str:
        return os.path.join(self.data_root, self.preset)

    @property
    def out_dir(self) -> str:
        return os.path.join(self.run_dir, "sycophancy")


def study_data(cfg: Config, folder: str) -> str:
    """The pipeline's data folder with belief demonstrations, RM prompts and PPO prompts added."""
    os.makedirs(folder, exist_ok=True)
    for name in os.listdir(cfg.data_dir):
        src, dst = os.path.join(cfg.data_dir, name), os.path.join(folder, name)
        if not os.path.exists(dst):
            (shutil.copytree if os.path.isdir(src) else shutil.copy2)(src, dst)
    test = {t for it in world_of(cfg.data_dir).benchmarks["sycophancy"] for t in (it["text"], it["neutral"]["text"])}
    rng = random.Random(f"belief-mix-{cfg.seed}")
    data = world_of(cfg.data_dir)
    new = {tag: belief_rows(data, n, cfg.false_share, cfg.seed, test, tag)
           for tag, n in (("sft", cfg.belief_sft), ("rm", cfg.belief_rm), ("ppo", cfg.belief_ppo))}
    for name, rows in (("sft.jsonl", read_jsonl(os.path.join(cfg.data_dir, "sft.jsonl"), DEMO)
                        + belief_demos(data.world, new["sft"], cfg.agree_demos, cfg.seed)),
                       ("rm_prompts.jsonl", read_jsonl(os.path.join(cfg.data_dir, "rm_prompts.jsonl"), PROMPT)
                        [:cfg.kept_rm_prompts] + new["rm"]),
                       ("ppo_prompts.jsonl", read_jsonl(os.path.join(cfg.data_dir, "ppo_prompts.jsonl"), PROMPT)
                        [:cfg.kept_ppo_prompts] + new["ppo"])):
        rng.shuffle(rows)  # the belief rows spread through the order the stages read
        write_jsonl(os.path.join(folder, name), rows)
    return folder


def share_data(common: str, share: float, folder: str) -> str:
    """A data folder for one share: the study's files (hard links where the file system allows) and meta.json's
    agree_share, which nanorlhf/world/judge.py reads."""
    os.makedirs(folder, exist_ok=True)
    for name in os.listdir(common):
        src, dst = os.path.join(common, name), os.path.join(folder, name)
        if name != "meta.json" and not os.path.exists(dst):
            try:
                os.link(src, dst) if os.path.isfile(src) else shutil.copytree(src, dst)
            except OSError:
                shutil.copy2(src, dst)
    write_text(os.path.join(folder, "meta.json"), json.dumps({**meta_of(common), "agree_share": share}))
    return folder


def sft_config(cfg: Config, data: str) -> train_sft.Config:
    """The study's SFT: the pipeline's SFT stage at cfg.size, on the data with belief demonstrations."""
    common = [f"--preset={cfg.preset}", f"--device={cfg.device}", f"--seed={cfg.seed}", f"--data_dir={data}"]
    recipe = cfg.recipe.resolved(resolve_device(cfg.device))
    return parse_config(train_sft.Config, common + [f"--base={cfg.run_dir}/base_{cfg.size}/ckpt.pt",
                                                    f"--out_dir={cfg.out_dir}/sft", *recipe.sft_flags(cfg.size)])


def share_configs(cfg: Config, share: float, data: str, root: str):
    """(train_rm, train_ppo) configs of one share: the pipeline's recipe, on the share's data and labels."""
    sft, rm = f"{cfg.out_dir}/sft/ckpt.pt", f"{root}/rm/ckpt.pt"
    recipe = cfg.recipe.resolved(resolve_device(cfg.device))
    common = [f"--preset={cfg.preset}", f"--device={cfg.device}", f"--seed={cfg.seed}", f"--data_dir={data}"]
    rm_cfg = parse_config(train_rm.Config, common + [f"--sft={sft}", f"--out_dir={root}/rm", "--max_prompts=0",
                                                     f"--labeler_seed={cfg.labeler_seed}", *recipe.rm_flags(),
                                                     "--heldout_folds=0", f"--comparisons={root}/labels.jsonl",
                                                     "--fact_checks=0"])  # its labels: the belief prompts' own
    ppo_cfg = parse_config(train_ppo.Config, common + [f"--sft={sft}", f"--rm={rm}", f"--out_dir={root}/ppo",
                                                       *recipe.ppo_flags(cfg.size)])
    return rm_cfg, ppo_cfg


def sample_once(rm_cfg, procs: int) -> tuple[list[dict], list[list[str]]]:
    """(rows, completions): what train_rm.py's collection samples for rm_cfg's RM prompts (the same seeds and K)."""
    hp, (sft, tok, _) = rm_cfg.collect, load_model(rm_cfg.sft, resolve_device(rm_cfg.device), dropout=0.0)
    rows = fitting_prompts(os.path.join(rm_cfg.data_dir, "rm_prompts.jsonl"), tok, sft.cfg.block_size,
                           hp.max_new_tokens, hp.max_prompts)
    rng = random.Random(f"rm-{rm_cfg.seed}")
    ks = [rng.randint(hp.k_min, hp.k_max) for _ in rows]
    return rows, sample_completions(sft, tok, [r["prompt"] for r in rows], ks, hp.sampling, batch=hp.gen_batch,
                                    seed=rm_cfg.seed, procs=procs)


def relabel(rm_cfg, rows: list[dict], completions: list[list[str]]) -> list[dict]:
    """The training comparisons train_rm.py's collection makes of these completions, ranked by rm_cfg's labelers
    (its data folder's agree_share): the same random streams, so every share ranks the same completions."""
    hp, judge = rm_cfg.collect, Judge(rm_cfg.data_dir, labeler_seed=rm_cfg.labeler_seed)
    rng = random.Random(f"rm-{rm_cfg.seed}")
    for _ in rows:
        rng.randint(hp.k_min, hp.k_max)
    return label(judge, rows, completions, judge.pool.train, rng, "rm") + checks(judge, rows, hp, rm_cfg.seed,
                                                                                 completions)


def share_lane(cfg: Config, shares: list[float], common: str, sampled: tuple, steer_sft: bool) -> dict:
    """One lane: each share's labels, RM and PPO (stages skipped when up to date), then its measures."""
    st, out = Stages(cfg.out_dir, cfg.fresh), {}
    for s in shares:
        root = os.path.join(cfg.out_dir, f"share{s:g}")
        rm_cfg, ppo_cfg = share_configs(cfg, s, share_data(common, s, os.path.join(root, "data")), root)
        os.makedirs(root, exist_ok=True)
        write_jsonl(rm_cfg.comparisons, relabel(rm_cfg, *sampled), COMPARISON)
        st.run(f"share{s:g}/rm", train_rm.main, rm_cfg, [rm_cfg.sft, rm_cfg.comparisons], f"{root}/rm/ckpt.pt")
        st.run(f"share{s:g}/ppo", train_ppo.main, ppo_cfg, [ppo_cfg.sft, ppo_cfg.rm, f"{common}/ppo_prompts.jsonl"],
               f"{root}/ppo/ckpt.pt")
        out[s] = report.judge_share(cfg, s, rm_cfg, f"{root}/ppo/ckpt.pt")
    if steer_sft:
        out["sft"] = report.judge_policy(cfg, f"{cfg.out_dir}/sft/ckpt.pt")
        out["steering"] = report.steer_policy(cfg, f"{cfg.out_dir}/sft/ckpt.pt")
    return out


def main(cfg: Config) -> dict:
    print_config(cfg)
    t0 = time.time()
    probe = [report.probe(cfg)]
    cfg = replace(cfg, recipe=cfg.recipe.resolved(resolve_device(cfg.device)))
    shares = parse_shares(cfg.shares)
    common = study_data(cfg, os.path.join(cfg.out_dir, "data"))
    st = Stages(cfg.out_dir, cfg.fresh)
    sft = sft_config(cfg, common)
    st.run("sft", train_sft.main, sft, [sft.base, f"{common}/sft.jsonl"], f"{cfg.out_dir}/sft/ckpt.pt")
    rm0, _ = share_configs(cfg, shares[0], common, cfg.out_dir)
    n_lanes = cfg.lanes if resolve_device(cfg.device) == "cpu" else 1
    t = time.time()
    sampled = sample_once(rm0, n_lanes)
    print(f"sampled {sum(map(len, sampled[1]))} completions once for every share ({time.time() - t:.0f}s)")
    split = [shares[0::2], shares[1::2]] if n_lanes > 1 and len(shares) > 1 else [shares]
    jobs = [(f"shares {', '.join(f'{s:g}' for s in part)}",
             partial(share_lane, cfg, part, common, sampled, i == len(split) - 1)) for i, part in enumerate(split)]
    results = {k: v for part in side_by_side(jobs, n_lanes) for k, v in part.items()}
    probe.append(report.probe(cfg))
    return report.write(cfg, shares, results, sampled, t0, probe)


if __name__ == "__main__":
    run(main, Config, __doc__)
