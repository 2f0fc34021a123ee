"""Direct Preference Optimisation (Rafailov et al. 2023) as small pure functions.

DPO fits the policy to the comparisons directly: no reward model, no RL loop.
Under the KL-regularised objective the optimal policy satisfies
r(x, y) = beta * log(pi(y|x) / pi_ref(y|x)) + beta * log Z(x), so the
Bradley-Terry loss the RM minimises (InstructGPT eq. 1) becomes, per pair,

    loss = -log sigmoid(beta * [(log pi(y_w) - log pi_ref(y_w)) - (log pi(y_l) - log pi_ref(y_l))])

(DPO eq. 7), with log pi(y|x) the SUM of the response tokens' log-probs
(the response mask of reward.encode_texts: completion + <|endoftext|>).

K-way rankings: like the RM, each prompt's K completions are ONE batch element
and every untied pair (w, l) contributes one term; the terms are averaged per
prompt. The alternative is the Plackett-Luce form of DPO (Rafailov et al.
Appendix A.3: the likelihood of the whole ranking under implicit rewards);
we use pairs so DPO and the RM see exactly the same training signal.

Example:
    lp = response_logprob_sum(policy, tokens, attention_mask, response_mask)   # (K,)
    loss, stats = dpo_ranking_loss(lp, ref_lp, ranks=[0, 2, 1, 1], beta=0.1)
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from nanorlhf.masks import masked_sum, token_logprobs
from nanorlhf.rankings import ranking_to_ranks, ranks_to_pairs
from nanorlhf.reward import encode_texts


def response_logprob_sum(model, tokens, attention_mask, response_mask):
    """log pi(y|x): the sum of log-probs over response tokens of each row (generate.sequence_logprobs keeps them
    per token).  # (B,)"""
    lp = token_logprobs(model(tokens, attention_mask=attention_mask), tokens)   # (B, T)
    return masked_sum(lp, response_mask, dim=-1)                                 # (B,)


def dpo_loss(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta: float):
    """DPO eq. 7 over pairs (all (P,) tensors of sequence log-probs). Returns (loss, stats).

    At the reference (policy == ref) every margin is 0 and the loss is log 2.
    stats: margin (implicit reward of chosen minus rejected), accuracy (margin > 0),
    chosen_reward, rejected_reward: floats averaged over pairs.
    """
    # BEGIN ASSIGNMENT dpo_loss
    # DPO §4: the implicit reward beta * log(pi(y|x) / pi_ref(y|x))
    chosen = beta * (policy_chosen - ref_chosen)                        # (P,)
    rejected = beta * (policy_rejected - ref_rejected)                  # (P,)
    margin = chosen - rejected                                          # (P,)
    loss = -F.logsigmoid(margin).mean()
    with torch.no_grad():
        stats = {"margin": margin.mean().item(), "accuracy": (margin > 0).float().mean().item(),
                 "chosen_reward": chosen.mean().item(), "rejected_reward": rejected.mean().item()}
    return loss, stats
    # END ASSIGNMENT dpo_loss


def dpo_ranking_loss(policy_logps, ref_logps, ranks, beta: float):
    """DPO for one prompt's K-way ranking: dpo_loss over its untied pairs. policy_logps, ref_logps (K,).

    Equals reward.rm_ranking_loss on the implicit rewards (tested): DPO is the RM's loss
    with the reward model replaced by beta * log(pi / pi_ref).
    """
    pairs = ranks_to_pairs(ranks)
    if not pairs:
        raise ValueError(f"ranking {list(map(int, ranks))} has no untied pair to learn from")
    w, l = torch.tensor(pairs, device=policy_logps.device).unbind(dim=1)   # (P,) each
    return dpo_loss(policy_logps[w], policy_logps[l], ref_logps[w], ref_logps[l], beta)


def comparison_loss(policy, ref, tok, comparisons: list[dict], beta: float, device, key: str = "ranking"):
    """Mean DPO loss over prompts (each prompt's K completions one batch element) and the stats averaged
    over prompts (each prompt's pair accuracy and margin weigh the same; the RM's val accuracy pools pairs)."""
    if not comparisons:
        raise ValueError("no comparisons with an untied pair to compute the DPO loss on")
    losses, stats = [], []
    for c in comparisons:
        prompts = [c["prompt"]] * len(c["completions"])
        t, a, r = (x.to(device) for x in encode_texts(tok, prompts, c["completions"], policy.cfg.block_size))
        lp = response_logprob_sum(policy, t, a, r)                              # (K,)
        with torch.no_grad():
            ref_lp = response_logprob_sum(ref, t, a, r)                         # (K,)
        loss, s = dpo_ranking_loss(lp, ref_lp, ranking_to_ranks(c[key]), beta)
        losses.append(loss)
        stats.append(s)
    mean = {k: sum(s[k] for s in stats) / len(stats) for k in stats[0]}
    return torch.stack(losses).mean(), mean
