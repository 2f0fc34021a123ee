"""PPO for RLHF as small pure functions: the KL-shaped reward, GAE, the clipped losses, the KL controllers.

Every per-token tensor is (B, T) and follows masks.py's alignment convention: position t holds
the quantity for emitting tokens[:, t] (log-prob, value before it, reward, advantage), and
`response_mask` (B, T) marks the tokens the policy sampled.

PPOConfig holds the algorithm's hyperparameters; train_ppo.py's Config contains it,
so each of its fields is a flag of that script (`--beta=0.1`).
"""
from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F

from nanorlhf.infra.config import ConfigError, check_values
from nanorlhf.masks import last_token_index, masked_mean, masked_var

# -----------------------------------------------------------------------------
# hyperparameters


@dataclass(frozen=True)
class PPOConfig:
    """PPO's knobs (InstructGPT §3.5 and Appendix C.4): the paper's path, at the recipe's values (the one default of
    each; nanorlhf/recipe.py reads them from here), DEVIATION lines where those depart from the paper."""
    # DEVIATION: the paper's batch is 512 episodes; 128 keeps an iteration a few seconds on a CPU
    batch_size: int = 128
    """episodes per iteration (paper: 512)"""
    minibatch_size: int = 32
    """episodes per gradient step"""
    ppo_epochs: int = 2
    """passes over each batch of episodes"""
    lr: float = 2e-4
    """learning rate of policy and value function"""
    grad_clip: float = 1.0
    """global gradient-norm clip"""
    max_new_tokens: int = 48
    """longest response"""
    temperature: float = 1.0
    """sampling temperature of the rollouts"""
    # DEVIATION: the paper's beta is 0.02; a weak RM is exploited at 0.02 (docs/results.md, tried and dropped)
    beta: float = 0.1
    """KL penalty coefficient (paper: 0.02)"""
    target_kl: float = 0.0
    """if > 0, adapt beta towards this KL per episode (Ziegler et al. 2019)"""
    kl_horizon: int = 10000
    """adaptive KL controller horizon, in episodes"""
    gamma: float = 1.0
    """discount (paper: 1, no discount)"""
    lam: float = 0.95
    """GAE lambda"""
    clip: float = 0.2
    """PPO ratio clip (paper: 0.2), also the value clip"""
    vf_coef: float = 0.5
    """weight of the value loss"""
    ptx_coef: float = 0.0
    """gamma_ptx: weight of the pretraining loss mixed into each update (0 = plain PPO)"""
    # implementation details that can be switched off, one at a time (docs/details.md, experiments/ablate.py)
    kl_in_reward: bool = True
    """per-token KL penalty in the reward (paper); False puts beta * KL in the loss instead (GRPO-style)"""
    kl_estimator: str = "k1"
    """per-token KL estimate: k1 = log pi_RL - log pi_SFT (paper), or k3 = (q/p - 1) - log(q/p)"""
    whiten_advantages: bool = True
    """normalise advantages over the batch's response tokens"""
    clip_value: bool = True
    """clip the value update like the policy ratio (same clip)"""
    reward_at_last_token: bool = True
    """read the RM at each response's true last token; False reads the final column (a pad when shorter)"""
    eos_penalty: float = 0.0
    """subtracted from the RM score of responses cut off without <|endoftext|> (0 = off)"""
    normalize_reward: bool = True
    """subtract the RM bias that puts the labelers' demonstrations at 0 (paper §3.5)"""
    value_init: str = "rm"
    """value function starts from the RM (paper) or from the SFT trunk with a fresh head ("sft")"""
    logprob_temperature: float = 0.0
    """temperature of the log-probs in KL and ratio; 0 = the sampling temperature (consistent)"""
    # speed: the same quantities, less computed on padding (tests/test_trim.py)
    trim_padding: bool = True
    """scoring and update passes on packed real tokens, unembedding on response positions only; False: full width"""
    group_by_length: bool = True
    """prompts sampled, and episodes put in minibatches, by similar length; False: one batch, random minibatches"""

    def __post_init__(self):
        check_values(self)  # POSITIVE, NONNEGATIVE, CHOICES below, also when built in code rather than from flags
        if not self.kl_in_reward and self.kl_estimator == "k1":  # grad of mean(log pi - log pi_ref) is 1/n a token
            raise ConfigError("--kl_in_reward=false needs --kl_estimator=k3: as a loss, k1's gradient does not depend "
                             "on pi_ref and is zero in expectation, so it would not hold the policy near pi_SFT")

    @property
    def scoring_temperature(self) -> float:
        """The temperature of every log-prob in the KL and the ratio: the sampling one unless ablated."""
        return self.logprob_temperature or self.temperature

    POSITIVE: ClassVar[tuple] = ("batch_size", "minibatch_size", "ppo_epochs", "max_new_tokens", "temperature",
                                 "kl_horizon", "grad_clip")  # a clip of 0 would zero every gradient
    NONNEGATIVE: ClassVar[tuple] = ("lr", "beta", "target_kl", "vf_coef", "ptx_coef", "eos_penalty",
                                    "logprob_temperature")  # lr 0: the identity check of a step
    RANGES: ClassVar[dict] = {"gamma": "[0, 1]", "lam": "[0, 1]", "clip": "(0, 1)"}
    CHOICES: ClassVar[dict] = {"value_init": ("rm", "sft"), "kl_estimator": ("k1", "k3")}
    RULES: ClassVar[tuple] = ((lambda c: c.minibatch_size <= c.batch_size,
                               "--minibatch_size={minibatch_size} is above --batch_size={batch_size} (episodes per "
                               "iteration)"),)


