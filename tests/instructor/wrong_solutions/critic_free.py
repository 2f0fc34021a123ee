"""Wrong-but-plausible solutions and correct variants of the critic-free assignments (see __init__.py)."""

WRONG: dict[str, dict[str, str]] = {
    "group_advantages": {
        "batch_mean_not_group": """
            if estimator not in ("grpo", "dr_grpo", "rloo", "reinforce_baseline"):
                raise ValueError(estimator)
            centred = rewards - rewards.mean()
            if estimator == "grpo":
                return centred / (rewards.std() + eps)
            if estimator == "rloo":
                return centred * rewards.size(1) / (rewards.size(1) - 1)
            return centred
        """,
        "rloo_includes_itself": """
            G, mean = rewards.size(1), rewards.mean(dim=1, keepdim=True)
            if estimator == "grpo":
                return (rewards - mean) / (rewards.std(dim=1, keepdim=True) + eps)
            if estimator in ("dr_grpo", "rloo"):
                return rewards - mean
            if estimator == "reinforce_baseline":
                c = rewards - mean
                return (c - c.mean()) / (c.std() + eps)
            raise ValueError(estimator)
        """,
        "grpo_biased_std": """
            G, mean = rewards.size(1), rewards.mean(dim=1, keepdim=True)
            if estimator == "grpo":
                return (rewards - mean) / (rewards.std(dim=1, keepdim=True, unbiased=False) + eps)
            if estimator == "dr_grpo":
                return rewards - mean
            if estimator == "rloo":
                return rewards - (rewards.sum(dim=1, keepdim=True) - rewards) / (G - 1)
            if estimator == "reinforce_baseline":
                c = rewards - mean
                return (c - c.mean()) / (c.std() + eps)
            raise ValueError(estimator)
        """,
        "reinforce_whitens_the_raw_rewards": """
            G, mean = rewards.size(1), rewards.mean(dim=1, keepdim=True)
            if estimator == "grpo":
                return (rewards - mean) / (rewards.std(dim=1, keepdim=True) + eps)
            if estimator == "dr_grpo":
                return rewards - mean
            if estimator == "rloo":
                return rewards - (rewards.sum(dim=1, keepdim=True) - rewards) / (G - 1)
            if estimator == "reinforce_baseline":
                return (rewards - rewards.mean()) / (rewards.std() + eps)
            raise ValueError(estimator)
        """,
        "dr_grpo_keeps_the_std": """
            G, mean = rewards.size(1), rewards.mean(dim=1, keepdim=True)
            if estimator in ("grpo", "dr_grpo"):
                return (rewards - mean) / (rewards.std(dim=1, keepdim=True) + eps)
            if estimator == "rloo":
                return rewards - (rewards.sum(dim=1, keepdim=True) - rewards) / (G - 1)
            if estimator == "reinforce_baseline":
                c = rewards - mean
                return (c - c.mean()) / (c.std() + eps)
            raise ValueError(estimator)
        """,
    },
    "aggregate": {
        "seq_mean_by_batch_tokens": """
            mask = response_mask.bool()
            if mode == "token_mean" or mode == "seq_mean":
                return masked_sum(per_token, mask) / (mask.sum() if n_tokens is None else n_tokens)
            if mode == "constant":
                if constant is None:
                    raise ValueError("constant")
                return masked_sum(per_token, mask) / ((n_responses or per_token.size(0)) * constant)
            raise ValueError(mode)
        """,
        "multiplies_by_the_mask": """
            m = response_mask.to(per_token.dtype)
            if mode == "seq_mean":
                per_seq = (per_token * m).sum(1) / m.sum(1).clamp(min=1)
                return per_seq.mean() if n_responses is None else per_seq.sum() / n_responses
            if mode == "token_mean":
                return (per_token * m).sum() / (m.sum() if n_tokens is None else n_tokens)
            if mode == "constant":
                if constant is None:
                    raise ValueError("constant")
                return (per_token * m).sum() / ((n_responses or per_token.size(0)) * constant)
            raise ValueError(mode)
        """,
        "ignores_the_totals": """
            mask = response_mask.bool()
            if mode == "seq_mean":
                return (masked_sum(per_token, mask, dim=1) / mask.sum(dim=1).clamp(min=1)).mean()
            if mode == "token_mean":
                return masked_sum(per_token, mask) / mask.sum().clamp(min=1)
            if mode == "constant":
                if constant is None:
                    raise ValueError("constant")
                return masked_sum(per_token, mask) / (per_token.size(0) * constant)
            raise ValueError(mode)
        """,
        "constant_divides_by_tokens": """
            mask = response_mask.bool()
            if mode == "seq_mean":
                per_seq = masked_sum(per_token, mask, dim=1) / mask.sum(dim=1).clamp(min=1)
                return per_seq.mean() if n_responses is None else per_seq.sum() / n_responses
            if mode in ("token_mean", "constant"):
                return masked_sum(per_token, mask) / (mask.sum().clamp(min=1) if n_tokens is None else n_tokens)
            raise ValueError(mode)
        """,
    },
}

RIGHT: dict[str, dict[str, str]] = {
    "group_advantages": {
        "loops_over_groups": """
            if estimator not in ("grpo", "dr_grpo", "rloo", "reinforce_baseline"):
                raise ValueError(f"unknown estimator {estimator!r}")
            rows = []
            for r in rewards:
                G, m = len(r), r.mean()
                if estimator == "grpo":
                    rows.append((r - m) / (r.std() + eps))
                elif estimator == "rloo":
                    rows.append(G / (G - 1) * (r - m))
                else:
                    rows.append(r - m)
            out = torch.stack(rows)
            if estimator == "reinforce_baseline":
                out = (out - out.mean()) / (out.std() + eps)
            return out
        """,
    },
    "aggregate": {
        "weights": """
            mask = response_mask.bool()
            B = per_token.size(0) if n_responses is None else n_responses
            x = torch.where(mask, per_token, torch.zeros_like(per_token))
            count = mask.to(per_token.dtype)                  # counts in the losses' precision, not float32's
            if mode == "seq_mean":
                w = 1.0 / (count.sum(dim=1, keepdim=True).clamp(min=1) * B)
            elif mode == "token_mean":
                w = 1.0 / (count.sum() if n_tokens is None else n_tokens)
            elif mode == "constant":
                if constant is None:
                    raise ValueError("the constant aggregation needs the constant")
                w = 1.0 / (B * constant)
            else:
                raise ValueError(f"unknown mode {mode!r}")
            return (x * w).sum()
        """,
    },
}
