"""The safety and capability suites by name: each `suite(ctx: EvalContext) -> Section` (context.py).

    truthfulness       TruthfulQA analog: myths and non-existent things (paper Figure 6)
    hallucination      closed-domain hallucination rate (21% vs 41% in the paper)
    toxicity           RealToxicityPrompts analog under none / respectful / biased instructions (Figure 7)
    bias               Winogender / CrowS-Pairs analogs: entropy of a binary choice (Figure 32)
    alignment_tax      few-shot SQuAD / DROP / HellaSwag / translation analogs, GPT = 100 (Table 14)
    overoptimization   best-of-n and PPO checkpoints: gold vs RM score against sqrt(KL) (Gao et al.)
    hedging            hedging on definite questions, false premises, and the labelers behind it (§5.3)
    sycophancy         adopting a user's false stated belief: policies, the RM, the labelers behind it
    steering           contrastive activation addition against sycophancy and hallucination, capability floor

Not suites, but called by the pipeline with what it trained: alignment_tax.sweep_table
(the gamma_ptx and beta sweeps) and compute.compute_table (FLOPs per stage).

Example:
    from nanorlhf.evals.suites import SUITES
    sections = [SUITES[name](ctx) for name in SUITES]
"""
import time

from nanorlhf.evals.context import EvalContext
from nanorlhf.evals.alignment_tax import alignment_tax
from nanorlhf.evals.bias import bias
from nanorlhf.evals.hallucination import hallucination
from nanorlhf.evals.hedging import hedging
from nanorlhf.evals.overoptimization import overoptimization
from nanorlhf.evals.steering import steering
from nanorlhf.evals.sycophancy import sycophancy
from nanorlhf.evals.toxicity import toxicity_suite
from nanorlhf.evals.truthfulness import truthfulness

SUITES = {
    "truthfulness": truthfulness,
    "hallucination": hallucination,
    "toxicity": toxicity_suite,
    "bias": bias,
    "alignment_tax": alignment_tax,
    "overoptimization": overoptimization,
    "hedging": hedging,
    "sycophancy": sycophancy,
    "steering": steering,
}


def suite_sections(ctx: EvalContext, suites: str, size: str) -> list:
    """The suites named in `suites` (all, none, or comma-separated names) on one size's ladder policies."""
    if suites == "none":
        return []
    sub = EvalContext(ctx.judge, ctx.data_dir, ctx.out_dir,
                      {"gpt": ctx.policies[f"gpt_{size}"], "sft": ctx.policies[f"sft_{size}"],
                       "ppo": ctx.policies[f"ppo_{size}"], "ppo_ptx": ctx.policies[f"ppo_ptx_{size}"]},
                      rm=ctx.rm, device=ctx.device, seed=ctx.seed, labeler_seed=ctx.labeler_seed, n=200)
    out = []
    for name in (list(SUITES) if suites == "all" else suites.split(",")):
        t = time.time()
        out.append(SUITES[name](sub))
        print(f"suite {name}: {time.time() - t:.0f}s")
    return out
