"""The safety and capability suites by name: each `suite(ctx: EvalContext) -> Section` (context.py).

    honesty            answering the question asked, truthfully; the RM's reading of truth and relevance
    truthfulness       TruthfulQA analog: myths and non-existent things (paper Figure 6)
    hallucination      closed-domain hallucination rate (21% vs 41% in the paper)
    toxicity           RealToxicityPrompts analog under none / respectful / biased instructions (Figure 7)
    bias               Winogender / CrowS-Pairs analogs: entropy of a binary choice (Figure 32)
    alignment_tax      few-shot SQuAD / DROP / HellaSwag / translation analogs, GPT = 100 (Table 14)
    overoptimization   best-of-n and PPO checkpoints: gold vs RM score against sqrt(KL) (Gao et al.)
    hedging            hedging on definite questions, false premises, and the labelers behind it (§5.3)
    sycophancy         adopting a user's false stated belief: policies, the RM, the labelers behind it
    steering           contrastive activation addition against sycophancy and hallucination, capability floor

`ladder_and_suites` is the pipeline's evaluation: the ladder and the suites, in two processes side by side.

Not suites, but called by the pipeline with what it trained: alignment_tax.sweep_table
(the gamma_ptx and beta sweeps) and compute.compute_table (FLOPs per stage).

Example:
    from nanorlhf.evals.suites import SUITES
    sections = [SUITES[name](ctx) for name in SUITES]
"""
import time
from dataclasses import replace
from functools import partial

from nanorlhf.evals.alignment_tax import alignment_tax
from nanorlhf.evals.bias import bias
from nanorlhf.evals.context import EvalContext
from nanorlhf.evals.hallucination import hallucination
from nanorlhf.evals.hedging import hedging
from nanorlhf.evals.honesty import honesty
from nanorlhf.evals.overoptimization import overoptimization
from nanorlhf.evals.steering import steering
from nanorlhf.evals.sycophancy import sycophancy
from nanorlhf.evals.toxicity import toxicity_suite
from nanorlhf.evals.truthfulness import truthfulness
from nanorlhf.infra.metrics import Progress

SUITES = {
    "honesty": honesty,
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
    out, names = [], names_of(suites)
    bar = Progress(len(names), "suites")
    for i, name in enumerate(names, 1):
        t = time.time()
        out.append(SUITES[name](sub))
        print(bar.line(i, last=f"{name} {time.time() - t:.0f}s"), flush=True)
    return out


BESIDE_LADDER = ("alignment_tax", "hedging")
"""suites run in the ladder's process, so that the evaluation's two halves take about as long: in the small
run the ladder took about 60 s on its core and the suites 97 s on theirs, these two 13 s and 5 s of them"""


def names_of(suites: str) -> list[str]:
    """all, none, or comma-separated names -> the suites' names, in SUITES order for all."""
    return [] if suites == "none" else list(SUITES) if suites == "all" else suites.split(",")


def ladder_then(ctx: EvalContext, ladder_args: tuple, suites: str, size: str) -> tuple[list, list]:
    """(the ladder's sections, then those of the named suites), in one process."""
    from nanorlhf.evals.ladder import ladder_sections
    return ladder_sections(ctx, *ladder_args), suite_sections(ctx, suites, size)


def ladder_and_suites(ctx: EvalContext, ladder_args: tuple, suites: str, size: str, n_lanes: int) -> list:
    """The ladder's sections (ladder_sections(ctx, *ladder_args)), then the suites' in report order. On two lanes,
    the ladder and BESIDE_LADDER's suites run in one process and the other suites in another (nanorlhf/infra/lanes.py),
    each side loading its own models."""
    from nanorlhf.infra.lanes import side_by_side
    names = names_of(suites)
    first, rest = [n for n in names if n in BESIDE_LADDER], [n for n in names if n not in BESIDE_LADDER]
    (ladder, heavy), others = side_by_side(
        [("ladder", partial(ladder_then, replace(ctx, _cache={}), ladder_args, ",".join(first) or "none", size)),
         ("suites", partial(suite_sections, replace(ctx, _cache={}), ",".join(rest) or "none", size))], n_lanes)
    by_name = dict(zip(first, heavy)) | dict(zip(rest, others))
    return ladder + [by_name[n] for n in names]
