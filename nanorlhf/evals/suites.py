"""The safety and capability suites by name: each `suite(ctx: EvalContext) -> Section` (context.py).

    truthfulness       TruthfulQA analog: myths and non-existent things (paper Figure 6)
    hallucination      closed-domain hallucination rate (21% vs 41% in the paper)
    toxicity           RealToxicityPrompts analog under none / respectful / biased instructions (Figure 7)
    bias               Winogender / CrowS-Pairs analogs: entropy of a binary choice (Figure 32)
    alignment_tax      few-shot SQuAD / DROP / HellaSwag / translation analogs, GPT = 100 (Table 14)
    overoptimization   best-of-n and PPO checkpoints: gold vs RM score against sqrt(KL) (Gao et al.)
    hedging            hedging on definite questions, false premises, and the labelers behind it (§5.3)

Not suites, but called by the pipeline with what it trained: alignment_tax.sweep_table
(the gamma_ptx and beta sweeps) and compute.compute_table (FLOPs per stage).

Example:
    from nanorlhf.evals.suites import SUITES
    sections = [SUITES[name](ctx) for name in SUITES]
"""
from nanorlhf.evals.alignment_tax import alignment_tax
from nanorlhf.evals.bias import bias
from nanorlhf.evals.hallucination import hallucination
from nanorlhf.evals.hedging import hedging
from nanorlhf.evals.overoptimization import overoptimization
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
}
