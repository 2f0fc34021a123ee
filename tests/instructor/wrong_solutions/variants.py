"""Correct solutions written differently from the library's (vectorised, einsum, a BCE matrix, ...): the grader
must accept each, so a grading test that pins one way of writing the maths instead of the maths fails CI."""

RIGHT: dict[str, dict[str, str]] = {
    "bpe_merge": {
        "skip_flag": """
            out, skip = [], False
            for i, token in enumerate(word):
                if skip:
                    skip = False
                elif tuple(word[i:i + 2]) == tuple(pair):
                    out.append(new_id)
                    skip = True
                else:
                    out.append(token)
            return out
        """,
    },
    "attention": {
        "einsum": """
            scores = torch.einsum("bhtd,bhsd->bhts", q, k) / hs ** 0.5
            weights = self.attn_dropout(scores.masked_fill(mask.logical_not(), float("-inf")).softmax(dim=-1))
            y = torch.einsum("bhts,bhsd->bhtd", weights, v)
        """,
    },
    "kv_cache": {
        "slice_object": """
            new = slice(self.pos, self.pos + k.shape[2])
            if new.stop > self.kv.shape[4]:
                raise ValueError("the KV cache is full")
            self.kv[layer, 0, :, :, new], self.kv[layer, 1, :, :, new] = k, v
            return self.kv[layer, 0, :, :, :new.stop], self.kv[layer, 1, :, :, :new.stop]
        """,
    },
    "response_mask": {
        "pad_sequence": """
            from torch.nn.utils.rnn import pad_sequence
            xs = [torch.tensor(ids[:-1]) for ids, _ in examples]
            x = pad_sequence(xs, batch_first=True, padding_value=pad_id)
            y = pad_sequence([torch.tensor(ids[1:]) for ids, _ in examples], batch_first=True, padding_value=pad_id)
            loss_mask = pad_sequence([torch.tensor(m[1:], dtype=torch.float) for _, m in examples], batch_first=True)
            attention_mask = pad_sequence([torch.ones(len(t), dtype=torch.long) for t in xs], batch_first=True)
            return x, y, loss_mask, attention_mask
        """,
    },
    "rm_loss": {
        "bce_matrix": """
            ranks = torch.as_tensor(ranks, device=rewards.device)
            better = ranks[:, None] < ranks[None, :]  # (K, K): i ranked above j
            if not better.any():
                raise ValueError("every pair is tied")
            diff = (rewards[:, None] - rewards[None, :])[better]
            return F.binary_cross_entropy_with_logits(diff, torch.ones_like(diff))
        """,
    },
    "kl_reward": {
        "row_loop": """
            if estimator not in ("k1", "k3"):
                raise ValueError(f"unknown KL estimator {estimator}")
            log_ratio = logprobs - ref_logprobs
            kl = log_ratio if estimator == "k1" else (torch.exp(-log_ratio) - 1) + log_ratio
            kl = torch.where(response_mask.bool(), kl, 0.0)
            rewards = -beta * kl
            for b in range(rewards.size(0)):
                last = int(response_mask[b].nonzero().max())
                rewards[b, last] = rewards[b, last] + score[b]
            return rewards, kl
        """,
    },
    "gae": {
        "discount_matrix": """
            mask = response_mask.bool()
            zero = torch.zeros_like(values)
            r, v = torch.where(mask, rewards, zero), torch.where(mask, values, zero)
            v_next = torch.cat([v[:, 1:], zero[:, :1]], dim=1)  # 0 after a response's last token
            delta = torch.where(mask, r + gamma * v_next - v, zero)
            steps = torch.arange(values.shape[1])
            gap = steps[None, :] - steps[:, None]  # (T, T): s - t
            discount = torch.where(gap >= 0, (gamma * lam) ** gap.clamp(min=0).to(values.dtype), zero.new_zeros(()))
            advantages = torch.where(mask, delta @ discount.T, zero)
            return advantages, torch.where(mask, advantages + v, zero)
        """,
    },
    "policy_loss": {
        "where_the_clip_binds": """
            mask = response_mask.bool()
            log_ratio = logprobs - old_logprobs
            ratio = log_ratio.exp()
            low, high = 1 - clip, 1 + clip
            binds = ((advantages > 0) & (ratio > high)) | ((advantages < 0) & (ratio < low))
            per_token = torch.where(binds, -advantages * ratio.clamp(low, high), -advantages * ratio)
            n = mask.sum()
            loss = torch.where(mask, per_token, torch.zeros_like(per_token)).sum() / n
            with torch.no_grad():
                def mean(x):
                    return (torch.where(mask, x, torch.zeros_like(x)).sum() / n).item()
                stats = {"ratio_mean": mean(ratio), "clipfrac": mean(binds.to(ratio.dtype)),
                         "approx_kl": mean(ratio - 1 - log_ratio)}
            return loss, stats
        """,
    },
    "dpo_loss": {
        "softplus": """
            chosen, rejected = beta * (policy_chosen - ref_chosen), beta * (policy_rejected - ref_rejected)
            margin = chosen - rejected
            loss = F.softplus(-margin).mean()  # softplus(-m) = -log sigmoid(m)
            with torch.no_grad():
                stats = {"margin": margin.mean().item(), "accuracy": (margin > 0).double().mean().item(),
                         "chosen_reward": chosen.mean().item(), "rejected_reward": rejected.mean().item()}
            return loss, stats
        """,
    },
    "steering": {
        "first_column_tensor": """
            def hook(module, inputs, output):
                cache = inputs[3] if len(inputs) > 3 else None
                if cache is None and start is None:
                    return None  # None keeps the block's output
                offset, T = (cache.pos if cache is not None else 0), output.shape[1]
                first = torch.tensor([offset + T - 1 if offset == 0 else offset]) if start is None else start
                cols = torch.arange(offset, offset + T).unsqueeze(0)                        # (1, T)
                steered = (cols >= torch.as_tensor(first).reshape(-1, 1)).unsqueeze(-1)    # (B or 1, T, 1)
                return output + multiplier * steered.to(output.dtype) * vector.to(output.dtype)
            handle = blocks(model)[layer].register_forward_hook(hook)
        """,
    },
}
