"""Iterated online RLHF (Christiano et al. 2017; Bai et al. 2022), and RLAIF with a hybrid preference model.

Christiano et al. ran three loops at once: the policy acts, comparisons are
collected on its behaviour, the reward predictor is refit. Bai et al. (2022)
ran the same thing in rounds ("iterated online"), so the preference model keeps
up with the policy's own samples. Each round here:

  1. collect  K = 4..9 samples of the CURRENT policy for fresh RM prompts, ranked by one
              simulated training labeler each (prompts_per_round: the label budget per round);
              with ai_pairs_per_round > 0, also harmlessness pairs of the current policy labeled
              by the feedback model (nanorlhf/world/feedback.py; Constitutional AI / RLAIF)
  2. fit      the preference model on ALL comparisons so far, fine-tuned from the last
              round's (from the SFT trunk in round 1); the bias re-centred on demonstrations
  3. PPO      round_iterations more iterations of train_ppo.main from the current policy
              against the new PM; the KL reference stays pi_SFT throughout

Three runs of the lineage are this one loop with different flags:

    python -m experiments.iterated --preset=small                                    # iterated: 3 rounds x 100 prompts
    python -m experiments.iterated --preset=small --rounds=1 --prompts_per_round=300 --round_iterations=60 \\
        --out_dir=out/small/upfront          # the same budget spent once up front (= train_rm --max_prompts=300, then PPO)
    python -m experiments.iterated --preset=small --rounds=1 --prompts_per_round=0 --ai_pairs_per_round=600 \\
        --comparisons=out/small/rm/comparisons.jsonl --round_iterations=60 --out_dir=out/small/rlaif   # RLAIF hybrid PM

`python pipeline.py --preset=small --lineage=true` runs two of them as stages from its own sft_1m and
RM (`train_lineage` below): rlaif_1m (600 AI pairs beside the RM's comparisons, the pipeline's PPO
iterations) and iterated_1m (3 rounds, each a third of the RM's prompts and of the PPO iterations; the
same budget up front is the pipeline's ppo_1m), both at the pipeline's beta and the RM's learning rate.

Writes out_dir/rm{r}.pt, out_dir/comparisons.jsonl (all so far; AI rows have source "ai"), out_dir/ppo/
(the policy, iter{N}.pt at the end of each round) and report.json (labels and wall seconds per round).
"""
from __future__ import annotations

import dataclasses
import json
import os
import random
import time
from dataclasses import asdict, dataclass, field
from typing import ClassVar


import train_dpo
import train_ppo
from nanorlhf.checkpoint import load_model, save_checkpoint, seed_everything
from nanorlhf.evals.lineage import PLANS
from nanorlhf.generate import SamplingConfig
from nanorlhf.infra.cli import run
from nanorlhf.infra.config import config_dict, parse_config, print_config
from nanorlhf.infra.device import resolve_device
from nanorlhf.infra.fileio import write_text
from nanorlhf.infra.jsonl import COMPARISON, DEMO, label_counts, read_jsonl, write_jsonl
from nanorlhf.model import ScalarHeadModel
from nanorlhf.recipe import Recipe
from nanorlhf.reward import RewardConfig, demo_bias, fit_reward_model, ranking_accuracy
from nanorlhf.rollout import PromptSampler
from nanorlhf.world import feedback
from nanorlhf.world.comparisons import label, load_comparisons, sample_completions
from nanorlhf.world.judge import Judge


