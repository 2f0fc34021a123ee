"""Critic-free policy gradients as small pure functions: GRPO, Dr. GRPO, RLOO, REINFORCE with a group baseline.

PPO (ppo.py) learns a value model to tell a good token from a bad one. The methods after it drop the value
model: sample a group of G responses per prompt, and judge each response against the others of its group.

    rewards (P, G) -> group_advantages -> A (P, G), one number per response, the same on each of its tokens

  grpo                A_i = (r_i - mean(r)) / (std(r) + eps)      Shao et al. 2024 (DeepSeekMath), eq. 3
  dr_grpo             A_i = r_i - mean(r)                         Liu et al. 2025 (Dr. GRPO): no std, whose
                                                                  division up-weights near-uniform groups
  rloo                A_i = r_i - mean_{j != i}(r_j)               Ahmadian et al. 2024: each sample's baseline
                          = G / (G - 1) * (r_i - mean(r))         is the others' mean (leave one out)
  reinforce_baseline  A_i = r_i - mean(r), whitened over the batch  REINFORCE++-baseline (Hu et al. 2025)

A group whose rewards are all equal gives every response advantage 0: it teaches nothing (logged as
`pg/equal_groups`). The loss is PPO's clipped surrogate per token, `surrogate`, with clip-higher (DAPO, Yu et
al. 2025: a larger upper clip lets unlikely tokens rise), aggregated over tokens by one of three rules:

  seq_mean    mean over responses of (1/|o_i|) sum_t l_it    GRPO. A short response's tokens weigh more: a long
                                                            wrong answer is penalised less per token, so length
                                                            grows on wrong answers (Dr. GRPO's length bias)
  token_mean  sum_it l_it / sum_it |o_i|                   DAPO. Every token weighs the same within a batch; a
                                                            batch of long responses weighs each token less
  constant    sum_it l_it / (B * L)                        Dr. GRPO: L a constant (the longest allowed
                                                            response), so no token's weight depends on length

The KL to the reference, beta * KL(pi || pi_ref), goes in the reward as InstructGPT does (k1 summed over the
response's tokens, subtracted before the group baseline) or in the loss as a per-token estimate (k2 or k3;
per_token_kl in ppo.py), aggregated like the surrogate. After the first epoch the samples come from pi_old,
not pi: the loss's KL term is then weighted by the ratio pi / pi_old (detached: it reweights samples, it adds
no gradient of its own). The lab of exact gradients (experiments/estimator_lab.py) measures what each choice
estimates.

Example:
    A = group_advantages(torch.tensor([[1., 0., 0., 1.]]), "rloo")       # [[ 0.667, -0.667, -0.667, 0.667]]
    per_tok, stats = surrogate(logprobs, old_logprobs, A_tokens, mask, clip_low=0.2, clip_high=0.28)
    loss = aggregate(per_tok, mask, "seq_mean")
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from nanorlhf.infra.config import ConfigError, check_values
from nanorlhf.masks import masked_mean, masked_sum
from nanorlhf.ppo import PPOConfig, per_token_kl

ESTIMATORS = ("grpo", "dr_grpo", "rloo", "reinforce_baseline")
AGGREGATIONS = ("seq_mean", "token_mean", "constant")


@dataclass(frozen=True)
class PGConfig:
    """The critic-free methods' knobs; train_grpo.py's Config contains it, so each field is a flag."""
    estimator: str = "grpo"
    """advantage estimator: grpo (group mean and std), dr_grpo (mean only), rloo (leave one out),
    reinforce_baseline (group mean, whitened over the batch)"""
    group_size: int = 8
    """G: responses sampled per prompt"""
    prompts_per_iteration: int = 16
    """P: prompts per iteration (P x G episodes)"""
    minibatch_size: int = 32
    """episodes per gradient step"""
    epochs: int = 1
    """passes over each batch of episodes (after the first, samples are off-policy)"""
    lr: float = PPOConfig.lr
    """learning rate of the policy (PPO's)"""
    grad_clip: float = 1.0
    """global gradient-norm clip"""
    max_new_tokens: int = 48
    """longest response"""
    temperature: float = 1.0
    """sampling temperature; the log-probs of the ratio and the KL are read at it too"""
    aggregation: str = "seq_mean"
    """how per-token losses become one: seq_mean (GRPO), token_mean (DAPO) or constant (Dr. GRPO)"""
    kl: str = "k1_reward"
    """where the KL goes: k1_reward (InstructGPT: in the reward), or k2_loss / k3_loss (a loss term)"""
    beta: float = PPOConfig.beta
    """KL coefficient (PPO's; 0 allowed: no KL at all)"""
    clip_low: float = 0.2
    """the ratio's lower clip, 1 - clip_low"""
    clip_high: float = 0.2
    """the ratio's upper clip, 1 + clip_high (DAPO's clip-higher: 0.28)"""

    # what experience.score_passes reads of a config: packed passes, the RM at the last token, the sampling temperature
    trim_padding: ClassVar[bool] = True
    reward_at_last_token: ClassVar[bool] = True

    @property
    def scoring_temperature(self) -> float:
        return self.temperature

    POSITIVE: ClassVar[tuple] = ("group_size", "prompts_per_iteration", "minibatch_size", "epochs",
                                 "max_new_tokens", "temperature", "clip_low", "clip_high")
    NONNEGATIVE: ClassVar[tuple] = ("lr", "grad_clip", "beta")
    CHOICES: ClassVar[dict] = {"estimator": ESTIMATORS, "aggregation": AGGREGATIONS,
                               "kl": ("k1_reward", "k2_loss", "k3_loss")}

    def __post_init__(self):
        check_values(self)
        if self.group_size < 2:
            raise ConfigError(f"--group_size={self.group_size}: a group baseline needs at least 2 responses")
        if self.minibatch_size > self.group_size * self.prompts_per_iteration:
            raise ConfigError(f"--minibatch_size={self.minibatch_size} is more than an iteration's "
                              f"{self.group_size * self.prompts_per_iteration} episodes")


# -----------------------------------------------------------------------------
# advantages


def group_advantages(rewards, estimator: str = "grpo", eps: float = 1e-6):
    """Each response's advantage against its group. rewards (P, G) -> (P, G); a group of equal rewards gives 0."""
    # BEGIN ASSIGNMENT group_advantages
    G = rewards.size(1)
    mean = rewards.mean(dim=1, keepdim=True)                         # (P, 1)
    if estimator == "grpo":      # GRPO eq. 3: A_i = (r_i - mean(r)) / std(r)
        return (rewards - mean) / (rewards.std(dim=1, keepdim=True) + eps)
    if estimator == "dr_grpo":   # Dr. GRPO: the mean alone
        return rewards - mean
    if estimator == "rloo":      # RLOO: r_i - (sum_j r_j - r_i) / (G - 1)
        return rewards - (rewards.sum(dim=1, keepdim=True) - rewards) / (G - 1)
    if estimator == "reinforce_baseline":  # group mean, then whitened over the whole batch
        centred = rewards - mean
        return (centred - centred.mean()) / (centred.std() + eps)
    raise ValueError(f"estimator must be one of {', '.join(ESTIMATORS)}, got {estimator!r}")
    # END ASSIGNMENT group_advantages


def equal_group_share(rewards) -> float:
    """Share of groups (rows of rewards (P, G)) whose rewards are all equal: their responses learn nothing."""
    return (rewards.max(dim=1).values == rewards.min(dim=1).values).float().mean().item()


# -----------------------------------------------------------------------------
# the loss


def surrogate(logprobs, old_logprobs, advantages, response_mask, clip_low: float = 0.2, clip_high: float = 0.2):
    """PPO's clipped surrogate per token, negated for descent, with separate lower and upper clips.  # (B, T)

    advantages (B, T): each response's advantage on its tokens. Returns (per-token loss, 0 off the mask; stats
    clipfrac_low and clipfrac_high: shares of response tokens where the clip at 1 - clip_low or 1 + clip_high
    set the loss).
    """
    mask = response_mask.bool()
    ratio = torch.exp(logprobs - old_logprobs)                                      # (B, T)
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    loss = torch.where(mask, torch.maximum(unclipped, clipped), torch.zeros_like(ratio))
    with torch.no_grad():
        took = clipped > unclipped
        stats = {"clipfrac_low": masked_mean((took & (ratio < 1)).float(), mask).item(),
                 "clipfrac_high": masked_mean((took & (ratio > 1)).float(), mask).item()}
    return loss, stats


def aggregate(per_token, response_mask, mode="seq_mean", constant=None, *, n_responses=None, n_tokens=None):
    """One loss from per-token losses (B, T) over the response tokens, by GRPO's, DAPO's or Dr. GRPO's rule.

    For gradient accumulation, pass the whole batch's totals: n_responses (its B) and n_tokens (its response
    tokens). Each micro-batch's loss is then its share of the whole batch's, and the shares add up to the whole
    batch's loss however a batch of ragged lengths is split. Left out, the totals are this tensor's own.
    """
    # BEGIN ASSIGNMENT aggregate
    mask = response_mask.bool()
    if mode == "seq_mean":       # GRPO: (1/|o_i|) sum_t, then the mean over responses
        per_seq = masked_sum(per_token, mask, dim=1) / mask.sum(dim=1).clamp(min=1)
        return per_seq.mean() if n_responses is None else per_seq.sum() / n_responses
    if mode == "token_mean":     # DAPO: every token of the batch alike
        return masked_sum(per_token, mask) / (mask.sum().clamp(min=1) if n_tokens is None else n_tokens)
    if mode == "constant":       # Dr. GRPO: a constant normaliser, B x L
        if constant is None:
            raise ValueError("the constant aggregation needs the constant (the longest response allowed)")
        B = per_token.size(0) if n_responses is None else n_responses
        return masked_sum(per_token, mask) / (B * constant)
    raise ValueError(f"aggregation must be one of {', '.join(AGGREGATIONS)}, got {mode!r}")
    # END ASSIGNMENT aggregate


def pg_loss(logprobs, old_logprobs, ref_logprobs, advantages, response_mask, hp: PGConfig):
    """The critic-free loss of one minibatch: the aggregated clipped surrogate, plus beta times the aggregated
    per-token KL estimate when the KL is a loss term (hp.kl k2_loss or k3_loss). All per-token tensors (B, T);
    advantages (B,) one per response. Returns (loss, stats)."""
    mask = response_mask.bool()
    adv = advantages[:, None].expand_as(logprobs)                                   # (B, T)
    per_tok, stats = surrogate(logprobs, old_logprobs, adv, mask, hp.clip_low, hp.clip_high)
    loss = aggregate(per_tok, mask, hp.aggregation, hp.max_new_tokens)
    if hp.kl != "k1_reward" and hp.beta > 0:
        kl = per_token_kl(logprobs, ref_logprobs, mask, hp.kl[:2])                  # (B, T) k2 or k3
        weight = torch.exp(logprobs - old_logprobs).detach()                        # pi / pi_old: 1 on-policy
        kl_term = aggregate(kl * weight, mask, hp.aggregation, hp.max_new_tokens)
        loss = loss + hp.beta * kl_term
        stats["kl_loss"] = kl_term.item()
    stats["policy_loss"] = loss.item()
    return loss, stats
