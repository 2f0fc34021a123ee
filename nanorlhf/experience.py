"""PPO's episodes: prompts in, scored and advantaged episodes out, and the loss that learns from them.

ppo.py holds the pure pieces (log-probs, GAE, the clipped losses); this module is where
they meet the models. train_ppo.py calls these in the paper's order: `rollout` (step 1),
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

import os
import random

import torch
import torch.nn.functional as F

from nanorlhf import ppo
from nanorlhf.chat import chat_prompt
from nanorlhf.generate import Rollout, generate_in_length_groups
from nanorlhf.jsonl import PROMPT, read_jsonl
from nanorlhf.ppo import PPOConfig
from nanorlhf.precision import round_up
from nanorlhf.reward import score_sequences


class PromptSampler:
    """Prompts from a JSONL file, in a seeded order per epoch; resumable by (epoch, index)."""

    def __init__(self, path, tok, max_prompt_tokens: int, seed: int = 0):
        rows = read_jsonl(path, PROMPT)
        self.rows = [r for r in rows if len(chat_prompt(tok, r["prompt"])) <= max_prompt_tokens]
        if not self.rows:
            raise ValueError(f"no prompt in {path} fits {max_prompt_tokens} tokens")
        self.tok, self.seed, self.epoch, self.index = tok, seed, 0, 0
        self._order = self._make_order()

    def _make_order(self):
        order = list(range(len(self.rows)))
        random.Random(self.seed * 1_000_003 + self.epoch).shuffle(order)
        return order

    def next(self, n: int) -> list[dict]:
        out = []
        while len(out) < n:
            if self.index >= len(self._order):
                self.epoch, self.index = self.epoch + 1, 0
                self._order = self._make_order()
            out.append(self.rows[self._order[self.index]])
            self.index += 1
        return out

    def state_dict(self):
        return {"epoch": self.epoch, "index": self.index}

    def load_state_dict(self, s):
        self.epoch, self.index = s["epoch"], s["index"]
        self._order = self._make_order()


def value_from_rm(rm, rm_bias: float):
    """InstructGPT §3.5: the value function starts as the RM, here with the RM's bias folded into its head so
    that it predicts on the scale of the rewards it will be fit to (demonstrations at 0), not 0 + bias."""
    from nanorlhf.model import ScalarHeadModel
    value = ScalarHeadModel(rm.cfg)
    value.load_state_dict(rm.state_dict())
    with torch.no_grad():
        value.head.bias -= rm_bias
    return value


@torch.no_grad()
def rollout(policy, tok, batch: list[dict], hp: PPOConfig, generator, cache_dtype=torch.float32) -> Rollout:
    """Step 1: responses to a batch of prompts, sampled with the KV cache, ending at <|endoftext|>.

    A bfloat16 cache (precision.cache_dtype) changes the samples' distribution only slightly; the old
    log-probs PPO's ratio needs are recomputed by make_experience either way, so the first ratio is 1.
    """
    ids = [chat_prompt(tok, r["prompt"]) for r in batch]
    return sample_episodes(policy, ids, hp, generator, stop_token=tok.eot_id, pad_id=tok.pad_id,
                           cache_dtype=cache_dtype)


def sample_episodes(policy, ids: list[list[int]], hp: PPOConfig, generator, *, stop_token=None, pad_id=0,
                    cache_dtype=torch.float32) -> Rollout:
    """Step 1 on token ids: with hp.group_by_length, prompts of similar length sampled minibatch_size at a time
    (generate_in_length_groups: one batch's samples up to float rounding, less decoding over left padding)."""
    group = hp.minibatch_size if hp.group_by_length else len(ids)
    return generate_in_length_groups(policy, ids, hp.max_new_tokens, group_size=group, temperature=hp.temperature,
                                     stop_token=stop_token, pad_id=pad_id, generator=generator,
                                     cache_dtype=cache_dtype)


def rlhf_rewards(score, logprobs, ref_logprobs, response_mask, ended, beta, *, kl_in_reward=True,
                 kl_estimator="k1", eos_penalty=0.0):
    """InstructGPT eq. 2 as the per-token reward PPO maximises. Returns (rewards, kl, score): (B, T), (B, T), (B,).

        R(x, y) = r(x, y) - beta * log(pi_RL(y|x) / pi_SFT(y|x))

    score (B,) is r(x, y) read at the true last response token (reward.score_sequences);
    ended (B,) says which responses said <|endoftext|>. The switches are ablations, the
    paper's path the default: kl_in_reward=False leaves the KL out of the reward (the
    minibatch loss takes it instead), eos_penalty > 0 lowers the score of cut-off responses.
    """
    if eos_penalty:  # responses cut at max_new_tokens never said <|endoftext|>
        score = torch.where(ended, score, score - eos_penalty)
    rewards, kl = ppo.kl_penalized_rewards(score, logprobs, ref_logprobs, response_mask,
                                           beta if kl_in_reward else 0.0, kl_estimator)
    return rewards, kl, score


# -----------------------------------------------------------------------------
# trimmed passes: only real tokens go through the models (hp.trim_padding; the plain path is the reference)


def packing(attention_mask, rows, block_size: int):
    """Where each of `rows`' real tokens lands when packed left-aligned: cols (b, L), valid (b, L) bool.

    A rollout row is [left pad | prompt | response | right pad]: its real tokens are contiguous, so
    packed position j of row i is column cols[i, j] = start_i + j. L is the longest row's real length
    (rounded up, below), so a group of rows of similar length carries little padding. Positions come from the attention
    mask (model.py), so a packed row's outputs equal its unpacked ones (to float rounding). L is rounded up
    to precision.SHAPE_MULTIPLE (at most block_size), the extra columns invalid: fewer shapes for bfloat16.
    """
    am = attention_mask[rows].bool()                                        # (b, T)
    start = am.long().argmax(1)                                             # (b,) first real column
    n = am.sum(1)                                                           # (b,) real tokens
    j = torch.arange(round_up(int(n.max()), cap=block_size), device=am.device)  # (L,)
    valid = j[None] < n[:, None]                                            # (b, L)
    cols = torch.where(valid, start[:, None] + j[None], 0)                  # (b, L)
    return cols, valid


def unpack(x, cols, valid, T: int):
    """Packed per-token values (b, L) back to their columns (b, T); 0 off the real tokens."""
    out = torch.zeros(x.size(0), T + 1, dtype=x.dtype, device=x.device)    # column T takes the padding
    return out.scatter(1, torch.where(valid, cols, T), x)[:, :T]


def response_logprobs(model, tokens, attention_mask, response_mask, temperature):
    """ppo.token_logprobs(model(tokens), tokens) on the response positions only, 0 elsewhere.  # (B, T)

    The unembedding (the costliest matmul at a 2k vocabulary) runs on the hidden states that predict a
    response token and on nothing else. Also returns those positions' logits (n, V) for the entropy.
    """
    h = model.hidden(tokens, attention_mask)[:, :-1]                       # (B, T-1, C): h[:, t-1] predicts t
    pick = response_mask[:, 1:].bool()                                      # (B, T-1)
    n = int(pick.sum())  # the rows padded to a multiple of 64 (fewer shapes for bfloat16), dropped after
    logits = model.lm_head(F.pad(h[pick], (0, 0, 0, round_up(n, multiple=64) - n)))[:n]  # (n, V)
    logp = F.log_softmax(logits.float() / temperature, dim=-1)
    lp = logp.gather(-1, tokens[:, 1:][pick][:, None]).squeeze(-1)          # (n,)
    out = torch.zeros(tokens.shape, dtype=lp.dtype, device=tokens.device)
    out[:, 1:][pick] = lp
    return out, logits


def length_groups(attention_mask, size: int, generator=None) -> list[torch.Tensor]:
    """Row indices in groups of `size`, sorted by real length (random tie-break), the groups in random order."""
    n = attention_mask.sum(1).float()
    noise = torch.rand(n.shape, generator=generator).to(n.device)           # a CPU generator; n may be on a GPU
    order = torch.argsort(n + 0.5 * noise)                                  # ties broken at random
    groups = list(order.split(size))
    perm = torch.randperm(len(groups), generator=generator).tolist()
    return [groups[i] for i in perm]


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
    last = ppo.last_token_index(resp)                                       # (B,)
    cut = (tokens.gather(1, last[:, None]).squeeze(1) != stop_token).nonzero().squeeze(1)
    t[cut, last[cut] + 1], a[cut, last[cut] + 1], r[cut, last[cut] + 1] = stop_token, 1, 1
    over = (a.sum(1) > block_size).nonzero().squeeze(1)
    a[over, a[over].argmax(1)] = 0                                          # first real token of each
    if t.size(1) > block_size:  # keep block_size columns: drop column 0, or the free last one where 0 is real
        cols = torch.arange(block_size, device=t.device)[None] + (a[:, 0] == 0).long()[:, None]  # (B, block)
        t, a, r = t.gather(1, cols), a.gather(1, cols), r.gather(1, cols)
    return t, a, r


@torch.no_grad()
def score_passes(policy, ref, rm, value, tokens, am, resp, hp: PPOConfig, rm_bias: float, chunk: int = 16,
                 stop_token: int | None = None):
    """The four forward passes of steps 2-4, on length-sorted chunks of packed rows when hp.trim_padding.

    Returns logprobs, ref_logprobs, values (B, T) and score (B,): the same as the plain full-width passes
    (tests/test_trim.py), computed on the real tokens only. With stop_token, the RM reads each cut-off
    response with the end token appended (with_end_token), the format it was trained on.
    """
    rm_in = (tokens, am, resp) if stop_token is None else with_end_token(tokens, am, resp, stop_token,
                                                                         rm.cfg.block_size)
    temp, was = hp.scoring_temperature, policy.training
    policy.eval()  # the old policy's log-probs without dropout, as sampled
    if not (hp.trim_padding and hp.reward_at_last_token):  # plain path (and the last-column ablation): full width
        logprobs = ppo.token_logprobs(policy(tokens, attention_mask=am), tokens, temp)              # (B, T)
        policy.train(was)
        ref_logprobs = ppo.token_logprobs(ref(tokens, attention_mask=am), tokens, temp)             # (B, T)
        score = score_sequences(rm, *rm_in, rm_bias, at_last_token=hp.reward_at_last_token)          # (B,)
        values = ppo.align_values(value(tokens, attention_mask=am))                                 # (B, T)
        return logprobs, ref_logprobs, values, score
    B, T = tokens.shape
    out = {k: torch.zeros(B, T, device=tokens.device) for k in ("logprobs", "ref_logprobs", "values")}
    score = torch.zeros(B, device=tokens.device)
    for rows in torch.argsort(am.sum(1)).split(chunk):                      # similar lengths together
        cols, valid = packing(am, rows, policy.cfg.block_size)
        t, a, r = tokens[rows].gather(1, cols), valid.long(), resp[rows].gather(1, cols) * valid
        out["logprobs"][rows] = unpack(response_logprobs(policy, t, a, r, temp)[0], cols, valid, T)
        out["ref_logprobs"][rows] = unpack(response_logprobs(ref, t, a, r, temp)[0], cols, valid, T)
        out["values"][rows] = unpack(ppo.align_values(value(t, attention_mask=a)), cols, valid, T)
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
    logprobs, ref_logprobs, values, score = score_passes(policy, ref, rm, value, tokens, am, resp, hp, rm_bias,
                                                         stop_token=ro.stop_token)
    ended = tokens.gather(1, ppo.last_token_index(resp)[:, None]).squeeze(1) == ro.stop_token  # (B,)
    # 3. InstructGPT eq. 2: R(x, y) = r(x, y) - beta * log(pi_RL(y|x) / pi_SFT(y|x)), per token
    rewards, kl, score = rlhf_rewards(score, logprobs, ref_logprobs, resp, ended, beta, kl_in_reward=hp.kl_in_reward,
                                      kl_estimator=hp.kl_estimator, eos_penalty=hp.eos_penalty)    # (B, T)
    # 4. GAE with gamma = 1 on the value model's predictions (it started as the RM)
    advantages, returns = ppo.gae(rewards, values, resp, hp.gamma, hp.lam)
    if hp.whiten_advantages:
        advantages = ppo.masked_whiten(advantages, resp)
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
        entropy = ppo.entropy_from_logits(logits[None].detach(), torch.ones(1, len(logits), device=logits.device)).item()
    else:
        old = {k: exp[k][idx] for k in ("logprobs", "ref_logprobs", "values", "returns", "advantages")}
        logits = policy(tokens, attention_mask=am)                                 # (b, T, V)
        logprobs = ppo.token_logprobs(logits, tokens, hp.scoring_temperature)      # (b, T)
        entropy = ppo.entropy_from_logits(logits[:, :-1].detach(), resp[:, 1:]).item()
    pg_loss, s = ppo.policy_loss(logprobs, old["logprobs"], old["advantages"], resp, hp.clip)
    values = ppo.align_values(value(tokens, attention_mask=am))                    # (b, T)
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


def ptx_batches(data_dir: str, tok, block_size: int, batch_size: int, seed: int):
    """Pretraining batches for PPO-ptx, from the same corpus the base model learned on."""
    from nanorlhf.lmdata import LMBatches, encode_docs, read_corpus
    stream = encode_docs(tok, read_corpus(os.path.join(data_dir, "corpus.jsonl")))
    return LMBatches(stream, block_size, batch_size, seed=seed + 1)


def show_samples(tok, batch, ro: Rollout, exp: dict, n: int) -> None:
    from nanorlhf.generate import response_texts
    texts = response_texts(ro, tok)
    kl = exp["kl"].sum(1)
    for i in range(min(n, len(batch))):
        print(f"  [{exp['score'][i].item():+.2f} kl {kl[i].item():.2f}] {batch[i]['prompt'][:70]!r}")
        print(f"      -> {texts[i][:120]!r}")


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
