"""The estimator lab: what k1, k2 and k3 estimate, where the KL goes, and how the loss averages, against exact answers.

A policy small enough to list every response (a logit table, one row per prefix, over `words` tokens and an end
token; 1..L tokens), so KL(pi || pi_ref) is a sum and its gradient comes from autograd. Each estimator is judged
exactly (its one-sample estimate summed over the responses, weighted by their probabilities) and by Monte Carlo.
With r = pi_ref(y_t) / pi(y_t) at a token (Schulman 2020, "Approximating KL divergence"; ppo.per_token_kl):
k1 = -log r, k2 = (log r)^2 / 2, k3 = r - 1 - log r.

  value     sum_t k_t over a response, as an estimate of the sequence KL
  reward    k in the reward (InstructGPT): its sum over the response, detached, times the score (REINFORCE);
            with k1, unbiased ("A comedy of estimators", 2025)
  loss      k in the loss (GRPO, Shao et al. 2024): the gradient of the aggregated per-token k; each token answers
            only for its own KL, a partial gradient (Tang & Munos 2025)
  loss_seq  k2 of the whole response, (sum_t log r_t)^2 / 2, in the loss: on-policy, k1-in-the-reward's gradient
            ("Rethinking KL regularization in RLHF", 2025)

Off-policy rows sample from pi_old != pi (a later epoch) and weigh by none, by the token's ratio pi_t / pi_old_t (as
pg.pg_loss and PPO's surrogate do), or by the exact ratio of what the term reads (the tokens through t for a token's
term, the whole response for a response's). The last rows put k1-in-the-reward through each of pg.aggregate's rules
(GRPO's seq_mean; DAPO's token_mean, Yu et al. 2025; Dr. GRPO's constant, Liu et al. 2025) and read the per-token
weight a response of length l gets (seq_mean's 1/l is Dr. GRPO's length bias).

    python -m experiments.estimator_lab --out_dir=out/estimator_lab      # estimator_lab.md and .png, in seconds
"""
from __future__ import annotations

import math
import os
from collections import namedtuple
from dataclasses import dataclass
from typing import ClassVar, NamedTuple

import torch

from nanorlhf.evals.common import md_table, new_figure, save_figure
from nanorlhf.infra.cli import run
from nanorlhf.infra.fileio import write_text
from nanorlhf.pg import AGGREGATIONS, aggregate, surrogate
from nanorlhf.ppo import per_token_kl


@dataclass
class Config:
    words: int = 2
    """tokens of the vocabulary besides the end token"""
    max_len: int = 4
    """L: the longest response"""
    spread: float = 1.0
    """std of pi_ref's random logits"""
    distance: float = 0.5
    """std of pi's logits minus pi_ref's"""
    drift: float = 0.3
    """std of pi's logits minus pi_old's (the off-policy rows)"""
    batch_size: int = 16
    """B: responses a Monte Carlo batch"""
    batches: int = 2000
    """Monte Carlo batches an estimator"""
    seed: int = 0
    """seed of the logits and of the batches"""
    out_dir: str = "out/estimator_lab"
    """where estimator_lab.md and estimator_lab.png go"""

    POSITIVE: ClassVar[tuple] = ("words", "max_len", "spread", "batch_size", "batches")
    NONNEGATIVE: ClassVar[tuple] = ("distance", "drift")


# every response padded to L: its tokens, mask and the logit table's row (its prefix) that chose each token (N, L)
Space = namedtuple("Space", "tokens mask prefix n_prefixes")


def enumerate_responses(words: int, max_len: int) -> Space:
    """Every response: up to L - 1 words then the end token (id `words`), or L - 1 words and any token (the length
    limit). words=2, max_len=4: 15 prefixes (the logit table's rows), 31 responses."""
    prefixes, responses = {}, []

    def grow(seq: tuple):
        prefixes[seq] = len(prefixes)
        for tok in range(words + 1):
            if tok == words or len(seq) + 1 == max_len:   # the end token, or the length limit
                responses.append(seq + (tok,))
            else:
                grow(seq + (tok,))
    grow(())
    pad = lambda rows: torch.tensor([list(r) + [0] * (max_len - len(r)) for r in rows])
    prefix = pad([[prefixes[r[:t]] for t in range(len(r))] for r in responses])
    return Space(pad(responses), pad([[1] * len(r) for r in responses]).bool(), prefix, len(prefixes))