# -----------------------------------------------------------------------------
# reward shaping: InstructGPT §3.5


def kl_penalized_rewards(score, logprobs, ref_logprobs, response_mask, beta, estimator="k1"):
    """Per-token reward of the bandit episode. Returns (rewards, kl), both (B, T), 0 off the response.

    score (B,) is the RM output r(x, y); it is added at the last response token. kl is the per-token
    estimate of KL(pi_RL || pi_SFT) that the reward penalises: "k1" is log pi_RL(y_t) - log pi_SFT(y_t),
    whose sum over a response is unbiased for the sequence KL when y ~ pi_RL; "k3" is
    (q/p - 1) - log(q/p) with q/p = pi_SFT/pi_RL: also unbiased, never negative, lower variance
    (Schulman 2020, "Approximating KL divergence"); "k2" is k1^2 / 2: biased, never negative, the
    critic-free methods' loss term (pg.py; summed over a whole response, its gradient on-policy is that of
    k1 in the reward; per token it misses the later tokens' share: experiments/estimator_lab.py); any other
    estimator raises ValueError.
    """
    # BEGIN ASSIGNMENT kl_reward
    mask = response_mask.bool()
    kl = logprobs - ref_logprobs  # (B, T) k1
    if estimator == "k3":
        kl = torch.expm1(-kl) + kl  # (q/p - 1) - log(q/p), q/p = exp(-k1)
    elif estimator == "k2":
        kl = 0.5 * kl ** 2  # (log q/p)^2 / 2
    elif estimator != "k1":
        raise ValueError(f"KL estimator must be 'k1', 'k2' or 'k3', got {estimator!r}")
    kl = torch.where(mask, kl, torch.zeros_like(kl))  # (B, T)
    # InstructGPT §3.5: R(x, y) = r(x, y) - beta * log(pi_RL(y|x) / pi_SFT(y|x)),
    # spread over tokens: -beta * kl_t on every response token, + r at the end.
    rewards = -beta * kl  # (B, T)
    last = last_token_index(response_mask)  # (B,)
    rewards = rewards.scatter_add(1, last.unsqueeze(1), score.to(rewards.dtype).unsqueeze(1))
    return rewards, kl
    # END ASSIGNMENT kl_reward