@dataclass
class Config:
    sft: str = "out/small/sft_1m/ckpt.pt"
    """SFT checkpoint: the first policy, the PM trunk, the KL reference"""
    data_dir: str = "data/small"
    """world data folder holding rm_prompts.jsonl, ppo_prompts.jsonl, sft.jsonl"""
    out_dir: str = "out/small/iterated"
    """where PMs, comparisons, the PPO run and the report go"""
    comparisons: str = ""
    """comparisons labeled before round 1 (e.g. out/small/rm/comparisons.jsonl); they count as labels"""
    rounds: int = 3
    """collect -> fit -> PPO rounds"""
    prompts_per_round: int = 100
    """label budget per round: RM prompts whose K samples a simulated labeler ranks"""
    ai_pairs_per_round: int = 0
    """harmlessness pairs per round labeled by the feedback model (> 0: RLAIF, a hybrid PM)"""
    feedback_model: str = ""
    """feedback-model checkpoint ('' = the SFT checkpoint)"""
    principle: str = feedback.PRINCIPLE
    """the written principle the feedback model answers"""
    k_min: int = 4
    """fewest completions ranked per prompt"""
    k_max: int = 9
    """most completions ranked per prompt"""
    max_new_tokens: int = 48
    """longest sampled completion (comparisons and PPO)"""
    temperature: float = 1.0
    """sampling temperature"""
    gen_batch: int = 64
    """sequences generated at once"""
    recipe: Recipe = field(default_factory=Recipe)
    """the pipeline's recipe (nanorlhf/recipe.py): the PM's learning rate, PPO's batch, lr, beta and dtype"""
    pm_epochs: int = 1
    """passes over all comparisons so far, per round (the PM continues from last round's)"""
    batch_prompts: int = 8
    """prompts (each with all its completions) per PM step"""
    round_iterations: int = 20
    """PPO iterations per round (3 rounds of 20: the recipe's 60 at 1m, split)"""
    ppo_minibatch_size: int = 32
    """episodes per PPO gradient step (train_ppo.py's)"""
    labeler_seed: int = 0
    """seed of the simulated labeler pool"""
    seed: int = 0
    """seed for prompt order and sampling"""
    device: str = "cpu"
    """cpu, cuda, or auto"""

    # values checked before any work starts (nanorlhf/infra/config.py check_values)
    POSITIVE: ClassVar[tuple] = ("rounds", "max_new_tokens", "temperature", "gen_batch", "pm_epochs", "batch_prompts",
                                 "round_iterations", "ppo_minibatch_size")
    NONNEGATIVE: ClassVar[tuple] = ("prompts_per_round", "ai_pairs_per_round")
    RANGES: ClassVar[dict] = {"k_min": "[2, 9]", "k_max": "[2, 9]"}
    RULES: ClassVar[tuple] = (
        (lambda c: c.k_min <= c.k_max, "--k_min={k_min} is above --k_max={k_max}"),
        (lambda c: c.ppo_minibatch_size <= c.recipe.ppo_batch,
         "--ppo_minibatch_size={ppo_minibatch_size} is above the recipe's --ppo_batch"),
    )

    PRESETS: ClassVar[dict] = {
        "tiny": dict(sft="out/tiny/sft_a/ckpt.pt", data_dir="data/tiny", out_dir="out/tiny/iterated", rounds=2,
                     prompts_per_round=4, k_max=5, max_new_tokens=16, gen_batch=32, batch_prompts=4,
                     round_iterations=1, ppo_minibatch_size=4, **Recipe.PRESETS["tiny"]),
        "small": dict(**Recipe.PRESETS["small"]),
    }


def ppo_config(cfg: Config, rm: str, r: int) -> train_ppo.Config:
    """Round r's PPO: resume the one PPO run (policy, value, optimiser, prompt order) against a new PM, with the
    recipe's PPO (its batch, lr, beta and dtype) at this study's length, temperature and minibatch."""
    recipe = cfg.recipe.resolved(resolve_device(cfg.device))
    flags = [*recipe.ppo_hparams(), f"--minibatch_size={cfg.ppo_minibatch_size}",
             f"--max_new_tokens={cfg.max_new_tokens}", f"--temperature={cfg.temperature}"]
    return parse_config(train_ppo.Config, flags + [
        f"--sft={cfg.sft}", f"--rm={rm}", f"--data_dir={cfg.data_dir}", f"--out_dir={os.path.join(cfg.out_dir, 'ppo')}",
        f"--iterations={(r + 1) * cfg.round_iterations}", f"--save_every={cfg.round_iterations}",
        f"--log_every={max(1, cfg.round_iterations // 4)}", f"--seed={cfg.seed}", f"--device={cfg.device}",
        f"--resume={r > 0}"])