def token_logprobs(theta, space: Space):
    """log pi(y_t | y_<t) at every response's tokens, from the logit table theta (n_prefixes, V).  # (N, L), 0 after"""
    lp = torch.log_softmax(theta, dim=-1)[space.prefix, space.tokens]
    return torch.where(space.mask, lp, torch.zeros_like(lp))


@dataclass
class Lab:
    """The enumerable world: pi's logit table (the parameter), and pi_ref's and pi_old's per-token log-probs (N, L)."""
    space: Space
    theta: torch.Tensor
    ref: torch.Tensor
    old: torch.Tensor

    def probs(self, sampler: str = "pi"):
        """Each response's probability (N,) under pi or pi_old, detached: a sampling distribution, not a loss."""
        lp = token_logprobs(self.theta.detach(), self.space) if sampler == "pi" else self.old
        return lp.sum(-1).exp()

    def kl(self):
        """KL(pi || pi_ref) = sum_y pi(y) log(pi(y) / pi_ref(y)), exactly; differentiable in theta."""
        seq = token_logprobs(self.theta, self.space).sum(-1)                              # (N,)
        return (seq.exp() * (seq - self.ref.sum(-1))).sum()

    def kl_gradient(self):
        return torch.autograd.grad(self.kl(), self.theta)[0].flatten()


def make_lab(words=2, max_len=4, spread=1.0, distance=0.5, drift=0.3, seed=0) -> Lab:
    g = torch.Generator().manual_seed(seed)
    space = enumerate_responses(words, max_len)
    draw = lambda std: std * torch.randn(space.n_prefixes, words + 1, generator=g, dtype=torch.float64)
    ref, to_pi, to_old = draw(spread), draw(distance), draw(drift)
    theta = (ref + to_pi).requires_grad_()
    return Lab(space, theta, token_logprobs(ref, space), token_logprobs(theta.detach() - to_old, space))


class Spec(NamedTuple):
    """One estimator: where k goes, which k, who sampled, which importance ratio, which aggregation."""
    place: str                # value, reward, loss or loss_seq
    k: str = "k1"             # k1, k2 or k3 (loss_seq: k2)
    sampler: str = "pi"       # pi (on-policy) or pi_old
    ratio: str = "none"       # none, token or exact
    agg: str = "constant"     # pg.aggregate's mode; constant is multiplied back by L: a sum over a response's tokens


def batch_loss(lab: Lab, idx, spec: Spec, weight=None):
    """The number whose value (place value) or gradient (the rest) is the estimate from the responses idx (B,).
    weight (B,), detached, scales each response's terms (the exact expectation weighs every response)."""
    mask, L = lab.space.mask[idx], lab.space.mask.size(1)                               # (B, L)
    lp, ref = token_logprobs(lab.theta, lab.space)[idx], lab.ref[idx]                   # (B, L), lp differentiable
    old = lab.old[idx] if spec.sampler == "pi_old" else lp.detach()
    log_ratio = torch.where(mask, lp - old, torch.zeros_like(lp)).detach()              # (B, L) log pi_t / pi_old_t
    through_t = log_ratio.cumsum(1).exp()                  # pi / pi_old of the tokens through t; last: the response's
    whole = through_t[:, -1:]                                                           # (B, 1)
    k = per_token_kl(lp, ref, mask, spec.k if spec.place != "loss_seq" else "k1")       # (B, L)
    if spec.place == "value":
        per_tok = k.detach()
    elif spec.place == "reward":   # -sum_t k is the reward on every token: PPO's surrogate, its clip opened
        K = k.detach().sum(1, keepdim=True).expand_as(k)
        per_tok, _ = surrogate(lp, old if spec.ratio == "token" else lp.detach(), -K, mask, 1.0, math.inf)
        per_tok = per_tok * (whole if spec.ratio == "exact" else 1.0)
    elif spec.place == "loss":     # pg.pg_loss's KL term: k * (pi_t / pi_old_t).detach()
        per_tok = k * {"none": 1.0, "token": log_ratio.exp(), "exact": through_t}[spec.ratio]
    else:                          # loss_seq: (sum_t log r_t)^2 / 2, on the response's first token
        seq_k2 = 0.5 * k.sum(1, keepdim=True) ** 2 * (whole if spec.ratio == "exact" else 1.0)
        per_tok = torch.cat([seq_k2, torch.zeros_like(k[:, 1:])], dim=1)
    if weight is not None:
        per_tok = per_tok * weight[:, None]
    out = aggregate(per_tok, mask, spec.agg, L)
    return out * L if spec.agg == "constant" else out


