"""The experience side of PPO: prompts in, scored and advantaged episodes out.

train_ppo.py calls these in the paper's order: `rollout` (step 1) then
`make_experience` (steps 2-4), then `ppo_step_loss` per minibatch (step 5).

Example:
    ro = rollout(policy, tok, prompts.next(64), cfg, generator)
    exp = make_experience(policy, ref, rm, value, ro, rm_bias, beta, cfg)
    exp["advantages"]   # (B, T) whitened over response tokens
"""
from __future__ import annotations

import os
import random

import torch

from nanorlhf import ppo
from nanorlhf.chat import chat_prompt
from nanorlhf.generate import Rollout, generate
from nanorlhf.jsonl import PROMPT, read_jsonl
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
def rollout(policy, tok, batch: list[dict], cfg, generator) -> Rollout:
    """Step 1: responses to a batch of prompts, sampled with the KV cache, ending at <|endoftext|>."""
    ids = [chat_prompt(tok, r["prompt"]) for r in batch]
    return generate(policy, ids, cfg.max_new_tokens, temperature=cfg.temperature, stop_token=tok.eot_id,
                    pad_id=tok.pad_id, generator=generator)


@torch.no_grad()
def make_experience(policy, ref, rm, value, ro: Rollout, rm_bias: float, beta: float, cfg) -> dict:
    """Steps 2-4: RM score at the last token, KL-penalised per-token rewards, values, GAE.

    cfg's ablation switches (train_ppo.Config; docs/details.md) are read here and in ppo_step_loss.
    """
    tokens, am, resp = ro.tokens, ro.attention_mask, ro.response_mask
    temp = cfg.logprob_temperature or cfg.temperature   # the sampling temperature, unless ablated
    was = policy.training
    policy.eval()
    # the old policy's logprobs, recomputed by a forward pass (equal to the sampling ones: tested)
    logprobs = ppo.token_logprobs(policy(tokens, attention_mask=am), tokens, temp)              # (B, T)
    policy.train(was)
    ref_logprobs = ppo.token_logprobs(ref(tokens, attention_mask=am), tokens, temp)             # (B, T)
    # 2. score: r(x, y) read at the true last response token, demonstrations at 0 on average
    if cfg.reward_at_last_token:
        score = score_sequences(rm, tokens, am, resp, rm_bias)                                  # (B,)
    else:  # ablation: the common bug of reading the final column, a pad for every shorter response
        score = rm(tokens, attention_mask=am)[:, -1] - rm_bias                                  # (B,)
    if cfg.eos_penalty:  # responses cut at max_new_tokens never said <|endoftext|>
        ended = tokens.gather(1, ppo.last_token_index(resp)[:, None]).squeeze(1) == ro.stop_token  # (B,)
        score = torch.where(ended, score, score - cfg.eos_penalty)
    # 3. InstructGPT §3.5: R(x, y) = r(x, y) - beta * log(pi_RL(y|x) / pi_SFT(y|x)), per token
    beta_r = beta if cfg.kl_in_reward else 0.0   # ablation: the KL goes into the loss instead
    rewards, kl = ppo.kl_penalized_rewards(score, logprobs, ref_logprobs, resp, beta_r, cfg.kl_estimator)  # (B, T)
    # 4. values from the value model (initialised from the RM); GAE with gamma = 1
    values = ppo.align_values(value(tokens, attention_mask=am))                                 # (B, T)
    advantages, returns = ppo.gae(rewards, values, resp, cfg.gamma, cfg.lam)
    if cfg.whiten_advantages:
        advantages = ppo.masked_whiten(advantages, resp)
    return {"tokens": tokens, "attention_mask": am, "response_mask": resp, "logprobs": logprobs,
            "ref_logprobs": ref_logprobs, "values": values, "returns": returns, "advantages": advantages,
            "score": score, "kl": kl, "length": resp.sum(1).float(), "beta": beta}


def ppo_step_loss(policy, value, exp, idx, cfg, ptx):
    """One minibatch: clipped policy loss + vf_coef * clipped value loss + ptx_coef * pretraining loss."""
    tokens, am, rm_ = exp["tokens"][idx], exp["attention_mask"][idx], exp["response_mask"][idx]
    logits = policy(tokens, attention_mask=am)                                     # (b, T, V)
    logprobs = ppo.token_logprobs(logits, tokens, cfg.logprob_temperature or cfg.temperature)  # (b, T)
    pg_loss, s = ppo.policy_loss(logprobs, exp["logprobs"][idx], exp["advantages"][idx], rm_, cfg.clip)
    values = ppo.align_values(value(tokens, attention_mask=am))                    # (b, T)
    vf_loss, vs = ppo.value_loss(values, exp["values"][idx], exp["returns"][idx], rm_,
                                 cfg.clip if cfg.clip_value else None)
    loss = pg_loss + cfg.vf_coef * vf_loss
    if not cfg.kl_in_reward:  # ablation (GRPO-style): beta * KL estimate as a loss term
        loss = loss + exp["beta"] * ppo.kl_loss(logprobs, exp["ref_logprobs"][idx], rm_, cfg.kl_estimator)
    s.update(vs)
    s = {"ppo/" + k: v for k, v in s.items()}
    s["ppo/policy_loss"], s["val/value_loss"] = pg_loss.item(), vf_loss.item()
    s["val/explained_var"] = ppo.explained_variance(values.detach(), exp["returns"][idx], rm_)
    s["objective/entropy"] = ppo.entropy_from_logits(logits[:, :-1].detach(), rm_[:, 1:]).item()
    if ptx is not None:
        # InstructGPT eq. 2: + gamma_ptx * E_pretrain[log pi_RL(x)]
        x, y = ptx.next()
        x, y = x.to(tokens.device), y.to(tokens.device)
        lm = ppo.ptx_loss(policy(x), y, torch.ones_like(y))
        loss = loss + cfg.ptx_coef * lm
        s["ptx/loss"] = lm.item()
    return loss, s


def ptx_batches(cfg, tok, block_size: int):
    """Pretraining batches for PPO-ptx, from the same corpus the base model learned on."""
    from nanorlhf.lmdata import LMBatches, encode_docs, read_corpus
    stream = encode_docs(tok, read_corpus(os.path.join(cfg.data_dir, "corpus.jsonl")))
    return LMBatches(stream, block_size, cfg.ptx_batch_size, seed=cfg.seed + 1)


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