def main(cfg: Config) -> dict:
    print_config(cfg)
    t_start = time.time()
    device = resolve_device(cfg.device)
    seed_everything(cfg.seed)
    os.makedirs(cfg.out_dir, exist_ok=True)
    sft, tok, sft_ck = load_model(cfg.sft, device, dropout=0.0)
    judge, rng = Judge(cfg.data_dir, labeler_seed=cfg.labeler_seed), random.Random(f"iterated-{cfg.seed}")
    room = sft.cfg.block_size - cfg.max_new_tokens
    rm_prompts = PromptSampler(os.path.join(cfg.data_dir, "rm_prompts.jsonl"), tok, room, seed=cfg.seed)
    harm_prompts = PromptSampler(os.path.join(cfg.data_dir, "rm_prompts.jsonl"), tok, room, seed=cfg.seed + 1)
    fb_model = load_model(cfg.feedback_model or cfg.sft, device)[0].eval() if cfg.ai_pairs_per_round else None
    demos = read_jsonl(os.path.join(cfg.data_dir, "sft.jsonl"), DEMO)[:256]
    all_cmp = load_comparisons(cfg.comparisons) if cfg.comparisons else []
    (human, ai), rounds, pm, policy = label_counts(all_cmp), [], None, sft     # "ai" rows count as AI labels
    sampling = dict(sampling=SamplingConfig(max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature),
                    batch=cfg.gen_batch)
    for r in range(cfg.rounds):
        rep = {"round": r + 1}
        # 1. collect: the current policy's samples, ranked by simulated training labelers
        rows = rm_prompts.next(cfg.prompts_per_round) if cfg.prompts_per_round else []
        ks = [rng.randint(cfg.k_min, cfg.k_max) for _ in rows]
        comps = sample_completions(policy, tok, [x["prompt"] for x in rows], ks, **sampling, seed=cfg.seed + 100 * r)
        new = label(judge, rows, comps, judge.pool.train, rng, f"it{r + 1}")
        if pm is not None and new:
            # how well last round's PM ranks the new policy's samples: why the PM needs refreshing
            rep["stale_pm_accuracy"] = ranking_accuracy(pm, tok, new, device)
        # 1b. AI feedback: harmlessness pairs of the current policy, labeled by the feedback model
        if cfg.ai_pairs_per_round:
            hrows = harm_prompts.next(cfg.ai_pairs_per_round)
            two = sample_completions(policy, tok, [x["prompt"] for x in hrows], [2] * len(hrows), **sampling,
                                     seed=cfg.seed + 100 * r + 1)
            pairs = feedback.harmlessness_pairs(hrows, two, rng)
            probs = feedback.prefer(fb_model, tok, *zip(*[(x["prompt"], a, b) for x, a, b in pairs]),
                                    principle=cfg.principle)
            new += feedback.ai_comparisons(pairs, probs, f"ai{r + 1}")       # source "ai"
            rep["feedback_agreement"] = feedback.agreement(judge, pairs, probs, rng)
            print(f"round {r + 1}: feedback model agrees with gold order on {rep['feedback_agreement']['gold']:.1%}, "
                  f"with a held-out labeler on {rep['feedback_agreement']['heldout_labeler']:.1%}, "
                  f"with the toxicity order on {rep['feedback_agreement']['toxicity']:.1%} of {len(pairs)} pairs")
        h, a = label_counts(new)
        human, ai = human + h, ai + a
        all_cmp += new
        write_jsonl(os.path.join(cfg.out_dir, "comparisons.jsonl"), all_cmp, COMPARISON)
        # 2. fit the PM on all comparisons so far, continuing from last round's
        pm = ScalarHeadModel.from_gpt(sft).to(device) if pm is None else pm
        print(f"round {r + 1}: fitting the PM on {len(all_cmp)} comparisons ({human} human, {ai} AI)")
        pm_hp = RewardConfig(lr=cfg.recipe.rm_lr, epochs=cfg.pm_epochs, batch_prompts=cfg.batch_prompts)
        fit_reward_model(pm, tok, all_cmp, pm_hp, seed=cfg.seed + r)
        bias = demo_bias(pm, tok, demos, device)
        pm_path = os.path.join(cfg.out_dir, f"rm{r + 1}.pt")
        save_checkpoint(pm_path, model=pm.state_dict(), config=config_dict(cfg), step=r + 1,
                        extra={"model_config": dataclasses.asdict(pm.cfg), "tokenizer": sft_ck["extra"]["tokenizer"],
                               "bias": bias, "n_comparisons": len(all_cmp)})
        # 3. PPO from the current policy against the new PM (reference: pi_SFT)
        res = train_ppo.main(ppo_config(cfg, pm_path, r))
        policy = res["policy"].eval()
        rep.update({"pm": pm_path, "human_labels": human, "ai_labels": ai, "wall_s": time.time() - t_start,
                    "ppo_ckpt": os.path.join(cfg.out_dir, "ppo", f"iter{(r + 1) * cfg.round_iterations}.pt"),
                    "score": res["metrics"][-1]["objective/score"], "kl": res["metrics"][-1]["objective/kl"]})
        rounds.append(rep)
        print(f"round {r + 1} done: PM score {rep['score']:+.3f}, KL {rep['kl']:.2f}")
    report = {"rounds": rounds, "human_labels": human, "ai_labels": ai, "wall_s": time.time() - t_start,
              "policy": res["ckpt"]}
    write_text(os.path.join(cfg.out_dir, "report.json"), json.dumps(report, indent=1))
    print(f"done: {cfg.rounds} rounds, {human} human + {ai} AI labels, {report['wall_s']:.0f}s -> {res['ckpt']}")
    return {"report": report, "ckpt": res["ckpt"], "policy": policy, "pm": pm}


