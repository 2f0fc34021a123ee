"""Masks and alignment: what position t of a per-token tensor holds, and statistics over a mask.

Alignment convention (the bug users hit most, so read this once):
every per-token tensor is (B, T) and position t holds the quantity for the
token AT position t of the sequence `tokens` (B, T):

    logprobs[:, t] = log pi(tokens[:, t] | tokens[:, :t])  read from logits[:, t-1]
    values[:, t]   = V(s_t), s_t = tokens[:, :t]           read from hidden[:, t-1]
    rewards[:, t], advantages[:, t], returns[:, t]         for emitting tokens[:, t]

Column 0 has no predecessor, so it holds 0 (it is always a prompt token).
`token_logprobs` and `align_values` do this shift; everything else assumes it.
`response_mask` (B, T) is 1 on the tokens the policy sampled (response up to
and including the end token) and 0 on prompt and padding, whatever the
padding side (generate.py draws the layout). Masked-out positions may hold anything,
even NaN: they are selected away with torch.where, never multiplied by 0.

Example:
    lp = token_logprobs(model(tokens), tokens)            # (B, T), column 0 is 0
    masked_mean(lp, response_mask)                        # mean log-prob of the sampled tokens
    last_token_index(response_mask)                       # (B,) column of each response's last token
"""
import torch
import torch.nn.functional as F

# -----------------------------------------------------------------------------
# alignment helpers


def token_logprobs(logits, tokens, temperature=1.0):
    """logprobs[:, t] = log softmax(logits[:, t-1] / temperature)[tokens[:, t]]; column 0 is 0.

    Example: logits (B, T, V) from model(tokens); returns (B, T).
    """
    logp = F.log_softmax(logits[:, :-1].float() / temperature, dim=-1)  # (B, T-1, V)
    lp = logp.gather(-1, tokens[:, 1:].unsqueeze(-1)).squeeze(-1)  # (B, T-1)
    return F.pad(lp, (1, 0))  # (B, T): column 0 has no predecessor


def align_values(head_out):
    """values[:, t] = head_out[:, t-1], the value read before token t is emitted; column 0 is 0."""
    return F.pad(head_out[:, :-1], (1, 0))  # (B, T)


def last_token_index(response_mask):
    """Column of the last response token in each row, whatever the padding side.  # (B,)"""
    mask = response_mask.bool()
    if not mask.any(dim=-1).all():
        raise ValueError("every row needs at least one response token")
    cols = torch.arange(mask.shape[-1], device=mask.device).expand_as(mask)
    return torch.where(mask, cols, -1).amax(dim=-1)  # (B,)


# -----------------------------------------------------------------------------
# masked statistics: equal the plain statistic on x[mask]


def masked_sum(x, mask, dim=None):
    """Sum of x over positions where mask is true (over `dim`, or everything)."""
    mask = mask.bool()
    picked = torch.where(mask, x, torch.zeros_like(x))
    return picked.sum() if dim is None else picked.sum(dim)


def masked_mean(x, mask, dim=None):
    """Mean of x over positions where mask is true."""
    return masked_sum(x, mask, dim) / masked_sum(torch.ones_like(x), mask, dim)


def masked_var(x, mask, unbiased=True):
    """Variance of x[mask] (one number); unbiased divides by n - 1 like torch.var."""
    mask = mask.bool()
    n = mask.sum()
    if unbiased and n < 2:
        raise ValueError(f"unbiased masked_var needs at least 2 valid entries, got {int(n)}")
    centered = x - masked_mean(x, mask)
    var = masked_mean(centered**2, mask)
    return var * n / (n - 1) if unbiased else var


def masked_whiten(x, mask, shift_mean=True, eps=1e-8):
    """(x - mean) / std over x[mask]; masked-out positions come back as 0.

    shift_mean=False keeps the mean (used for rewards: scale only, keep sign).
    """
    mask = mask.bool()
    mean = masked_mean(x, mask)
    whitened = (x - mean) * torch.rsqrt(masked_var(x, mask) + eps)
    if not shift_mean:
        whitened = whitened + mean
    return torch.where(mask, whitened, torch.zeros_like(whitened))
