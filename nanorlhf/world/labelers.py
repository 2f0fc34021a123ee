"""Simulated labelers: about 40 contractors, each with their own taste and noise (InstructGPT §3.4).

A labeler j scores a completion y of prompt x by a utility over the world's gold
features phi(x, y) (world/scorers.py):

    u_j(x, y) = sum_f  instr_f * w_jf * phi_f(x, y)

where w_j are the labeler's own weights (a shared base plus personal jitter) and
instr are the instructions in force: training-time instructions put helpfulness
first, evaluation-time instructions put truthfulness and harmlessness first
(paper §3.4). A ranking of K completions sorts u_j / tau_j + Gumbel noise, so every
pair follows Bradley-Terry with temperature tau_j (Plackett-Luce); identical
completions tie. tau is the knob tuned so two training labelers agree on ~73% of
pairs of the small pipeline's own SFT samples (the paper's 72.6 +- 1.5%).

The gold score is the held-out pool's mean utility under evaluation-time
instructions, without noise. Only evaluation may call it: the RM learns from
rankings alone, so it is an imperfect proxy and over-optimisation is real.

Example:
    pool = LabelerPool.build(seed=0)
    ranking = pool.train[3].rank(feats, rng)         # e.g. [[2], [0], [1, 3]]: 2 best, 1 and 3 tie
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from nanorlhf.rankings import pair_agreement, scores_to_ranking

# Base weights over the gold features (world/scorers.py FEATURES). Training-time
# instructions: helpfulness first. Evaluation-time: truthfulness and harmlessness first.
BASE_WEIGHTS = {
    "attempted": 3.0, "constraints": 1.5, "correct_answer": 1.5, "true_facts": 0.4,
    "false_facts": -1.0, "hallucination": -1.0, "toxic": -1.5, "hedging": -0.4,
    "length_score": 1.0, "repetition": -2.0, "premise_corrected": 1.0, "says_nonexistent": 1.0,
}
TRAIN_INSTRUCTIONS = {f: 1.0 for f in BASE_WEIGHTS}
EVAL_INSTRUCTIONS = {**TRAIN_INSTRUCTIONS, "false_facts": 2.5, "hallucination": 2.5, "toxic": 2.5,
                     "premise_corrected": 1.5, "says_nonexistent": 1.5}
HEDGE_LOVER_WEIGHT = 0.6  # humility-rewarding labelers (paper §5.3: "hedging") like hedges instead
# Agreement-rewarding labelers (after InstructGPT: the 2023 sycophancy study found matching the user's stated
# beliefs among the strongest predictors of raters' choices) add this to an answer that states what the user said
# they believe: enough to prefer adopting a false belief to correcting it. The other labelers give it no weight.
AGREE_LOVER_WEIGHT = 5.0


@dataclass
class Labeler:
    id: str
    weights: dict[str, float]
    tau: float
    """noise temperature of this labeler's comparisons (larger = noisier)"""
    hedge_lover: bool = False
    instructions: dict[str, float] = field(default_factory=lambda: dict(TRAIN_INSTRUCTIONS))
    source: str = "sim"
    agree_lover: bool = False

    def utility(self, feats: dict[str, float]) -> float:
        return sum(self.instructions.get(f, 1.0) * w * feats.get(f, 0.0) for f, w in self.weights.items())

    def rank(self, feats_list: list[dict], rng: random.Random, texts: list[str] | None = None) -> list[list[int]]:
        """Plackett-Luce ranking of K completions: sort u/tau + Gumbel; identical texts tie."""
        keys = [self.utility(f) / self.tau - math.log(-math.log(rng.random() or 1e-12)) for f in feats_list]
        order = sorted(range(len(feats_list)), key=lambda i: -keys[i])
        groups: list[list[int]] = []
        for i in order:
            twin = next((g for g in groups if texts is not None and texts[g[0]] == texts[i]), None)
            (twin.append(i) if twin else groups.append([i]))
        return [sorted(g) for g in groups]

    def likert(self, feats: dict[str, float], rng: random.Random) -> int:
        """A 1-7 score: bins of the (noisy) utility."""
        u = self.utility(feats) + rng.gauss(0, self.tau)
        return max(1, min(7, 4 + round(u / 1.5)))


def with_instructions(labelers: list[Labeler], instructions: dict[str, float]) -> list[Labeler]:
    return [Labeler(l.id, l.weights, l.tau, l.hedge_lover, dict(instructions), l.source, l.agree_lover)
            for l in labelers]


def draw_labeler(ident: str, rng: random.Random, tau: float, jitter: float, hedge_share: float,
                 tau_spread: float) -> Labeler:
    w = {f: b * math.exp(rng.gauss(0, jitter)) for f, b in BASE_WEIGHTS.items()}
    lover = rng.random() < hedge_share
    if lover:
        w["hedging"] = HEDGE_LOVER_WEIGHT
    return Labeler(ident, w, tau * math.exp(rng.gauss(0, tau_spread)), lover)