def train_lineage(st, cfg, common: list[str], out: str, data: str, size: str, iterations: int) -> None:
    """Train the lineage's stages from sft_<size> and the RM's comparisons, each run and cached like the
    pipeline's own (`st`: Stages; out/<run>/<stage>/stage.json; the plan: nanorlhf/evals/lineage.py):

      dpo_b<beta>_<size>  DPO on the RM's comparisons (no RM, no sampling), one per beta
      rlaif_<size>        the RM's comparisons + AI-labeled harmlessness pairs -> hybrid PM -> PPO
      iterated_<size>     the RM's label budget and the PPO iterations split over rounds, each round labeling
                          the current policy's samples; the same budget up front is the pipeline's ppo_<size>
    `iterations` is the pipeline's PPO iterations at `size`, which rlaif and iterated train too.
    """
    plan = PLANS[cfg.preset]
    sft, cmp, val = f"{out}/sft_{size}/ckpt.pt", f"{out}/rm/comparisons.jsonl", f"{out}/rm/val_comparisons.jsonl"
    for beta in plan.dpo_betas:
        name = f"dpo_b{beta}_{size}"
        dc = parse_config(train_dpo.Config, common + [f"--sft={sft}", f"--comparisons={cmp}", f"--out_dir={out}/{name}",
                                                      f"--val_comparisons={val}", f"--beta={beta}",
                                                      f"--max_steps={plan.dpo_max_steps}"])
        st.run(name, train_dpo.main, dc, [sft, cmp], f"{out}/{name}/ckpt.pt")
    rm = st.log["rm"]
    budget = rm["result"]["report"]["n_train_comparisons"]           # prompts the RM's labelers ranked
    if iterations % plan.rounds:        # else iterated trains less than ppo_<size> (labels: counted)
        raise ValueError(f"iterated RLHF splits the {iterations} PPO iterations over {plan.rounds} rounds: "
                         f"choose --ppo_iterations divisible by {plan.rounds}")
    # the pipeline's recipe (the RM stage's learning rate for the PM; PPO's beta, batch, lr, dtype and iterations)
    shared = [f"--sft={sft}", f"--data_dir={data}", *(f"--{k}={v}" for k, v in asdict(cfg.recipe).items()),
              f"--labeler_seed={cfg.labeler_seed}"]
    for name, flags, inputs in (
            (f"rlaif_{size}", [f"--comparisons={cmp}", "--rounds=1", "--prompts_per_round=0",
                               f"--ai_pairs_per_round={plan.ai_pairs}", f"--round_iterations={iterations}"],
             [sft, cmp]),
            (f"iterated_{size}", [f"--rounds={plan.rounds}", f"--prompts_per_round={budget // plan.rounds}",
                                  f"--round_iterations={iterations // plan.rounds}"], [sft])):
        ic = parse_config(Config, common + shared + flags + [f"--out_dir={out}/{name}"])
        st.run(name, main, ic, inputs, f"{out}/{name}/ppo/ckpt.pt")


if __name__ == "__main__":
    run(main, Config, __doc__)
