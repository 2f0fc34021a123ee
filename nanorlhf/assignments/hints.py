"""The assignments' hints (nanorlhf/assignments/registry.py), two levels each.

Level 1 is the student copy's stub message: what to compute and why, with the paper's
section and the shapes. Level 2 names the traps: the mistakes that pass a quick look
and fail the grader. Neither names a helper that does the work, and neither is code:
the reference bodies are the instructor's answer key (`python -m nanorlhf.assignments
answers NAME`, refused in a student copy). `hint NAME --level=2` prints both levels.
Hint text is not part of the versioned assignment API.
"""

HINTS: dict[str, tuple[str, str]] = {
    "bpe_merge": (
        "one BPE merge step (Sennrich et al. 2016; GPT-2 §2.2): a new list in which every occurrence of "
        "pair in word, scanned left to right and never overlapping, is replaced by new_id",
        "the last position has no right neighbour; [5, 5, 5] with pair (5, 5) gives [256, 5], not [5, 256] "
        "nor [256, 256]; (2, 1) is not the pair (1, 2); a word of one token, or none, comes back as it was; "
        "return a new list and leave word unchanged",
    ),
    "attention": (
        "the manual path of causal self-attention (Vaswani et al. 2017, eq. 1): y = softmax(q k^T / "
        "sqrt(hs)) v with q, k, v (B, nh, T, hs) (this path never sees a KV cache: the fused kernel "
        "serves cached decoding); keys where mask is False get no weight; y is (B, nh, T, hs)",
        "mask (B or 1, 1, T, T) is True where query t may attend key s: the other scores become -inf "
        "BEFORE the softmax (zeroing weights after it leaves the rows unnormalised); the softmax runs over "
        "the keys, the last dim; scale by sqrt(hs), the head size, not by C; dropout (self.attn_dropout) "
        "acts on the attention weights in training, as GPT-2's does; no fused kernel and no private torch "
        "entry point: the grader refuses them",
    ),
    "kv_cache": (
        "the KV cache: store this layer's new keys and values (B, nh, T, hs) at positions [pos, pos+T) of "
        "self.kv (n_layer, 2, B, nh, max_len, hs) and return the keys and values of all positions so far, "
        "(B, nh, pos+T, hs) each",
        "every layer calls update with the same pos, and the model advances it after the last layer, so "
        "update must not move it; keys at index 0 of the second axis, values at 1; return the old positions "
        "AND the new ones; writing past max_len must fail, not wrap around or truncate",
    ),
    "response_mask": (
        "SFT batches (InstructGPT §3.5): right-padded inputs x = ids[:-1] and targets y = ids[1:], (B, T) "
        "with T the longest len(ids) - 1; loss_mask 1 iff the TARGET is a response token (the prompt is "
        "never trained on); attention_mask 1 on real inputs; return (x, y, loss_mask, attention_mask)",
        "position t is trained to predict ids[t+1], so its loss mask is rmask[t+1], not rmask[t]; x and y "
        "are both padded with pad_id (not -100: sft_loss masks with loss_mask), on the right; padding has "
        "loss_mask 0 and attention_mask 0; loss_mask is float, attention_mask long (nanorlhf/chat.py draws "
        "the layout)",
    ),
    "rm_loss": (
        "InstructGPT eq. 1 for one prompt's K-way ranking: the mean over its untied (winner, loser) pairs "
        "of -log sigmoid(r_w - r_l); rewards (K,) the RM's scores, ranks (K,) lower = better, equal = tie; "
        "a scalar",
        "a tied pair says nothing and adds no term; divide by the number of untied pairs, not by C(K, 2); "
        "a ranking with every pair tied raises ValueError; the winner's reward comes first in the "
        "difference; log(sigmoid(x)) underflows for very negative x where F.logsigmoid does not; keep it "
        "differentiable (no .item(), no Python floats)",
    ),
    "kl_reward": (
        "InstructGPT §3.5: R(x, y) = r(x, y) - beta * log(pi_RL / pi_SFT) spread over the tokens: the "
        "per-token KL estimate kl_t (k1: log pi_RL - log pi_SFT; k3: (q/p - 1) - log(q/p) with q/p = "
        "pi_SFT / pi_RL) penalised by -beta * kl_t on every response token, and the RM's score (B,) added at "
        "each row's last response token; return (rewards, kl), (B, T) each, 0 off the response",
        "it is a penalty: -beta, not +beta; q/p is pi_SFT / pi_RL, the inverse of k1's ratio; an estimator "
        "other than k1 or k3 raises ValueError; kl is 0 off the response even where the log-probs hold junk; "
        "the last response token is not the last column: right-padded rows end early, left-padded ones at "
        "T-1; the score goes there once, on top of that token's penalty; return the kl you penalised (the "
        "logged KL must equal it)",
    ),
    "gae": (
        "generalised advantage estimation (Schulman et al. 2016): delta_t = r_t + gamma V_{t+1} - V_t and "
        "A_t = delta_t + gamma lam A_{t+1}, backwards over each row's response tokens; return (advantages, "
        "returns = A + V), (B, T) each, 0 off the mask",
        "the recursion runs from the last column back; after a row's last response token the episode has "
        "ended, so V and A of the next step are 0 there, whatever the padding side; rewards and values off "
        "the mask may hold anything, NaN included, and must not leak in: 0 * nan is nan, so select (e.g. "
        "torch.where) instead of multiplying by the mask; gamma multiplies both the next value and the next "
        "advantage",
    ),
    "policy_loss": (
        "PPO's clipped surrogate (Schulman et al. 2017, eq. 7) negated as a loss: the masked mean over "
        "response tokens of -min(ratio * A, clip(ratio, 1-clip, 1+clip) * A) with ratio = pi / pi_old; "
        "stats ratio_mean, clipfrac, approx_kl as floats",
        "negated, the min becomes a max of the two losses, and the clip binds for A > 0 above 1+clip AND "
        "for A < 0 below 1-clip, so clamping the ratio alone is wrong, and so is counting only ratios above "
        "1+clip in clipfrac: it is the share of response tokens where the clipped loss is strictly larger; "
        "approx_kl: the mean of (ratio - 1) - log ratio; padding holds huge values that count in no mean; "
        "stats under torch.no_grad()",
    ),
    "dpo_loss": (
        "DPO (Rafailov et al. 2023, eq. 7): with implicit rewards beta * (log pi - log pi_ref), the mean "
        "over the P pairs of -log sigmoid(reward(chosen) - reward(rejected)); inputs (P,) sequence "
        "log-probs; stats margin, accuracy, chosen_reward, rejected_reward as floats",
        "the loss of the mean margin is not the mean of the losses (log sigmoid is not linear): average "
        "last; beta scales each implicit reward, and the reference's log-probs are subtracted from the "
        "policy's; at the reference every margin is 0 and the loss is log 2; accuracy is the share of "
        "margins > 0; every stat is a mean over pairs, not a sum, under torch.no_grad()",
    ),
    "steering": (
        "contrastive activation addition (Rimsky et al. 2023): a forward hook on block `layer` that adds "
        "multiplier * vector (C,) to the block's output (B, T, C) at the steered columns (>= start, an int or "
        "one per row; with start None, what a KV-cache generation computes from the prompt's last token on); "
        "register it and keep the handle",
        "register_forward_hook(fn) calls fn(module, args, output) after the block, and a tensor it returns "
        "replaces the output; args[3] is the KV cache (None without one), whose pos is the absolute column of "
        "the chunk's first position, so a chunk's columns are pos .. pos+T-1; start None: the prefill (pos 0) "
        "steers only its last column, each later step all of its columns, a pass without a cache none; a "
        "start of one per row (B,) compares each row with its own; only block `layer`, only after it",
    ),
    "group_advantages": (
        "each response's advantage against its group, (P, G) -> (P, G): grpo (r - mean) / (std + eps), dr_grpo "
        "r - mean, rloo r minus the mean of the other G - 1, reinforce_baseline r - mean whitened over the batch",
        "a group is a row: every mean and std runs over dim 1 with keepdim, never over the batch (but for the "
        "last whitening); an unknown estimator raises ValueError; torch's std is the unbiased one, as the "
        "reference's; rloo's baseline leaves the "
        "response itself out, so with G = 2 each response's baseline is the other's reward; eps goes outside "
        "the std; a group of equal rewards must come out 0 under every estimator, even after the whitening",
    ),
    "aggregate": (
        "one loss from per-token losses (B, T) on the response tokens: seq_mean (GRPO: each response's mean, then "
        "their mean), token_mean (DAPO: all tokens alike), constant (Dr. GRPO: the sum over B * constant)",
        "n_responses and n_tokens are the whole batch's totals: a micro-batch's loss is then its share of the whole "
        "batch's; off the mask the per-token losses may hold anything, NaN included: select (torch.where, "
        "masked_sum), never multiply by the mask; seq_mean divides each response by its own length; given "
        "n_responses, seq_mean and constant divide by it instead of the tensor's B, and token_mean by n_tokens "
        "instead of the tensor's count, so that micro-batches add up to the whole batch; constant without the "
        "constant raises ValueError, as does an unknown mode",
    ),
}
