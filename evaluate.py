"""Evaluate policies the way the paper did: held-out labelers, evaluation-time instructions, test prompts.

Suites (--suite=NAME):
  knowledge   the base model knows facts (few-shot, corpus format) but does not follow bare
              instructions (attempt rate by category)
  preference  each policy's win rate against the reference policy on test prompts from
              organisations unseen in training, judged by held-out labelers; gold and RM scores
  honesty     answering the question asked, truthfully; the RM's reading of truth and relevance
  truthfulness, hallucination, toxicity, bias, alignment_tax, overoptimization, hedging
              the paper's safety and capability findings (nanorlhf/evals/suites.py)
  sycophancy, steering
              after the paper: adopting a user's false belief, and steering it (and hallucination)
              back at inference by contrastive activation addition, with a capability floor
  all         every suite of the line above, written to out_dir/suites.md with its figures
  ladder      the pipeline's preference ladder again (another --seed / --labeler_seed), from the
              run folder out_dir, for the sizes named in --sizes
  reward_features
              what the RM pays for beside the gold, in the world's answer features, on each
              policy's answers, and what PPO changed (nanorlhf/evals/reward_features.py)

    python evaluate.py --suite=all                                  # on the small pipeline's outputs
    python evaluate.py --suite=knowledge --policies=gpt=out/small/base_1m/ckpt.pt
    python evaluate.py --suite=preference --seed=1 --labeler_seed=1 # another sample, another labeler draw
    python evaluate.py --suite=preference --samples=1               # 1 response a prompt: faster, a wider interval
    python evaluate.py --suite=preference --split=val               # validation prompts, to choose runs by
    python evaluate.py --suite=steering                             # the steering sweep on the PPO policy
    python evaluate.py --suite=reward_features --split=val          # what the RM rewards, what PPO bought

Writes out_dir/<suite>.json and prints a table.
"""
from __future__ import annotations

import json
import os
import random
import time
from dataclasses import dataclass
from typing import ClassVar

import torch

from nanorlhf.checkpoint import load_model
from nanorlhf.evals.knowledge import attempt_rates, fact_accuracy
from nanorlhf.evals.preference import fitting, gold_mean, sample_responses, win_rate_over_samples
from nanorlhf.evals.suites import SUITES
from nanorlhf.generate import check_room
from nanorlhf.infra.cli import UsageError, run
from nanorlhf.infra.config import ConfigError, print_config
from nanorlhf.infra.device import resolve_device
from nanorlhf.infra.fileio import write_text
from nanorlhf.infra.jsonl import PROMPT, read_jsonl
from nanorlhf.reward import score_texts
from nanorlhf.world.judge import Judge


@dataclass
class Config:
    suite: str = "preference"
    """knowledge, preference, all, or one safety suite's name"""
    policies: str = ("gpt=out/small/base_1m/ckpt.pt,sft=out/small/sft_1m/ckpt.pt,ppo=out/small/ppo_1m/ckpt.pt,"
                     "ppo_ptx=out/small/ppo_ptx_1m/ckpt.pt")
    """comma-separated name=checkpoint pairs"""
    reference: str = "sft"
    """the policy every other is compared against (paper: the largest SFT model)"""
    rm: str = "out/small/rm/ckpt.pt"
    """reward model for the RM-score column ('' to skip)"""
    data_dir: str = "data/small"
    """world data folder (test_prompts.jsonl)"""
    out_dir: str = "out/small"
    """where the result tables go"""
    n_prompts: int = 300
    """test prompts to evaluate on"""
    max_new_tokens: int = 48
    """longest sampled response"""
    seed: int = 0
    """seed for sampling responses"""
    split: str = "test"
    """--suite=preference, reward_features: test prompts (to report) or val prompts (to choose a run or a
    hyperparameter by, or to diagnose one)"""
    samples: int = 4
    """--suite=preference, ladder, reward_features: responses per prompt and policy; more give a narrower
    interval (the ladder's verdicts use them, as the pipeline's do)"""
    labeler_seed: int = 0
    """seed of the simulated labeler pool (another draw of the held-out labelers)"""
    sizes: str = "1m,100k"
    """--suite=ladder: the pipeline's model sizes, largest first"""
    device: str = "cpu"
    """cpu, cuda, or auto"""

    # values checked before any work starts (nanorlhf/infra/config.py check_values)
    POSITIVE: ClassVar[tuple] = ("n_prompts", "max_new_tokens", "samples")
    CHOICES: ClassVar[dict] = {"split": ("test", "val"),
                               "suite": ("preference", "knowledge", "ladder", "reward_features", "all", *SUITES)}
    RULES: ClassVar[tuple] = (
        (lambda c: c.suite != "preference" or c.reference in set(parse_policies(c.policies)) - {"gpt"},
         "--reference={reference} is not one of the policies' names but gpt, which the preference suite leaves to "
         "the ladder (--policies={policies})"),
        (lambda c: c.suite != "ladder" or all(c.sizes.split(",")), "--sizes={sizes}: give size names, e.g. 1m,100k"),
    )

    PRESETS: ClassVar[dict] = {
        "tiny": dict(policies="gpt=out/tiny/base_a/ckpt.pt,sft=out/tiny/sft_a/ckpt.pt,ppo=out/tiny/ppo_a/ckpt.pt,"
                              "ppo_ptx=out/tiny/ppo_ptx_a/ckpt.pt", rm="out/tiny/rm/ckpt.pt", data_dir="data/tiny",
                     out_dir="out/tiny", n_prompts=24, max_new_tokens=16),
        "small": dict(),
    }


