"""Wrong-but-plausible solutions: the losses and PPO's pieces (see __init__.py)."""

WRONG: dict[str, dict[str, str]] = {
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
            if estimator not in ("k1", "k3"):
                raise ValueError(estimator)
            kl = logprobs - ref_logprobs
            kl = torch.expm1(-kl) + kl if estimator == "k3" else kl
            kl = torch.where(response_mask.bool(), kl, torch.zeros_like(kl))
            rewards = -beta * kl
            rewards[:, -1] += score  # the last column, padding or not
            return rewards, kl
        """,
        "plus_beta": """
            if estimator not in ("k1", "k3"):
                raise ValueError(estimator)
            kl = logprobs - ref_logprobs
            kl = torch.expm1(-kl) + kl if estimator == "k3" else kl
            kl = torch.where(response_mask.bool(), kl, torch.zeros_like(kl))
            rewards = beta * kl
            last = last_token_index(response_mask)
            rewards = rewards.scatter_add(1, last.unsqueeze(1), score.to(rewards.dtype).unsqueeze(1))
            return rewards, kl
        """,
        "kl_not_masked": """
            if estimator not in ("k1", "k3"):
                raise ValueError(estimator)
            kl = logprobs - ref_logprobs
            kl = torch.expm1(-kl) + kl if estimator == "k3" else kl  # not masked
            rewards = -beta * kl
            last = last_token_index(response_mask)
            rewards = rewards.scatter_add(1, last.unsqueeze(1), score.to(rewards.dtype).unsqueeze(1))
            return rewards, kl
        """,
        "score_at_first_token": """
            if estimator not in ("k1", "k3"):
                raise ValueError(estimator)
            kl = logprobs - ref_logprobs
            kl = torch.expm1(-kl) + kl if estimator == "k3" else kl
            kl = torch.where(response_mask.bool(), kl, torch.zeros_like(kl))
            rewards = -beta * kl
            first = response_mask.float().argmax(dim=-1)
            rewards = rewards.scatter_add(1, first.unsqueeze(1), score.to(rewards.dtype).unsqueeze(1))
            return rewards, kl
        """,
        "score_on_every_token": """
            if estimator not in ("k1", "k3"):
                raise ValueError(estimator)
            kl = logprobs - ref_logprobs
            kl = torch.expm1(-kl) + kl if estimator == "k3" else kl
            kl = torch.where(response_mask.bool(), kl, torch.zeros_like(kl))
            rewards = (score.unsqueeze(1) - beta * kl) * response_mask
            return rewards, kl
        """,
        "ignores_estimator": """
            if estimator not in ("k1", "k3"):
                raise ValueError(estimator)
            kl = torch.where(response_mask.bool(), logprobs - ref_logprobs, torch.zeros_like(logprobs))  # always k1
            rewards = -beta * kl
            last = last_token_index(response_mask)
            rewards = rewards.scatter_add(1, last.unsqueeze(1), score.to(rewards.dtype).unsqueeze(1))
            return rewards, kl
        """,
    },
    "gae": {
        "mask_by_multiplying": """
            m = response_mask.to(values.dtype)
            r, v = rewards * m, values * m  # 0 * nan is nan: junk off the mask leaks as NaN
            next_value = next_adv = torch.zeros_like(values[:, 0])
            advantages = torch.zeros_like(values)
            for t in reversed(range(values.shape[1])):
                delta = r[:, t] + gamma * next_value - v[:, t]
                advantages[:, t] = (delta + gamma * lam * next_adv) * m[:, t]
                next_value, next_adv = v[:, t], advantages[:, t]
            return advantages, (advantages + v) * m
        """,
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
        "clipfrac_above_only": """
            mask = response_mask.bool()
            log_ratio = logprobs - old_logprobs
            ratio = torch.exp(log_ratio)
            unclipped = -advantages * ratio
            clipped = -advantages * torch.clamp(ratio, 1.0 - clip, 1.0 + clip)
            loss = masked_mean(torch.maximum(unclipped, clipped), mask)
            with torch.no_grad():
                stats = {"ratio_mean": masked_mean(ratio, mask).item(),
                         "clipfrac": masked_mean((ratio > 1.0 + clip).float(), mask).item(),  # one side, any sign
                         "approx_kl": masked_mean((ratio - 1) - log_ratio, mask).item()}
            return loss, stats
        """,
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
        "loss_of_the_mean_margin": """
            chosen = beta * (policy_chosen - ref_chosen)
            rejected = beta * (policy_rejected - ref_rejected)
            margin = chosen - rejected
            loss = -F.logsigmoid(margin.mean())  # equal to the mean loss only when every margin is equal
            with torch.no_grad():
                stats = {"margin": margin.mean().item(), "accuracy": (margin > 0).float().mean().item(),
                         "chosen_reward": chosen.mean().item(), "rejected_reward": rejected.mean().item()}
            return loss, stats
        """,
        "stats_summed_over_pairs": """
            chosen = beta * (policy_chosen - ref_chosen)
            rejected = beta * (policy_rejected - ref_rejected)
            margin = chosen - rejected
            loss = -F.logsigmoid(margin).mean()
            with torch.no_grad():  # sums: equal to the means for one pair
                stats = {"margin": margin.sum().item(), "accuracy": (margin > 0).float().sum().item(),
                         "chosen_reward": chosen.sum().item(), "rejected_reward": rejected.sum().item()}
            return loss, stats
        """,
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
}