def estimate(lab: Lab, idx, spec: Spec, weight=None):
    """The batch's estimate: of the KL (one number) or of its gradient (a flat vector)."""
    out = batch_loss(lab, idx, spec, weight)
    return out.detach().reshape(1) if spec.place == "value" else torch.autograd.grad(out, lab.theta)[0].flatten()


def expectation(lab: Lab, spec: Spec):
    """E[estimate] over one sampled response, exactly: every response at once, each weighted by N q(y) where q is
    the sampler's probability (detached: the expectation of the gradient, not the gradient of an expectation)."""
    if spec.agg == "token_mean":
        raise ValueError("token_mean's normaliser is the batch's: its expectation is not a sum over one response")
    q = lab.probs(spec.sampler)                                                          # (N,)
    return estimate(lab, torch.arange(len(q)), spec, weight=len(q) * q)


ROWS = ([Spec("value", k) for k in ("k1", "k2", "k3")]
        + [Spec(p, k) for p in ("reward", "loss") for k in ("k1", "k2", "k3")] + [Spec("loss_seq", "k2")]
        + [Spec("reward", "k1", "pi_old", r) for r in ("none", "token", "exact")]
        + [Spec("loss", "k2", "pi_old", r) for r in ("none", "token", "exact")]
        + [Spec("loss", "k3", "pi_old", r) for r in ("none", "token")]
        + [Spec("loss_seq", "k2", "pi_old", r) for r in ("none", "exact")]
        + [Spec("reward", "k1", "pi", "none", a) for a in AGGREGATIONS])
WHERE = {"value": "value", "reward": "reward", "loss": "loss, per token", "loss_seq": "loss, whole response"}


def measure(lab: Lab, spec: Spec, batches: dict) -> dict:
    """Bias (exact, and Monte Carlo with its standard error) and one batch's std: for a value in nats, for a
    gradient as norms relative to |grad KL|. Rules other than constant are scaled by E_pi[length] to compare."""
    value = spec.place == "value"
    target = lab.kl().detach().reshape(1) if value else lab.kl_gradient()
    scale = 1.0 if spec.agg == "constant" else (lab.probs() * lab.space.mask.sum(1)).sum().item()
    mc = torch.stack([estimate(lab, idx, spec) for idx in batches[spec.sampler]]) * scale   # (batches, D)
    exact = None if spec.agg == "token_mean" else expectation(lab, spec) * scale
    size = (lambda v: v.item()) if value else (lambda v: (v.norm() / target.norm()).item())
    std = mc.std(0).item() if value else (mc.var(0).sum().sqrt() / target.norm()).item()
    mean = mc.mean(0) if exact is None else exact      # its direction: is the bias more than a step size?
    cos = None if value or size(mean) < 1e-9 else torch.cosine_similarity(mean, target, dim=0).item()
    return {"exact": None if exact is None else size(exact - target), "mc": size(mc.mean(0) - target),
            "se": std / math.sqrt(len(mc)), "std": std, "cos": cos}


def length_weights(lab: Lab, batches) -> dict:
    """Per rule: the mean per-token weight x B (d loss / d per-token loss, by autograd through pg.aggregate) that a
    response of length l gets in a sampled batch, l = 1..L."""
    masks, L = lab.space.mask[batches], lab.space.mask.size(1)                          # (batches, B, L)
    x = torch.zeros(masks.shape[1:], dtype=torch.float64, requires_grad=True)
    first = {m: torch.stack([torch.autograd.grad(aggregate(x, mask, m, L), x)[0][:, 0] for mask in masks])
             for m in AGGREGATIONS}                                                     # (batches, B) each
    B, lengths = masks.size(1), masks.sum(2)
    return {m: [(w[lengths == n] * B).mean().item() for n in range(1, L + 1)] for m, w in first.items()}


