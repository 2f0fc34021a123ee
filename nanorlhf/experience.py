"""PPO's experience: sampled episodes in, scored and advantaged episodes out, and the loss that learns from them.

ppo.py holds the pure pieces (GAE, the clipped losses); this module is where they meet the
models. train_ppo.py calls these in the paper's order: `rollout` (step 1, rollout.py),
`make_experience` (steps 2-4: the RM score, eq. 2's per-token reward in `rlhf_rewards`,
values and GAE), then `minibatch_loss` per minibatch (step 5). Every knob is a field of
ppo.PPOConfig.

Example:
    hp = PPOConfig(beta=0.1)
    ro = rollout(policy, tok, prompts.next(hp.batch_size), hp, generator)
    exp = make_experience(policy, ref, rm, value, ro, rm_bias=rm_bias, beta=hp.beta, hp=hp)
    exp["advantages"]   # (B, T) whitened over response tokens
"""
from __future__ import annotations

import torch

from nanorlhf import masks, pg, ppo
from nanorlhf.generate import Rollout
from nanorlhf.packing import packing, response_logprobs, unpack
from nanorlhf.ppo import PPOConfig
from nanorlhf.reward import score_sequences


def value_from_rm(rm, rm_bias: float):
    """InstructGPT §3.5: the value function starts as the RM, here with the RM's bias folded into its head so
    that it predicts on the scale of the rewards it will be fit to (demonstrations at 0), not 0 + bias."""
    from nanorlhf.model import ScalarHeadModel
    value = ScalarHeadModel(rm.cfg)
    value.load_state_dict(rm.state_dict())
    with torch.no_grad():
        value.head.bias -= rm_bias
    return value


def rlhf_rewards(score, logprobs, ref_logprobs, response_mask, ended, beta, hp: PPOConfig):
    """InstructGPT eq. 2 as the per-token reward PPO maximises. Returns (rewards, kl, score): (B, T), (B, T), (B,).

        R(x, y) = r(x, y) - beta * log(pi_RL(y|x) / pi_SFT(y|x))

    score (B,) is r(x, y) read at the true last response token (reward.score_sequences);
    ended (B,) says which responses said <|endoftext|>; beta is the KL controller's now. hp's switches are
    ablations, the paper's path the default: kl_in_reward=False leaves the KL out of the reward (the
    minibatch loss takes it instead), eos_penalty > 0 lowers the score of cut-off responses.
    """
    if hp.eos_penalty:  # responses cut at max_new_tokens never said <|endoftext|>
        score = torch.where(ended, score, score - hp.eos_penalty)
    rewards, kl = ppo.kl_penalized_rewards(score, logprobs, ref_logprobs, response_mask,
                                           beta if hp.kl_in_reward else 0.0, hp.kl_estimator)
    return rewards, kl, score


# -----------------------------------------------------------------------------
# trimmed passes: only real tokens go through the models (hp.trim_padding; the plain path is the reference)


def with_end_token(tokens, am, resp, stop_token: int, block_size: int):
    """The RM's view of a rollout: every cut-off response with <|endoftext|> appended.  # 3 x (B, <= T+1)

    The RM was trained on completions that end with the end token (reward.encode_texts); read at the
    last content token of a response cut at max_new_tokens, it scores it lower than the same text in
    the trained format: a hidden length penalty. A row that the token takes past block_size drops its
    first real token, as encode_texts drops a long prompt's start.
    """
    B = tokens.size(0)
    grow = lambda x: torch.cat([x, x.new_zeros(B, 1)], 1)                  # room for the token
    t, a, r = grow(tokens), grow(am), grow(resp)
    last = masks.last_token_index(resp)                                       # (B,)
    cut = (tokens.gather(1, last[:, None]).squeeze(1) != stop_token).nonzero().squeeze(1)
    t[cut, last[cut] + 1], a[cut, last[cut] + 1], r[cut, last[cut] + 1] = stop_token, 1, 1
    over = (a.sum(1) > block_size).nonzero().squeeze(1)
    a[over, a[over].argmax(1)] = 0                                          # first real token of each
    if t.size(1) > block_size:  # keep block_size columns: drop column 0, or the free last one where 0 is real
        cols = torch.arange(block_size, device=t.device)[None] + (a[:, 0] == 0).long()[:, None]  # (B, block)
        t, a, r = t.gather(1, cols), a.gather(1, cols), r.gather(1, cols)
    return t, a, r