def per_token_kl(logprobs, ref_logprobs, response_mask, estimator="k1"):
    """kl[:, t], the per-token KL estimate on response tokens, 0 elsewhere: the one kl_penalized_rewards
    penalises (its docstring defines the estimators), so the logged KL is the reward's.  # (B, T)"""
    no_score = torch.zeros(logprobs.shape[:-1], dtype=logprobs.dtype, device=logprobs.device)  # (B,)
    return kl_penalized_rewards(no_score, logprobs, ref_logprobs, response_mask, 0.0, estimator)[1]


def kl_estimate(logprobs, ref_logprobs, mask):
    """Per-sequence KL(pi_RL || pi_SFT) estimate: the sum of the k1 per-token terms (the reward's, by default).  # (B,)"""
    return per_token_kl(logprobs, ref_logprobs, mask).sum(dim=-1)


def kl_loss(logprobs, ref_logprobs, response_mask, estimator="k3"):
    """The KL as a loss term instead of a reward (GRPO-style): masked mean of the per-token estimate.

    Differentiated through logprobs (B, T) of the policy being trained; the InstructGPT
    recipe puts the KL in the reward instead (kl_penalized_rewards). An ablation only.
    """
    return masked_mean(per_token_kl(logprobs, ref_logprobs, response_mask, estimator), response_mask.bool())


# -----------------------------------------------------------------------------
# advantages


def gae(rewards, values, response_mask, gamma=1.0, lam=0.95):
    """Generalised advantage estimation over response tokens. Returns (advantages, returns), (B, T).

    values[:, t] = V(s_t) (see the module docstring). The value after the last
    response token is 0 (the episode ends), and so is everything off the mask,
    so left-padded prompts and right-padded responses of any length both work.
    """
    # BEGIN ASSIGNMENT gae
    mask = response_mask.bool()
    zero = torch.zeros_like(values[:, 0])  # (B,)
    next_value, next_adv = zero, zero
    advantages = torch.zeros_like(values)  # (B, T)
    for t in reversed(range(values.shape[1])):
        # GAE: delta_t = r_t + gamma * V_{t+1} - V_t
        delta = rewards[:, t] + gamma * next_value - values[:, t]  # (B,)
        # GAE: A_t = delta_t + gamma * lam * A_{t+1}
        adv = delta + gamma * lam * next_adv
        advantages[:, t] = torch.where(mask[:, t], adv, zero)
        # what position t-1 sees as "next": 0 unless t is a response token
        next_value = torch.where(mask[:, t], values[:, t], zero)
        next_adv = advantages[:, t]
    returns = torch.where(mask, advantages + values, torch.zeros_like(values))  # (B, T)
    return advantages, returns
    # END ASSIGNMENT gae


# -----------------------------------------------------------------------------
# losses


def policy_loss(logprobs, old_logprobs, advantages, response_mask, clip=0.2):
    """PPO clipped surrogate (Schulman et al. 2017, eq. 7), negated for descent.

    Returns (loss, stats) with stats floats: ratio_mean, clipfrac, approx_kl.
    approx_kl is the k3 estimator mean((r - 1) - log r) of KL(old || new):
    non-negative per token and exactly 0 when the policies agree.
    """
    # BEGIN ASSIGNMENT policy_loss
    mask = response_mask.bool()
    log_ratio = logprobs - old_logprobs  # (B, T)
    ratio = torch.exp(log_ratio)  # (B, T)
    # PPO eq. 7: L = E[min(r_t A_t, clip(r_t, 1 - eps, 1 + eps) A_t)]
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1.0 - clip, 1.0 + clip)
    loss = masked_mean(torch.maximum(unclipped, clipped), mask)
    with torch.no_grad():
        stats = {
            "ratio_mean": masked_mean(ratio, mask).item(),
            "clipfrac": masked_mean((clipped > unclipped).float(), mask).item(),
            "approx_kl": masked_mean((ratio - 1) - log_ratio, mask).item(),
        }
    return loss, stats
    # END ASSIGNMENT policy_loss