def plot(rows: list, weights: dict, cfg: Config) -> str:
    fig, (a1, a2) = new_figure(2, width=6.0, height=5.5)
    for mode, w in weights.items():
        a1.plot(range(1, len(w) + 1), w, marker="o", label=mode)
    a1.set(xlabel="response length l (tokens)", ylabel="per-token weight x B", title="what each rule gives a token",
           xticks=range(1, len(w) + 1))
    a1.legend()
    grads = list({r["spec"]: r for r in rows if r["spec"].place != "value"}.values())   # a repeated row once
    y = list(range(len(grads)))
    a2.barh(y, [r["mc"] if r["exact"] is None else r["exact"] for r in grads], color="tab:blue", label="bias")
    a2.scatter([r["std"] for r in grads], y, color="k", marker="|", s=80, label="std of a batch's estimate")
    a2.set_yticks(y, [f"{s.k} {WHERE[s.place]} ({'on-policy' if s.sampler == 'pi' else 'pi_old, ratio ' + s.ratio}, "
                      f"{s.agg})" for s in (r["spec"] for r in grads)], fontsize=7)
    a2.invert_yaxis()
    a2.set(xlabel="relative to |grad KL(pi || pi_ref)|", title="gradient estimates of the KL")
    a2.legend(fontsize=7)
    return save_figure(fig, cfg, "estimator_lab.png")


def main(cfg: Config) -> dict:
    lab = make_lab(cfg.words, cfg.max_len, cfg.spread, cfg.distance, cfg.drift, cfg.seed)
    g = torch.Generator().manual_seed(cfg.seed)
    batches = {s: torch.multinomial(lab.probs(s), cfg.batches * cfg.batch_size, replacement=True,
                                    generator=g).view(cfg.batches, cfg.batch_size) for s in ("pi", "pi_old")}
    results = {spec: measure(lab, spec, batches) for spec in dict.fromkeys(ROWS)}   # a repeated row: measured once
    rows = [{"spec": spec, **results[spec]} for spec in ROWS]
    weights = length_weights(lab, batches["pi"])
    q, lengths = lab.probs(), lab.space.mask.sum(1)
    kl_old = (q * (token_logprobs(lab.theta.detach(), lab.space) - lab.old).sum(1)).sum().item()
    head = (f"{len(q)} responses of 1..{cfg.max_len} tokens over {cfg.words} words and an end token; "
            f"KL(pi || pi_ref) = {lab.kl().item():.4f} nats, KL(pi || pi_old) = {kl_old:.4f}, "
            f"E_pi[length] = {(q * lengths).sum().item():.2f}; Monte Carlo: {cfg.batches} batches of "
            f"{cfg.batch_size}. Values: bias in nats. Gradients: norms relative to |grad KL|; seq_mean and "
            f"token_mean gradients are scaled by E_pi[length].")
    f3 = lambda x: "-" if x is None else f"{x:.3f}"
    table = md_table(
        ["k", "where", "samples", "ratio", "aggregation", "bias, exact", "bias, Monte Carlo", "std of a batch's",
         "cos to grad KL", f"per-token weight x B, l = 1..{cfg.max_len}"],
        [[s.k, WHERE[s.place], "pi" if s.sampler == "pi" else "pi_old", s.ratio if s.sampler != "pi" else "-",
          s.agg if s.place != "value" else "-",
          f"{round(r['exact'], 8) + 0.0:+.4f}" if s.place == "value" else f3(r["exact"]),
          f"{r['mc']:+.4f} ± {r['se']:.4f}" if s.place == "value" else f"{r['mc']:.3f} (s.e. {r['se']:.3f})",
          f3(r["std"]), "-" if s.place == "value" else "zero" if r["cos"] is None else f"{r['cos']:.3f}",
          ", ".join(f"{w:.2f}" for w in weights[s.agg]) if s in ROWS[-3:] else ""]
         for s, r in zip(ROWS, rows)])
    os.makedirs(cfg.out_dir, exist_ok=True)
    write_text(os.path.join(cfg.out_dir, "estimator_lab.md"), f"{head}\n\n{table}\n")
    figure = plot(rows, weights, cfg)
    print(f"{head}\n\n{table}\n\nwrote {os.path.join(cfg.out_dir, 'estimator_lab.md')} and {figure}")
    return {"rows": rows, "weights": weights, "kl": lab.kl().item()}


if __name__ == "__main__":
    run(main, Config, __doc__)