@torch.no_grad()
def score_passes(policy, ref, rm, value, ro: Rollout, hp: PPOConfig, rm_bias: float, chunk: int = 16):
    """The four forward passes of steps 2-4, on length-sorted chunks of packed rows when hp.trim_padding.

    Returns logprobs, ref_logprobs, values (B, T) and score (B,): the same as the plain full-width passes
    (tests/test_trim.py), computed on the real tokens only. With a stop token (ro.stop_token), the RM reads each
    cut-off response with the end token appended (with_end_token), the format it was trained on. Without a value
    model (the critic-free methods) values are 0; without an RM (a verifiable or random reward) so is the score.
    """
    tokens, am, resp = ro.tokens, ro.attention_mask, ro.response_mask
    rm_in = (tokens, am, resp) if ro.stop_token is None or rm is None else with_end_token(
        tokens, am, resp, ro.stop_token, rm.cfg.block_size)
    temp, was = hp.scoring_temperature, policy.training
    B, T = tokens.shape
    zeros = torch.zeros(B, T, device=tokens.device)
    policy.eval()  # the old policy's log-probs without dropout, as sampled
    if not (hp.trim_padding and hp.reward_at_last_token):  # plain path (and the last-column ablation): full width
        logprobs = masks.token_logprobs(policy(tokens, attention_mask=am), tokens, temp)              # (B, T)
        policy.train(was)
        ref_logprobs = masks.token_logprobs(ref(tokens, attention_mask=am), tokens, temp)             # (B, T)
        score = (score_sequences(rm, *rm_in, rm_bias, at_last_token=hp.reward_at_last_token)         # (B,)
                 if rm is not None else zeros[:, 0])
        values = masks.align_values(value(tokens, attention_mask=am)) if value is not None else zeros  # (B, T)
        return logprobs, ref_logprobs, values, score
    out = {k: zeros.clone() for k in ("logprobs", "ref_logprobs", "values")}
    score = torch.zeros(B, device=tokens.device)
    for rows in torch.argsort(am.sum(1)).split(chunk):                      # similar lengths together
        cols, valid = packing(am, rows, policy.cfg.block_size)
        t, a, r = tokens[rows].gather(1, cols), valid.long(), resp[rows].gather(1, cols) * valid
        out["logprobs"][rows] = unpack(response_logprobs(policy, t, a, r, temp)[0], cols, valid, T)
        out["ref_logprobs"][rows] = unpack(response_logprobs(ref, t, a, r, temp)[0], cols, valid, T)
        if value is not None:
            out["values"][rows] = unpack(masks.align_values(value(t, attention_mask=a)), cols, valid, T)
        if rm is not None:
            cols, valid = packing(rm_in[1], rows, rm.cfg.block_size)
            t, r = rm_in[0][rows].gather(1, cols), rm_in[2][rows].gather(1, cols) * valid
            score[rows] = score_sequences(rm, t, valid.long(), r, rm_bias)
    policy.train(was)
    return out["logprobs"], out["ref_logprobs"], out["values"], score


@torch.no_grad()
def make_experience(policy, ref, rm, value, ro: Rollout, *, rm_bias: float, beta: float, hp: PPOConfig) -> dict:
    """Steps 2-4: RM score at the last token, eq. 2's per-token rewards, values, GAE. beta is the controller's now."""
    tokens, am, resp = ro.tokens, ro.attention_mask, ro.response_mask
    # the old policy's and pi_SFT's logprobs, recomputed by forward passes (the old ones equal the sampling
    # ones: tested); 2. score: r(x, y) read at the true last response token, demonstrations at 0 on average;
    # and the value model's predictions (step 4)
    # (a cut-off response is scored with the end token appended: the RM's trained format)
    logprobs, ref_logprobs, values, score = score_passes(policy, ref, rm, value, ro, hp, rm_bias)
    ended = tokens.gather(1, masks.last_token_index(resp)[:, None]).squeeze(1) == ro.stop_token  # (B,)
    # 3. InstructGPT eq. 2: R(x, y) = r(x, y) - beta * log(pi_RL(y|x) / pi_SFT(y|x)), per token
    rewards, kl, score = rlhf_rewards(score, logprobs, ref_logprobs, resp, ended, beta, hp)      # (B, T)
    # 4. GAE with gamma = 1 on the value model's predictions (it started as the RM)
    advantages, returns = ppo.gae(rewards, values, resp, hp.gamma, hp.lam)
    if hp.whiten_advantages:
        advantages = masks.masked_whiten(advantages, resp)
    return {"tokens": tokens, "attention_mask": am, "response_mask": resp, "logprobs": logprobs,
            "ref_logprobs": ref_logprobs, "values": values, "returns": returns, "advantages": advantages,
            "rewards": rewards, "score": score, "kl": kl, "length": resp.sum(1).float(), "beta": beta}


