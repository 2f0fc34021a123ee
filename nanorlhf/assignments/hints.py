"""The assignments' hints (nanorlhf/assignments/registry.py), three levels each.

Level 1 is the student copy's stub message: what to compute and why, with the paper's
section and the shapes. Level 2 names the tools and the traps. Level 3 is close to
pseudocode. `python -m nanorlhf.assignments hint NAME --level=N` prints levels 1..N.
Hint text is not part of the versioned assignment API.
"""

HINTS: dict[str, tuple[str, str, str]] = {
    "bpe_merge": (
        "one BPE merge step (Sennrich et al. 2016; GPT-2 §2.2): a new list in which every occurrence of "
        "pair in word, scanned left to right and never overlapping, is replaced by new_id",
        "walk an index i along word and compare (word[i], word[i+1]) with pair; mind the last position, "
        "which has no word[i+1]; [5, 5, 5] with pair (5, 5) gives [256, 5], not [5, 256]; do not modify "
        "word",
        "out, i = [], 0; while i < len(word): if i + 1 < len(word) and (word[i], word[i+1]) == pair: append "
        "new_id, i += 2; else: append word[i], i += 1; return out",
    ),
    "attention": (
        "the manual path of causal self-attention (Vaswani et al. 2017, eq. 1): y = softmax(q k^T / "
        "sqrt(hs)) v with q (B, nh, T, hs), k and v (B, nh, T_total, hs); keys where mask is False get no "
        "weight; y is (B, nh, T, hs)",
        "mask (B or 1, 1, T, T_total) is True where query t may attend key s: the other scores become -inf "
        "BEFORE the softmax; softmax over the keys (the last dim); self.attn_dropout on the weights; no "
        "fused kernel here",
        "att = (q @ k.transpose(-2, -1)) / math.sqrt(hs); att = att.masked_fill(~mask, float('-inf')); att "
        "= F.softmax(att, dim=-1); att = self.attn_dropout(att); y = att @ v",
    ),
    "kv_cache": (
        "the KV cache: store this layer's new keys and values (B, nh, T, hs) at positions [pos, pos+T) of "
        "self.kv (n_layer, 2, B, nh, max_len, hs) and return the keys and values of all positions so far, "
        "(B, nh, pos+T, hs) each",
        "self.kv[layer, 0] holds keys, self.kv[layer, 1] values; leave self.pos alone (every layer calls "
        "update with the same pos, and the model advances it after the last layer); refuse to write past "
        "max_len",
        "T = k.size(2); assert pos + T <= max_len; self.kv[layer, 0, :, :, pos:pos+T] = k; the same for v "
        "at 1; return self.kv[layer, 0, :, :, :pos+T], self.kv[layer, 1, :, :, :pos+T]",
    ),
    "response_mask": (
        "SFT batches (InstructGPT §3.5): right-padded inputs x = ids[:-1] and targets y = ids[1:], (B, T) "
        "with T the longest len(ids) - 1; loss_mask 1 iff the TARGET is a response token (the prompt is "
        "never trained on); attention_mask 1 on real inputs; return (x, y, loss_mask, attention_mask)",
        "position t is trained to predict ids[t+1], so its loss mask is rmask[t+1], not rmask[t]; padding "
        "holds pad_id with loss_mask 0 and attention_mask 0; loss_mask is float, attention_mask long "
        "(nanorlhf/chat.py draws the layout)",
        "T = max(len(ids)) - 1; x, y = torch.full((B, T), pad_id); loss_mask, attention_mask = zeros; for "
        "each b: n = len(ids) - 1; x[b, :n] = ids[:-1]; y[b, :n] = ids[1:]; loss_mask[b, :n] = rmask[1:]; "
        "attention_mask[b, :n] = 1",
    ),
    "rm_loss": (
        "InstructGPT eq. 1 for one prompt's K-way ranking: the mean over its untied (winner, loser) pairs "
        "of -log sigmoid(r_w - r_l); rewards (K,) the RM's scores, ranks (K,) lower = better, equal = tie; "
        "a scalar",
        "untied_pairs(ranks, rewards.device) gives (winners, losers) index tensors and raises the "
        "ValueError when every pair is tied; F.logsigmoid is the stable log sigmoid; divide by the number "
        "of untied pairs, not by C(K, 2)",
        "winners, losers = untied_pairs(ranks, rewards.device); loss = -F.logsigmoid(rewards[winners] - "
        "rewards[losers]), averaged",
    ),
    "kl_reward": (
        "InstructGPT §3.5: R(x, y) = r(x, y) - beta * log(pi_RL / pi_SFT) spread over the tokens: -beta * "
        "kl_t on every response token and the RM's score (B,) also at each row's last response token; "
        "return (rewards, kl), (B, T) each, 0 off the response",
        "per_token_kl(logprobs, ref_logprobs, response_mask, estimator) gives the masked kl of the chosen "
        "estimator; last_token_index(response_mask) each row's last response column, whatever the padding "
        "side; return the kl you penalised (the logged KL must equal it)",
        "kl = per_token_kl(...); rewards = -beta * kl; last = last_token_index(response_mask); rewards = "
        "rewards.scatter_add(1, last[:, None], score[:, None]); return rewards, kl",
    ),
    "gae": (
        "generalised advantage estimation (Schulman et al. 2016): delta_t = r_t + gamma V_{t+1} - V_t and "
        "A_t = delta_t + gamma lam A_{t+1}, backwards over each row's response tokens; return (advantages, "
        "returns = A + V), (B, T) each, 0 off the mask",
        "loop t from T-1 down to 0 over the whole batch at once, carrying next_value and next_adv (B,); "
        "after a row's last response token and anywhere off the mask both are 0, so padding never leaks in; "
        "select with torch.where (0 * nan is nan); the test has a per-sequence brute force",
        "for t from T-1 down to 0: delta = r_t + gamma*V_next - V_t, A_t = delta + gamma*lam*A_next (0 off "
        "the mask); then V_next = V_t and A_next = A_t on the mask, 0 off it; returns = A + V on the mask",
    ),
    "policy_loss": (
        "PPO's clipped surrogate (Schulman et al. 2017, eq. 7) negated as a loss: the masked mean over "
        "response tokens of -min(ratio * A, clip(ratio, 1-clip, 1+clip) * A) with ratio = pi / pi_old; "
        "stats ratio_mean, clipfrac, approx_kl as floats",
        "negated, the min becomes a max of the two losses, and the clip binds for A > 0 above 1+clip AND "
        "for A < 0 below 1-clip, so clamping the ratio alone is wrong; clipfrac: the share of tokens where "
        "the clipped loss is strictly larger; approx_kl: the mean of (ratio - 1) - log ratio; stats under "
        "torch.no_grad()",
        "ratio = exp(logprobs - old_logprobs); loss = masked_mean(max(-A*ratio, -A*clamp(ratio, 1-clip, "
        "1+clip)), mask); clipfrac = masked_mean(clipped > unclipped); approx_kl = masked_mean((ratio - 1) "
        "- log ratio)",
    ),
    "dpo_loss": (
        "DPO (Rafailov et al. 2023, eq. 7): with implicit rewards beta * (log pi - log pi_ref), the mean "
        "over the P pairs of -log sigmoid(reward(chosen) - reward(rejected)); inputs (P,) sequence "
        "log-probs; stats margin, accuracy, chosen_reward, rejected_reward as floats",
        "implicit_rewards(policy_logps, ref_logps, beta) is in the same file; at the reference every margin "
        "is 0 and the loss is log 2; accuracy is the share of margins > 0; every stat is a mean over pairs, "
        "under torch.no_grad()",
        "chosen = implicit_rewards(policy_chosen, ref_chosen, beta); rejected likewise; margin = chosen - "
        "rejected; loss = -F.logsigmoid(margin).mean(); stats: the means of margin, margin > 0, chosen and "
        "rejected",
    ),
    "steering": (
        "contrastive activation addition (Rimsky et al. 2023): a forward hook on block `layer` that adds "
        "multiplier * vector (C,) to the block's output (B, T, C) at the steered columns (>= start, an int or "
        "one per row; with start None, what a KV-cache generation computes from the prompt's last token on); "
        "register it and keep the handle",
        "register_forward_hook(fn) calls fn(module, args, output) after the block, and a tensor it returns "
        "replaces the output; args[3] is the KV cache (None without one), whose pos is the absolute column of "
        "the chunk's first position; steering_mask(columns, start) is the (B or 1, T, 1) 0/1 mask; only "
        "block `layer`, only after it",
        "def add(mod, args, out): cache = args[3]; past = cache.pos if cache else 0; columns = arange(past, "
        "past + T); first = start, or (past + T - 1 if past == 0 else past) with a cache when start is None; "
        "return out + multiplier * steering_mask(columns, first) * vector; handle = "
        "blocks(model)[layer].register_forward_hook(add)",
    ),
}