def value_loss(values, old_values, returns, response_mask, clip=0.2):
    """Clipped value loss 0.5 * max((V - R)^2, (V_clip - R)^2). Returns (loss, stats); clip=None: the plain
    0.5 * (V - R)^2 (the value-clipping ablation)."""
    mask = response_mask.bool()
    if clip is None:
        return 0.5 * masked_mean((values - returns) ** 2, mask), {"value_clipfrac": 0.0}
    # V_clip = V_old + clip(V - V_old, -eps, eps): the value may move at most eps per batch
    v_clipped = old_values + torch.clamp(values - old_values, -clip, clip)  # (B, T)
    err, err_clipped = (values - returns) ** 2, (v_clipped - returns) ** 2
    loss = 0.5 * masked_mean(torch.maximum(err, err_clipped), mask)
    with torch.no_grad():
        stats = {"value_clipfrac": masked_mean((err_clipped > err).float(), mask).item()}
    return loss, stats


def explained_variance(values, returns, mask):
    """1 - Var[R - V] / Var[R] over the mask: 1 is perfect, 0 is no better than a constant."""
    var_r = masked_var(returns, mask, unbiased=False)
    if var_r == 0:
        return float("nan")
    return (1 - masked_var(returns - values, mask, unbiased=False) / var_r).item()


def entropy_from_logits(logits, mask):
    """Masked mean of H = -sum_v p_v log p_v; logits (B, T, V), mask (B, T) on the same positions."""
    logp = F.log_softmax(logits.float(), dim=-1)  # (B, T, V)
    entropy = -(logp.exp() * logp).sum(dim=-1)  # (B, T)
    return masked_mean(entropy, mask)


def ptx_loss(logits, targets, mask):
    """PPO-ptx pretraining term as a masked next-token cross-entropy; the caller multiplies by gamma_ptx.

    logits[:, t] predicts targets[:, t] (targets already shifted, nanoGPT style); mask (B, T): the ones that count.
    """
    # InstructGPT eq. 2: objective += gamma * E_{x ~ D_pretrain}[log pi_RL(x)], so loss = -log pi_RL(x)
    nll = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), reduction="none")
    return masked_mean(nll.view(targets.shape), mask)  # (B, T) -> scalar


# -----------------------------------------------------------------------------
# KL coefficient controllers


class FixedKLController:
    """beta stays put (InstructGPT uses a fixed beta = 0.02)."""

    def __init__(self, beta):
        self.value = beta

    def update(self, current_kl, n_steps):
        pass


class AdaptiveKLController:
    """Ziegler et al. 2019 §2.2: steer beta so the KL tracks a target."""

    def __init__(self, init_beta, target, horizon):
        self.value, self.target, self.horizon = init_beta, target, horizon

    def update(self, current_kl, n_steps):
        # e_t = clip(KL_t / KL_target - 1, -0.2, 0.2); beta <- beta * (1 + K_beta * e_t)
        error = min(max(current_kl / self.target - 1.0, -0.2), 0.2)
        self.value *= 1.0 + error * n_steps / self.horizon


# -----------------------------------------------------------------------------
# plain-words diagnostics of a PPO iteration's metrics


def diagnose(m: dict, max_new_tokens: int) -> list[str]:
    """Plain-words warnings when a PPO run goes wrong."""
    out = []
    if m["objective/kl"] < -0.5:
        out.append(f"KL is negative ({m['objective/kl']:.2f}): the per-token estimate is biased by sampling settings "
                   "(temperature, top-k) differing between rollout and scoring")
    if m["objective/kl"] > 50:
        out.append(f"KL is exploding ({m['objective/kl']:.1f} nats): raise beta or lower the learning rate")
    if abs(m["ppo/ratio_mean"] - 1) > 0.2:
        out.append(f"the policy ratio is far from 1 ({m['ppo/ratio_mean']:.2f}): updates are too large")
    if m["response/length"] < 2:
        out.append("responses collapsed to almost nothing")
    if m["response/length"] > 0.95 * max_new_tokens:
        out.append("responses run to the maximum length: the policy may have lost the end token")
    return out