def minibatch_loss(policy, value, exp, idx, hp: PPOConfig, ptx):
    """Step 5, one minibatch: clipped policy loss + vf_coef * clipped value loss + ptx_coef * pretraining loss."""
    tokens, am, resp = exp["tokens"][idx], exp["attention_mask"][idx], exp["response_mask"][idx]
    if hp.trim_padding:  # the minibatch's real tokens only, packed left-aligned; the response positions' logits
        cols, valid = packing(exp["attention_mask"], idx, policy.cfg.block_size)
        tokens, am, resp = tokens.gather(1, cols), valid.long(), resp.gather(1, cols) * valid      # (b, L)
        old = {k: exp[k][idx].gather(1, cols) for k in ("logprobs", "ref_logprobs", "values", "returns", "advantages")}
        logprobs, logits = response_logprobs(policy, tokens, am, resp, hp.scoring_temperature)   # (b, L)
        everywhere = torch.ones(1, len(logits), device=logits.device)
        entropy = ppo.entropy_from_logits(logits[None].detach(), everywhere).item()
    else:
        old = {k: exp[k][idx] for k in ("logprobs", "ref_logprobs", "values", "returns", "advantages")}
        logits = policy(tokens, attention_mask=am)                                 # (b, T, V)
        logprobs = masks.token_logprobs(logits, tokens, hp.scoring_temperature)      # (b, T)
        entropy = ppo.entropy_from_logits(logits[:, :-1].detach(), resp[:, 1:]).item()
    pg_loss, s = ppo.policy_loss(logprobs, old["logprobs"], old["advantages"], resp, hp.clip)
    values = masks.align_values(value(tokens, attention_mask=am))                    # (b, T)
    vf_loss, vs = ppo.value_loss(values, old["values"], old["returns"], resp, hp.clip if hp.clip_value else None)
    loss = pg_loss + hp.vf_coef * vf_loss
    if not hp.kl_in_reward:  # ablation (GRPO-style): beta * KL estimate as a loss term
        loss = loss + exp["beta"] * ppo.kl_loss(logprobs, old["ref_logprobs"], resp, hp.kl_estimator)
    s.update(vs)
    s = {"ppo/" + k: v for k, v in s.items()}
    s["ppo/policy_loss"], s["val/value_loss"] = pg_loss.item(), vf_loss.item()
    s["val/explained_var"] = ppo.explained_variance(values.detach(), old["returns"], resp)
    s["objective/entropy"] = entropy
    if ptx is not None:
        # InstructGPT eq. 2: + gamma_ptx * E_pretrain[log pi_RL(x)]
        x, y = ptx.next()
        x, y = x.to(tokens.device), y.to(tokens.device)
        lm = ppo.ptx_loss(policy(x), y, torch.ones_like(y))
        loss = loss + hp.ptx_coef * lm
        s["ptx/loss"] = lm.item()
    return loss, s


# -----------------------------------------------------------------------------
# the critic-free methods (pg.py): a group of G responses per prompt, no value model


@torch.no_grad()
def make_group_experience(policy, ref, rm, ro: Rollout, rewards, *, rm_bias: float, hp) -> dict:
    """Scored episodes of P prompts x G responses (rows grouped by prompt, G consecutive rows each): the reward
    (rewards (B,) given, or the RM's score when None), beta * KL in it for hp.kl k1_reward, group advantages (B,)."""
    logprobs, ref_logprobs, _, score = score_passes(policy, ref, rm, None, ro, hp, rm_bias)
    reward = score if rewards is None else rewards.to(score.device)
    kl = ppo.per_token_kl(logprobs, ref_logprobs, ro.response_mask)                     # (B, T) k1
    shaped = reward - hp.beta * kl.sum(1) if hp.kl == "k1_reward" else reward          # InstructGPT eq. 2, summed
    adv = pg.group_advantages(shaped.view(-1, hp.group_size), hp.estimator).view(-1)   # (B,)
    return {"tokens": ro.tokens, "attention_mask": ro.attention_mask, "response_mask": ro.response_mask,
            "logprobs": logprobs, "ref_logprobs": ref_logprobs, "advantages": adv, "reward": reward, "kl": kl,
            "equal_groups": pg.equal_group_share(reward.view(-1, hp.group_size)),
            "length": ro.response_mask.sum(1).float()}


def pg_minibatch_loss(policy, exp: dict, idx, hp) -> tuple:
    """One minibatch of the critic-free update on its packed real tokens: pg.pg_loss on the policy's log-probs
    at the sampling temperature against the old and reference ones. Returns (loss, stats)."""
    cols, valid = packing(exp["attention_mask"], idx, policy.cfg.block_size)
    tokens, am = exp["tokens"][idx].gather(1, cols), valid.long()
    resp = exp["response_mask"][idx].gather(1, cols) * valid                           # (b, L)
    old, ref = (exp[k][idx].gather(1, cols) for k in ("logprobs", "ref_logprobs"))
    logprobs, logits = response_logprobs(policy, tokens, am, resp, hp.temperature)     # (b, L)
    loss, s = pg.pg_loss(logprobs, old, ref, exp["advantages"][idx], resp, hp)
    everywhere = torch.ones(1, len(logits), device=logits.device)
    s["entropy"] = ppo.entropy_from_logits(logits[None].detach(), everywhere).item()
    return loss, s