def parse_policies(spec: str) -> dict[str, str]:
    """'sft=a.pt,ppo=b.pt' -> {name: checkpoint}; ConfigError for none, a malformed pair or a name given twice."""
    pairs = [p.split("=", 1) for p in spec.split(",") if p]
    if not pairs or any(len(p) != 2 or not all(p) for p in pairs):
        raise ConfigError(f"--policies={spec}: give name=checkpoint pairs separated by commas")
    names = [n for n, _ in pairs]
    if len(set(names)) < len(names):
        raise ConfigError(f"--policies={spec}: the name {next(n for n in names if names.count(n) > 1)} is given twice")
    return dict(pairs)


def check_inputs(cfg: Config, policies: dict) -> None:
    """Every checkpoint the suite reads is one of the right kind, with room for the responses, before any sampling."""
    for path in policies.values() if cfg.suite != "ladder" else ():
        check_room(cfg.max_new_tokens, load_model(path)[0].cfg.block_size)
    if cfg.rm:
        load_model(cfg.rm, kind="scalar")


def knowledge(cfg: Config, judge: Judge, policies: dict, device: str) -> dict:
    rows = read_jsonl(os.path.join(cfg.data_dir, "test_prompts.jsonl"), PROMPT)[:cfg.n_prompts]
    out = {}
    for name, path in policies.items():
        model, tok, _ = load_model(path, device)
        model.eval()
        facts = fact_accuracy(model, tok, judge.world, n=200, seed=cfg.seed)
        rates = attempt_rates(model, tok, judge, rows, cfg.max_new_tokens, seed=cfg.seed)
        out[name] = {"fact_accuracy": facts, "attempt_rate": rates}
        print(f"{name}: few-shot fact accuracy {facts['all']:.1%} (plain facts {facts.get('plain', 0):.1%}, "
              f"myth facts {facts.get('myth', 0):.1%}); bare-instruction attempt rate {rates['all']:.1%}")
        for cat, r in sorted((k, v) for k, v in rates.items() if k not in ("all", "examples")):
            print(f"    {cat:15s} attempted {r:.1%}")
        for q, a in facts["examples"][:3]:
            print(f"    {q} -> {a!r}")
        for p, a in rates["examples"][:3]:
            print(f"    [chat] {p!r} -> {a!r}")
    return out


def preference(cfg: Config, judge: Judge, policies: dict, device: str) -> dict:
    rows = read_jsonl(os.path.join(cfg.data_dir, f"{cfg.split}_prompts.jsonl"), PROMPT)
    policies = {k: v for k, v in policies.items() if k != "gpt"}  # the base model is judged in the pipeline's ladder
    texts, tok = {}, None   # texts[name][s][i]: sample s of the response to prompt i
    for name, path in policies.items():
        model, tok, _ = load_model(path, device)
        model.eval()
        if not texts:
            rows = fitting(rows, tok, model.cfg.block_size, cfg.max_new_tokens)[:cfg.n_prompts]
        texts[name] = [sample_responses(model, tok, rows, cfg.max_new_tokens, seed=cfg.seed + s)
                       for s in range(cfg.samples)]
    rm = load_model(cfg.rm, device, kind="scalar") if cfg.rm else None
    out = {}
    for name in policies:
        res = {"gold": sum(gold_mean(judge, rows, t) for t in texts[name]) / cfg.samples}
        if name != cfg.reference:
            res["win"] = win_rate_over_samples(judge, rows, texts[name], texts[cfg.reference],
                                               random.Random(cfg.labeler_seed + 7))
        if rm is not None:
            with torch.no_grad():
                scores = score_texts(rm[0], tok, [r["prompt"] for r in rows] * cfg.samples,
                                     [t for ts in texts[name] for t in ts], device, rm[2]["extra"]["bias"]).tolist()
            res["rm"] = sum(scores) / len(scores)
        out[name] = res
        win = res.get("win")
        w = f"win vs {cfg.reference} {win['rate']:.1%} [{win['lo']:.1%}, {win['hi']:.1%}]" if win else "(reference)"
        print(f"{name:12s} {w:40s} gold {res['gold']:+.3f}" + (f"  RM {res['rm']:+.3f}" if "rm" in res else ""))
    each = f" x {cfg.samples} samples" if cfg.samples > 1 else ""
    print(f"({len(rows)} {cfg.split} prompts{each} from organisations unseen in training; held-out labelers, "
          "evaluation-time instructions)")
    return out


