"""Wrong-but-plausible solutions of every assignment: the bugs a student is likely to write.

Each entry is the body of one assignment region (dedented; the grader's splice indents it
to the region's markers). tests/test_grading.py puts them into a student copy and checks
that the grader fails every one, so a grading test that stops pinning the maths fails CI.
Not a test module itself (no test_ prefix): nothing here is collected.
"""

WRONG: dict[str, dict[str, str]] = {
    "bpe_merge": {
        "overlapping": """
            out, i = [], 0
            while i < len(word):  # steps 1 after a merge, so (5, 5, 5) merges twice
                if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
                    out.append(new_id)
                elif i == 0 or (word[i - 1], word[i]) != pair:
                    out.append(word[i])
                i += 1
            return out
        """,
        "first_only": """
            for i in range(len(word) - 1):  # only the first occurrence
                if (word[i], word[i + 1]) == pair:
                    return word[:i] + [new_id] + word[i + 2:]
            return list(word)
        """,
        "right_to_left": """
            out, i = [], len(word) - 1
            while i >= 0:  # scans from the end: (5, 5, 5) -> [5, 256]
                if i > 0 and (word[i - 1], word[i]) == pair:
                    out.append(new_id)
                    i -= 2
                else:
                    out.append(word[i])
                    i -= 1
            return out[::-1]
        """,
        "drops_last": """
            out, i = [], 0
            while i < len(word) - 1:  # the last token is lost when it is not merged
                if (word[i], word[i + 1]) == pair:
                    out.append(new_id)
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            return out
        """,
        "unordered_pair": """
            out, i = [], 0
            while i < len(word):  # (2, 1) taken for (1, 2)
                if i + 1 < len(word) and {word[i], word[i + 1]} == set(pair):
                    out.append(new_id)
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            return out
        """,
    },
    "attention": {
        "sdpa_in_region": """
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        """,
        "no_scale": """
            att = q @ k.transpose(-2, -1)
            att = att.masked_fill(~mask, float("-inf"))
            att = F.softmax(att, dim=-1)
            att = self.attn_dropout(att)
            y = att @ v
        """,
        "scale_by_hs": """
            att = (q @ k.transpose(-2, -1)) / hs
            att = att.masked_fill(~mask, float("-inf"))
            att = F.softmax(att, dim=-1)
            att = self.attn_dropout(att)
            y = att @ v
        """,
        "softmax_over_queries": """
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
            att = att.masked_fill(~mask, float("-inf"))
            att = F.softmax(att, dim=-2)
            att = self.attn_dropout(att)
            y = att @ v
        """,
        "mask_after_softmax": """
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
            att = F.softmax(att, dim=-1).masked_fill(~mask, 0.0)  # rows no longer sum to 1
            att = self.attn_dropout(att)
            y = att @ v
        """,
        "zero_not_minus_inf": """
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
            att = att.masked_fill(~mask, 0.0)  # exp(0) = 1: masked keys still get weight
            att = F.softmax(att, dim=-1)
            att = self.attn_dropout(att)
            y = att @ v
        """,
    },
    "kv_cache": {
        "returns_only_new": """
            T = k.size(2)
            self.kv[layer, 0, :, :, self.pos:self.pos + T] = k
            self.kv[layer, 1, :, :, self.pos:self.pos + T] = v
            return k, v
        """,
        "writes_at_zero": """
            T = k.size(2)
            self.kv[layer, 0, :, :, :T] = k
            self.kv[layer, 1, :, :, :T] = v
            return self.kv[layer, 0, :, :, :self.pos + T], self.kv[layer, 1, :, :, :self.pos + T]
        """,
        "moves_pos": """
            T = k.size(2)
            self.kv[layer, 0, :, :, self.pos:self.pos + T] = k
            self.kv[layer, 1, :, :, self.pos:self.pos + T] = v
            self.pos += T  # GPT moves it once per forward, after every layer
            return self.kv[layer, 0, :, :, :self.pos], self.kv[layer, 1, :, :, :self.pos]
        """,
        "old_positions_only": """
            T = k.size(2)
            keys, values = self.kv[layer, 0, :, :, :self.pos], self.kv[layer, 1, :, :, :self.pos]
            self.kv[layer, 0, :, :, self.pos:self.pos + T] = k
            self.kv[layer, 1, :, :, self.pos:self.pos + T] = v
            return keys, values
        """,
        "k_and_v_swapped": """
            T = k.size(2)
            self.kv[layer, 0, :, :, self.pos:self.pos + T] = k
            self.kv[layer, 1, :, :, self.pos:self.pos + T] = v
            end = self.pos + T
            return self.kv[layer, 1, :, :, :end], self.kv[layer, 0, :, :, :end]
        """,
    },
    "response_mask": {
        "mask_not_shifted": """
            T = max(len(ids) for ids, _ in examples) - 1
            x = torch.full((len(examples), T), pad_id, dtype=torch.long)
            y = torch.full((len(examples), T), pad_id, dtype=torch.long)
            loss_mask, attention_mask = torch.zeros(len(examples), T), torch.zeros(len(examples), T, dtype=torch.long)
            for b, (ids, rmask) in enumerate(examples):
                n = len(ids) - 1
                x[b, :n], y[b, :n] = torch.tensor(ids[:-1]), torch.tensor(ids[1:])
                loss_mask[b, :n] = torch.tensor(rmask[:-1], dtype=torch.float)  # the input's flag, not the target's
                attention_mask[b, :n] = 1
            return x, y, loss_mask, attention_mask
        """,
        "left_padded": """
            T = max(len(ids) for ids, _ in examples) - 1
            x = torch.full((len(examples), T), pad_id, dtype=torch.long)
            y = torch.full((len(examples), T), pad_id, dtype=torch.long)
            loss_mask, attention_mask = torch.zeros(len(examples), T), torch.zeros(len(examples), T, dtype=torch.long)
            for b, (ids, rmask) in enumerate(examples):
                n = len(ids) - 1
                x[b, T - n:], y[b, T - n:] = torch.tensor(ids[:-1]), torch.tensor(ids[1:])
                loss_mask[b, T - n:] = torch.tensor(rmask[1:], dtype=torch.float)
                attention_mask[b, T - n:] = 1
            return x, y, loss_mask, attention_mask
        """,
        "trains_on_padding": """
            T = max(len(ids) for ids, _ in examples) - 1
            x = torch.full((len(examples), T), pad_id, dtype=torch.long)
            y = torch.full((len(examples), T), pad_id, dtype=torch.long)
            loss_mask, attention_mask = torch.ones(len(examples), T), torch.zeros(len(examples), T, dtype=torch.long)
            for b, (ids, rmask) in enumerate(examples):
                n = len(ids) - 1
                x[b, :n], y[b, :n] = torch.tensor(ids[:-1]), torch.tensor(ids[1:])
                loss_mask[b, :n] = torch.tensor(rmask[1:], dtype=torch.float)  # padding left at 1
                attention_mask[b, :n] = 1
            return x, y, loss_mask, attention_mask
        """,
        "attends_to_padding": """
            T = max(len(ids) for ids, _ in examples) - 1
            x = torch.full((len(examples), T), pad_id, dtype=torch.long)
            y = torch.full((len(examples), T), pad_id, dtype=torch.long)
            loss_mask, attention_mask = torch.zeros(len(examples), T), torch.ones(len(examples), T, dtype=torch.long)
            for b, (ids, rmask) in enumerate(examples):
                n = len(ids) - 1
                x[b, :n], y[b, :n] = torch.tensor(ids[:-1]), torch.tensor(ids[1:])
                loss_mask[b, :n] = torch.tensor(rmask[1:], dtype=torch.float)
            return x, y, loss_mask, attention_mask
        """,
        "trains_on_prompt": """
            T = max(len(ids) for ids, _ in examples) - 1
            x = torch.full((len(examples), T), pad_id, dtype=torch.long)
            y = torch.full((len(examples), T), pad_id, dtype=torch.long)
            loss_mask, attention_mask = torch.zeros(len(examples), T), torch.zeros(len(examples), T, dtype=torch.long)
            for b, (ids, rmask) in enumerate(examples):
                n = len(ids) - 1
                x[b, :n], y[b, :n] = torch.tensor(ids[:-1]), torch.tensor(ids[1:])
                loss_mask[b, :n] = 1.0  # every real target, the prompt's included
                attention_mask[b, :n] = 1
            return x, y, loss_mask, attention_mask
        """,
    },
    "rm_loss": {
        "sum_not_mean": """
            pairs = ranks_to_pairs(ranks)
            if not pairs:
                raise ValueError("no untied pair")
            w, l = torch.tensor(pairs, device=rewards.device).unbind(dim=1)
            return -F.logsigmoid(rewards[w] - rewards[l]).sum()
        """,
        "loser_minus_winner": """
            pairs = ranks_to_pairs(ranks)
            if not pairs:
                raise ValueError("no untied pair")
            w, l = torch.tensor(pairs, device=rewards.device).unbind(dim=1)
            return -F.logsigmoid(rewards[l] - rewards[w]).mean()
        """,
        "divides_by_all_pairs": """
            pairs = ranks_to_pairs(ranks)
            if not pairs:
                raise ValueError("no untied pair")
            w, l = torch.tensor(pairs, device=rewards.device).unbind(dim=1)
            k = len(rewards)
            return -F.logsigmoid(rewards[w] - rewards[l]).sum() / (k * (k - 1) / 2)  # C(K, 2), ties counted
        """,
        "ties_as_half": """
            k = len(rewards)
            terms = []
            for i in range(k):
                for j in range(i + 1, k):
                    d = rewards[i] - rewards[j]
                    if ranks[i] == ranks[j]:  # a tie as a 50/50 label
                        terms.append(-0.5 * (F.logsigmoid(d) + F.logsigmoid(-d)))
                    else:
                        terms.append(-F.logsigmoid(d if ranks[i] < ranks[j] else -d))
            if not terms:
                raise ValueError("no untied pair")
            return torch.stack(terms).mean()
        """,
        "no_error_when_all_tied": """
            pairs = ranks_to_pairs(ranks)
            if not pairs:
                return rewards.sum() * 0.0
            w, l = torch.tensor(pairs, device=rewards.device).unbind(dim=1)
            return -F.logsigmoid(rewards[w] - rewards[l]).mean()
        """,
        "hinge": """
            pairs = ranks_to_pairs(ranks)
            if not pairs:
                raise ValueError("no untied pair")
            w, l = torch.tensor(pairs, device=rewards.device).unbind(dim=1)
            return torch.relu(1.0 - (rewards[w] - rewards[l])).mean()  # a margin ranking loss, not eq. 1
        """,
    },
    "kl_reward": {
        "score_at_last_column": """
            kl = per_token_kl(logprobs, ref_logprobs, response_mask, estimator)
            rewards = -beta * kl
            rewards[:, -1] += score  # the last column, padding or not
            return rewards, kl
        """,
        "plus_beta": """
            kl = per_token_kl(logprobs, ref_logprobs, response_mask, estimator)
            rewards = beta * kl
            last = last_token_index(response_mask)
            rewards = rewards.scatter_add(1, last.unsqueeze(1), score.to(rewards.dtype).unsqueeze(1))
            return rewards, kl
        """,
        "kl_not_masked": """
            kl = logprobs - ref_logprobs
            rewards = -beta * kl
            last = last_token_index(response_mask)
            rewards = rewards.scatter_add(1, last.unsqueeze(1), score.to(rewards.dtype).unsqueeze(1))
            return rewards, kl
        """,
        "score_at_first_token": """
            kl = per_token_kl(logprobs, ref_logprobs, response_mask, estimator)
            rewards = -beta * kl
            first = response_mask.float().argmax(dim=-1)
            rewards = rewards.scatter_add(1, first.unsqueeze(1), score.to(rewards.dtype).unsqueeze(1))
            return rewards, kl
        """,
        "score_on_every_token": """
            kl = per_token_kl(logprobs, ref_logprobs, response_mask, estimator)
            rewards = (score.unsqueeze(1) - beta * kl) * response_mask
            return rewards, kl
        """,
        "ignores_estimator": """
            kl = per_token_kl(logprobs, ref_logprobs, response_mask)  # always k1
            rewards = -beta * kl
            last = last_token_index(response_mask)
            rewards = rewards.scatter_add(1, last.unsqueeze(1), score.to(rewards.dtype).unsqueeze(1))
            return rewards, kl
        """,
    },
    "gae": {
        "no_mask": """
            next_value = next_adv = torch.zeros_like(values[:, 0])
            advantages = torch.zeros_like(values)
            for t in reversed(range(values.shape[1])):
                delta = rewards[:, t] + gamma * next_value - values[:, t]
                advantages[:, t] = next_adv = delta + gamma * lam * next_adv
                next_value = values[:, t]
            return advantages, advantages + values
        """,
        "forward_in_time": """
            mask = response_mask.bool()
            zero = torch.zeros_like(values[:, 0])
            advantages, prev_adv = torch.zeros_like(values), zero
            for t in range(values.shape[1]):  # accumulates the past deltas instead of the future ones
                next_value = torch.where(mask[:, t + 1], values[:, t + 1], zero) if t + 1 < values.shape[1] else zero
                delta = rewards[:, t] + gamma * next_value - values[:, t]
                prev_adv = torch.where(mask[:, t], delta + gamma * lam * prev_adv, zero)
                advantages[:, t] = prev_adv
            return advantages, torch.where(mask, advantages + values, torch.zeros_like(values))
        """,
        "returns_are_advantages": """
            mask = response_mask.bool()
            zero = torch.zeros_like(values[:, 0])
            next_value, next_adv = zero, zero
            advantages = torch.zeros_like(values)
            for t in reversed(range(values.shape[1])):
                delta = rewards[:, t] + gamma * next_value - values[:, t]
                advantages[:, t] = torch.where(mask[:, t], delta + gamma * lam * next_adv, zero)
                next_value = torch.where(mask[:, t], values[:, t], zero)
                next_adv = advantages[:, t]
            return advantages, advantages.clone()
        """,
        "lam_without_gamma": """
            mask = response_mask.bool()
            zero = torch.zeros_like(values[:, 0])
            next_value, next_adv = zero, zero
            advantages = torch.zeros_like(values)
            for t in reversed(range(values.shape[1])):
                delta = rewards[:, t] + gamma * next_value - values[:, t]
                advantages[:, t] = torch.where(mask[:, t], delta + lam * next_adv, zero)  # gamma dropped here
                next_value = torch.where(mask[:, t], values[:, t], zero)
                next_adv = advantages[:, t]
            return advantages, torch.where(mask, advantages + values, torch.zeros_like(values))
        """,
        "bootstraps_from_padding": """
            mask = response_mask.bool()
            zero = torch.zeros_like(values[:, 0])
            next_value, next_adv = zero, zero
            advantages = torch.zeros_like(values)
            for t in reversed(range(values.shape[1])):
                delta = rewards[:, t] + gamma * next_value - values[:, t]
                advantages[:, t] = torch.where(mask[:, t], delta + gamma * lam * next_adv, zero)
                next_value = values[:, t]  # the padding's value leaks into the last token's delta
                next_adv = advantages[:, t]
            return advantages, torch.where(mask, advantages + values, torch.zeros_like(values))
        """,
    },
    "policy_loss": {
        "clamp_only": """
            mask = response_mask.bool()
            log_ratio = logprobs - old_logprobs
            ratio = torch.exp(log_ratio)
            clipped_ratio = torch.clamp(ratio, 1.0 - clip, 1.0 + clip)
            loss = masked_mean(-advantages * clipped_ratio, mask)
            with torch.no_grad():
                stats = {"ratio_mean": masked_mean(ratio, mask).item(),
                         "clipfrac": masked_mean((clipped_ratio != ratio).float(), mask).item(),
                         "approx_kl": masked_mean((ratio - 1) - log_ratio, mask).item()}
            return loss, stats
        """,
        "min_of_ratios": """
            mask = response_mask.bool()
            log_ratio = logprobs - old_logprobs
            ratio = torch.exp(log_ratio)
            r = torch.minimum(ratio, torch.clamp(ratio, 1.0 - clip, 1.0 + clip))  # right only when A > 0
            loss = masked_mean(-advantages * r, mask)
            with torch.no_grad():
                stats = {"ratio_mean": masked_mean(ratio, mask).item(),
                         "clipfrac": masked_mean((r != ratio).float(), mask).item(),
                         "approx_kl": masked_mean((ratio - 1) - log_ratio, mask).item()}
            return loss, stats
        """,
        "min_not_max": """
            mask = response_mask.bool()
            log_ratio = logprobs - old_logprobs
            ratio = torch.exp(log_ratio)
            unclipped = -advantages * ratio
            clipped = -advantages * torch.clamp(ratio, 1.0 - clip, 1.0 + clip)
            loss = masked_mean(torch.minimum(unclipped, clipped), mask)
            with torch.no_grad():
                stats = {"ratio_mean": masked_mean(ratio, mask).item(),
                         "clipfrac": masked_mean((clipped > unclipped).float(), mask).item(),
                         "approx_kl": masked_mean((ratio - 1) - log_ratio, mask).item()}
            return loss, stats
        """,
        "no_clip": """
            mask = response_mask.bool()
            log_ratio = logprobs - old_logprobs
            ratio = torch.exp(log_ratio)
            loss = masked_mean(-advantages * ratio, mask)  # the plain policy gradient surrogate
            with torch.no_grad():
                stats = {"ratio_mean": masked_mean(ratio, mask).item(), "clipfrac": 0.0,
                         "approx_kl": masked_mean((ratio - 1) - log_ratio, mask).item()}
            return loss, stats
        """,
        "unmasked_mean": """
            mask = response_mask.bool()
            log_ratio = logprobs - old_logprobs
            ratio = torch.exp(log_ratio)
            unclipped = -advantages * ratio
            clipped = -advantages * torch.clamp(ratio, 1.0 - clip, 1.0 + clip)
            loss = (torch.maximum(unclipped, clipped) * mask).mean()  # divides by every position
            with torch.no_grad():
                stats = {"ratio_mean": masked_mean(ratio, mask).item(),
                         "clipfrac": masked_mean((clipped > unclipped).float(), mask).item(),
                         "approx_kl": masked_mean((ratio - 1) - log_ratio, mask).item()}
            return loss, stats
        """,
        "inverted_ratio": """
            mask = response_mask.bool()
            log_ratio = old_logprobs - logprobs  # pi_old / pi
            ratio = torch.exp(log_ratio)
            unclipped = -advantages * ratio
            clipped = -advantages * torch.clamp(ratio, 1.0 - clip, 1.0 + clip)
            loss = masked_mean(torch.maximum(unclipped, clipped), mask)
            with torch.no_grad():
                stats = {"ratio_mean": masked_mean(ratio, mask).item(),
                         "clipfrac": masked_mean((clipped > unclipped).float(), mask).item(),
                         "approx_kl": masked_mean((ratio - 1) - log_ratio, mask).item()}
            return loss, stats
        """,
        "clipfrac_counts_both_sides": """
            mask = response_mask.bool()
            log_ratio = logprobs - old_logprobs
            ratio = torch.exp(log_ratio)
            unclipped = -advantages * ratio
            clipped = -advantages * torch.clamp(ratio, 1.0 - clip, 1.0 + clip)
            loss = masked_mean(torch.maximum(unclipped, clipped), mask)
            with torch.no_grad():
                outside = (ratio < 1.0 - clip) | (ratio > 1.0 + clip)  # also where the clip does not bind
                stats = {"ratio_mean": masked_mean(ratio, mask).item(),
                         "clipfrac": masked_mean(outside.float(), mask).item(),
                         "approx_kl": masked_mean((ratio - 1) - log_ratio, mask).item()}
            return loss, stats
        """,
    },
    "dpo_loss": {
        "no_reference": """
            margin = beta * (policy_chosen - policy_rejected)
            loss = -F.logsigmoid(margin).mean()
            chosen, rejected = beta * policy_chosen, beta * policy_rejected
            with torch.no_grad():
                stats = {"margin": margin.mean().item(), "accuracy": (margin > 0).float().mean().item(),
                         "chosen_reward": chosen.mean().item(), "rejected_reward": rejected.mean().item()}
            return loss, stats
        """,
        "no_beta": """
            chosen = policy_chosen - ref_chosen
            rejected = policy_rejected - ref_rejected
            margin = chosen - rejected
            loss = -F.logsigmoid(margin).mean()
            with torch.no_grad():
                stats = {"margin": margin.mean().item(), "accuracy": (margin > 0).float().mean().item(),
                         "chosen_reward": chosen.mean().item(), "rejected_reward": rejected.mean().item()}
            return loss, stats
        """,
        "rewards_negated": """
            chosen = beta * (ref_chosen - policy_chosen)  # the margin comes out right, the stats do not
            rejected = beta * (ref_rejected - policy_rejected)
            margin = rejected - chosen
            loss = -F.logsigmoid(margin).mean()
            with torch.no_grad():
                stats = {"margin": margin.mean().item(), "accuracy": (margin > 0).float().mean().item(),
                         "chosen_reward": chosen.mean().item(), "rejected_reward": rejected.mean().item()}
            return loss, stats
        """,
        "sum_not_mean": """
            chosen = beta * (policy_chosen - ref_chosen)
            rejected = beta * (policy_rejected - ref_rejected)
            margin = chosen - rejected
            loss = -F.logsigmoid(margin).sum()
            with torch.no_grad():
                stats = {"margin": margin.mean().item(), "accuracy": (margin > 0).float().mean().item(),
                         "chosen_reward": chosen.mean().item(), "rejected_reward": rejected.mean().item()}
            return loss, stats
        """,
        "sigmoid_not_logsigmoid": """
            chosen = beta * (policy_chosen - ref_chosen)
            rejected = beta * (policy_rejected - ref_rejected)
            margin = chosen - rejected
            loss = -torch.sigmoid(margin).mean()  # same gradient sign, wrong loss
            with torch.no_grad():
                stats = {"margin": margin.mean().item(), "accuracy": (margin > 0).float().mean().item(),
                         "chosen_reward": chosen.mean().item(), "rejected_reward": rejected.mean().item()}
            return loss, stats
        """,
    },
    "steering": {
        "all_positions": """
            def add(mod, args, out):
                return out + multiplier * vector  # every position, the prompt's too
            handle = blocks(model)[layer].register_forward_hook(add)
        """,
        "strictly_after_start": """
            def add(mod, args, out):
                kv_cache = args[3] if len(args) > 3 else None
                past, T = (kv_cache.pos if kv_cache is not None else 0), out.size(1)
                if start is None and kv_cache is None:
                    return out
                first = (past + T - 1 if past == 0 else past) if start is None else start
                cols = torch.arange(past, past + T, device=out.device)
                on = (cols[None, :] > torch.as_tensor(first).reshape(-1, 1)).float()[..., None]  # > , not >=
                return out + multiplier * on * vector
            handle = blocks(model)[layer].register_forward_hook(add)
        """,
        "no_multiplier": """
            def add(mod, args, out):
                kv_cache = args[3] if len(args) > 3 else None
                past, T = (kv_cache.pos if kv_cache is not None else 0), out.size(1)
                if start is None and kv_cache is None:
                    return out
                first = (past + T - 1 if past == 0 else past) if start is None else start
                on = steering_mask(torch.arange(past, past + T, device=out.device), first)
                return out + on * vector
            handle = blocks(model)[layer].register_forward_hook(add)
        """,
        "before_the_block": """
            def add(mod, args):  # a pre-hook: the vector enters the block instead of leaving it
                x, kv_cache = args[0], args[3] if len(args) > 3 else None
                past, T = (kv_cache.pos if kv_cache is not None else 0), x.size(1)
                if start is None and kv_cache is None:
                    return None
                first = (past + T - 1 if past == 0 else past) if start is None else start
                on = steering_mask(torch.arange(past, past + T, device=x.device), first)
                return (x + multiplier * on * vector, *args[1:])
            handle = blocks(model)[layer].register_forward_pre_hook(add)
        """,
        "every_layer": """
            def add(mod, args, out):
                kv_cache = args[3] if len(args) > 3 else None
                past, T = (kv_cache.pos if kv_cache is not None else 0), out.size(1)
                if start is None and kv_cache is None:
                    return out
                first = (past + T - 1 if past == 0 else past) if start is None else start
                on = steering_mask(torch.arange(past, past + T, device=out.device), first)
                return out + multiplier * on * vector
            handles = [b.register_forward_hook(add) for b in blocks(model)]  # every block, not block `layer`
            handle = handles[-1]
        """,
    },
}