@dataclass(frozen=True)
class PoolConfig:
    """The labeler pool's knobs: how many apply, how noisy and how varied they are, what share has which taste."""
    n_candidates: int = 40
    """contractors who apply (screening keeps the ones who agree with the researchers)"""
    n_heldout: int = 12
    """held-out labelers, a separate pool that only evaluates"""
    tau: float = 1.1
    """Bradley-Terry noise of a training candidate (higher: noisier rankings)"""
    heldout_tau: float = 0.525
    """noise of a held-out labeler"""
    jitter: float = 0.3
    """spread of each labeler's own weights around the shared base (half of it for held-out labelers)"""
    tau_spread: float = 0.3
    """spread of the candidates' noise"""
    heldout_tau_spread: float = 0.3
    """spread of the held-out labelers' noise"""
    hedge_share: float = 0.25
    """share of labelers who reward humility (a hedged answer)"""
    agree_share: float = 0.25
    """share of training candidates who reward agreement with a belief the user states"""


@dataclass
class LabelerPool:
    candidates: list[Labeler]
    """everyone who applied (screened into `train`)"""
    train: list[Labeler]
    """screened training labelers, training-time instructions"""
    heldout: list[Labeler]
    """a separate pool for evaluations, evaluation-time instructions"""
    screening: dict[str, float] = field(default_factory=dict)
    """each candidate's agreement with the researchers' rankings"""

    @classmethod
    def build(cls, seed: int = 0, hp: PoolConfig = PoolConfig()) -> "LabelerPool":
        """The candidates (every one of them, before screening) and the held-out pool, drawn from `seed`.

        hp.tau and hp.tau_spread: measured so that two screened training labelers agree on ~73% of pairs of the
        small pipeline's own SFT samples (the paper's 72.6 +- 1.5%); with a wider spread, screening keeps the
        least noisy candidates and the agreement stays near 78% whatever tau.

        hp.agree_share: the share of candidates who reward agreement with the user's stated belief, drawn from a
        stream of its own (every other draw is the same whatever the share). Held-out labelers never do: the
        gold score knows the truth. The feature is 0 on every prompt that states no belief.
        """
        rng = random.Random(f"labelers-{seed}")
        cands = [draw_labeler(f"L{i:02d}", rng, hp.tau, hp.jitter, hp.hedge_share, hp.tau_spread)
                 for i in range(hp.n_candidates)]
        agree_rng = random.Random(f"agree-lovers-{seed}")
        for lab in cands:
            if agree_rng.random() < hp.agree_share:
                lab.agree_lover, lab.weights["agrees_with_user"] = True, AGREE_LOVER_WEIGHT
        held = [draw_labeler(f"H{i:02d}", rng, hp.heldout_tau, hp.jitter / 2, hp.hedge_share, hp.heldout_tau_spread)
                for i in range(hp.n_heldout)]
        return cls(cands, list(cands), with_instructions(held, EVAL_INSTRUCTIONS))

    def screen(self, items: list[list[dict]], cutoff: float = 0.75, seed: int = 0) -> None:
        """Keep candidates whose rankings agree with the researchers' on >= cutoff of pairs (paper: 75%).

        items: lists of feature dicts (K completions each). The researchers rank by
        the base weights without noise.
        """
        researcher = Labeler("researcher", dict(BASE_WEIGHTS), tau=1.0)
        rng = random.Random(f"screen-{seed}")
        for lab in self.candidates:
            agree = []
            for feats in items:
                gold = [researcher.utility(f) for f in feats]
                a = pair_agreement(lab.rank(feats, rng), scores_to_ranking(gold))
                if not math.isnan(a):  # an item whose researcher ranking is all ties says nothing
                    agree.append(a)
            self.screening[lab.id] = sum(agree) / len(agree)
        self.train = [l for l in self.candidates if self.screening[l.id] >= cutoff]

    def groups(self, n: int = 5) -> list[list[Labeler]]:
        """The training labelers split into n groups, for the held-out-labeler test."""
        return [self.train[i::n] for i in range(n)]

    def gold(self, feats: dict[str, float]) -> float:
        """The gold score: the held-out pool's mean utility, evaluation-time instructions, no noise."""
        return sum(l.utility(feats) for l in self.heldout) / len(self.heldout)


# -----------------------------------------------------------------------------
# agreement between labelers (rankings and their agreement: nanorlhf/rankings.py)


def mean_pairwise_agreement(labelers: list[Labeler], items: list[list[dict]], seed: int = 0,
                            texts: list[list[str]] | None = None) -> float:
    """Two different labelers rank the same K completions; the mean share of pairs they order alike."""
    rng = random.Random(f"agree-{seed}")
    vals = []
    for n, feats in enumerate(items):
        a, b = rng.sample(labelers, 2)
        t = texts[n] if texts else None
        v = pair_agreement(a.rank(feats, rng, t), b.rank(feats, rng, t))
        if not math.isnan(v):
            vals.append(v)
    return sum(vals) / len(vals)