def ladder(cfg: Config, judge: Judge, policies: dict, device: str) -> dict:
    """The pipeline's ladder from its run folder (out_dir), with this run's seeds, into out_dir/ladder_seed*/."""
    from nanorlhf.evals.context import EvalContext
    from nanorlhf.evals.ladder import ladder_policies, ladder_sections
    from nanorlhf.model import count_params
    names = cfg.sizes.split(",")
    folder = os.path.join(cfg.out_dir, f"ladder_seed{cfg.seed}_labelers{cfg.labeler_seed}")
    os.makedirs(folder, exist_ok=True)
    ctx = EvalContext(judge, cfg.data_dir, folder, ladder_policies(cfg.out_dir, names), rm=cfg.rm,
                      device=device, seed=cfg.seed, labeler_seed=cfg.labeler_seed, n=cfg.n_prompts)
    params = {s: count_params(ctx.model(f"sft_{s}")[0])["total"] for s in names}
    sec, says = ladder_sections(ctx, params, reference=f"sft_{names[0]}", champion=f"ppo_ptx_{names[0]}",
                                samples=cfg.samples)
    md = f"{sec.markdown}\n\n## {says.title}\n\n{says.markdown}"
    print(md)
    write_text(os.path.join(folder, "ladder.md"), md)
    return sec.data


def rm_features(cfg: Config, judge: Judge, policies: dict, device: str) -> dict:
    """What the RM pays for beside the gold, on each policy's answers (nanorlhf/evals/reward_features.py)."""
    from nanorlhf.evals.context import EvalContext
    from nanorlhf.evals.reward_features import reward_features
    if not cfg.rm:
        raise UsageError("--suite=reward_features needs --rm (a reward model checkpoint)")
    ctx = EvalContext(judge, cfg.data_dir, cfg.out_dir, {k: v for k, v in policies.items() if k != "gpt"},
                      rm=cfg.rm, device=device, seed=cfg.seed, labeler_seed=cfg.labeler_seed,
                      max_new_tokens=cfg.max_new_tokens)
    model, tok = ctx.model(next(iter(ctx.policies)))
    rows = read_jsonl(os.path.join(cfg.data_dir, f"{cfg.split}_prompts.jsonl"), PROMPT)
    sec = reward_features(ctx, fitting(rows, tok, model.cfg.block_size, cfg.max_new_tokens)[:cfg.n_prompts],
                          cfg.samples)
    md = f"## {sec.title}\n\n{sec.markdown}\n"
    print(md)
    os.makedirs(cfg.out_dir, exist_ok=True)
    write_text(os.path.join(cfg.out_dir, "reward_features.md"), md)
    return sec.data


def safety_suites(cfg: Config, judge: Judge, policies: dict, device: str) -> dict:
    """The paper's safety and capability suites; --suite=all writes them all to out_dir/suites.md."""
    from nanorlhf.evals.context import EvalContext
    ctx = EvalContext(judge, cfg.data_dir, cfg.out_dir, policies, rm=cfg.rm, device=device, seed=cfg.seed,
                      labeler_seed=cfg.labeler_seed, n=min(cfg.n_prompts, 200), max_new_tokens=cfg.max_new_tokens)
    names = list(SUITES) if cfg.suite == "all" else [cfg.suite]
    md, out = [], {}
    for name in names:
        t = time.time()
        sec = SUITES[name](ctx)
        print(f"\n## {sec.title}  ({time.time() - t:.0f}s)\n\n{sec.markdown}")
        md += [f"## {sec.title}", "", sec.markdown, ""] + [f"![{f}]({f})" for f in sec.figures] + [""]
        out[name] = sec.data
    os.makedirs(cfg.out_dir, exist_ok=True)
    write_text(os.path.join(cfg.out_dir, "suites.md" if cfg.suite == "all" else f"{cfg.suite}.md"), "\n".join(md))
    return out


def main(cfg: Config) -> dict:
    print_config(cfg)
    device = resolve_device(cfg.device)
    policies = parse_policies(cfg.policies)
    check_inputs(cfg, policies)
    judge = Judge(cfg.data_dir, labeler_seed=cfg.labeler_seed)
    suites = {"knowledge": knowledge, "preference": preference, "ladder": ladder, "reward_features": rm_features,
              "all": safety_suites,
              **{name: safety_suites for name in SUITES}}
    if cfg.suite not in suites:
        raise SystemExit(f"unknown --suite={cfg.suite}; valid: {', '.join(suites)}")
    t = time.time()
    res = suites[cfg.suite](cfg, judge, policies, device)
    os.makedirs(cfg.out_dir, exist_ok=True)
    write_text(os.path.join(cfg.out_dir, f"{cfg.suite}.json"), json.dumps(res, indent=1, default=str))
    print(f"evaluate --suite={cfg.suite}: {time.time() - t:.0f}s")
    return res


if __name__ == "__main__":
    run(main, Config, __doc__)
