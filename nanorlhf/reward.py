"""Reward-model loss and helpers (InstructGPT §3.5, eq. 1). The model is ScalarHeadModel in model.py.

A prompt comes with K completions and their `ranks` (K,) of ints (nanorlhf/rankings.py):
lower = better, equal = tie. Example: ranks [0, 2, 1, 1] says completion 0 is
best, 1 is worst, and 2 and 3 tie. Every untied pair (w, l) gives one term
log sigmoid(r_w - r_l); the C(K, 2) pairs of one prompt form ONE batch element.

Two ways in, one for each kind of input: `score_sequences` reads the RM on a token
batch (PPO's rollouts), `score_texts` on (prompt, completion) texts (everything else).

DEVIATION: the paper's rankings have no ties, so it divides by C(K, 2). We drop
tied pairs (they say nothing about which is better) and divide by the number
of untied pairs; with no ties that number is C(K, 2) and the loss is the paper's.
"""

import math
from dataclasses import dataclass, field
from typing import Callable, ClassVar

import torch
import torch.nn.functional as F

from nanorlhf.infra.config import check_values
from nanorlhf.infra.precision import round_up
from nanorlhf.rankings import every_ranking, ranking_to_pairs, ranking_to_ranks, ranks_to_pairs, usable


# -----------------------------------------------------------------------------
# hyperparameters


@dataclass(frozen=True)
class RewardConfig:
    """The RM fit's knobs (InstructGPT §3.5); train_rm.py's Config contains it, so each field is a flag of that
    script. What the labelers rank (K = 4..9 samples a prompt) is world/comparisons.py's CollectConfig."""
    lr: float = 3e-4
    """learning rate (cosine decay to lr/10)"""
    # DEVIATION: the paper trains its RM one epoch (more overfits at 6B); a 1M-parameter RM underfits in one
    # (docs/results.md, tried and dropped), and a third epoch adds about a point of accuracy over two
    epochs: int = 3
    """passes over the comparisons (paper: 1; one underfits at this label budget)"""
    batch_prompts: int = 8
    """prompts (each with all its K completions) per gradient step"""
    kway_batch: bool = True
    """each prompt's C(K, 2) pairs in one batch element (paper); False shuffles the pairs as separate items"""
    one_pass: bool = True
    """a step's completions scored together in length-sorted passes; False: one forward per prompt (the plain
    path, the same loss to float rounding: tests/test_trim.py)"""

    POSITIVE: ClassVar[tuple] = ("lr", "epochs", "batch_prompts")

    def __post_init__(self):
        check_values(self)


# -----------------------------------------------------------------------------
# the loss


def rm_ranking_loss(rewards, ranks):
    """InstructGPT eq. 1 for one prompt: -1/n_pairs * sum over untied pairs of log sigmoid(r_w - r_l).

    rewards (K,) are the RM scores of the K completions; ranks (K,) as above.
    Raises ValueError when every pair is tied (nothing to learn).
    """
    # BEGIN ASSIGNMENT rm_loss
    pairs = ranks_to_pairs(ranks)                                    # (winner, loser) index pairs; a tie gives none
    if not pairs:
        raise ValueError(f"ranking {list(map(int, ranks))} has no untied pair to learn from")
    winners, losers = torch.tensor(pairs, device=rewards.device).unbind(dim=1)   # (n_pairs,) each
    # InstructGPT eq. 1: loss = -1/C(K,2) * E[log sigma(r(x, y_w) - r(x, y_l))], over the untied pairs
    return -F.logsigmoid(rewards[winners] - rewards[losers]).mean()
    # END ASSIGNMENT rm_loss


def rm_batch_loss(rewards_list, ranks_list, weights=None):
    """Mean of rm_ranking_loss over prompts: each prompt is one batch element, as in the paper.

    rewards_list: list of (K_i,) tensors; K may differ between prompts. weights (optional,
    one per prompt) make it a weighted mean, e.g. to up-weight a person's own labels.
    """
    losses = torch.stack([rm_ranking_loss(r, k) for r, k in zip(rewards_list, ranks_list, strict=True)])
    if weights is None:
        return losses.mean()
    w = torch.as_tensor(weights, dtype=losses.dtype, device=losses.device)
    return (w * losses).sum() / w.sum()


@torch.no_grad()
def pairwise_accuracy(rewards, ranks):
    """Fraction of untied pairs where the winner scores strictly higher (equal scores count as wrong)."""
    pairs = ranks_to_pairs(ranks)
    if not pairs:
        raise ValueError(f"ranking {list(map(int, ranks))} has no untied pair to score")
    return sum(float(rewards[w] > rewards[l]) for w, l in pairs) / len(pairs)


@torch.no_grad()
def normalize_bias(reward_values_of_demonstrations):
    """InstructGPT §3.5: the bias b such that r(x, y_demo) - b averages 0 over labeler demonstrations.

    The RM's output has b subtracted from then on; this moves every score by the
    same amount, so the ranking loss (which sees only differences) does not change.
    """
    return torch.as_tensor(reward_values_of_demonstrations, dtype=torch.float64).mean().item()


def score_sequences(rm, tokens, attention_mask, response_mask, bias=0.0, at_last_token=True):
    """r(x, y) for each row of a token batch: the scalar head read at the last response token, minus the bias.  # (B,)

    tokens, attention_mask, response_mask (B, T), left or right padded. at_last_token=False is the
    ablation of a common bug: reading the final column, a pad for every shorter response.
    """
    from nanorlhf.masks import last_token_index
    out = rm(tokens, attention_mask=attention_mask)                    # (B, T)
    if not at_last_token:
        return out[:, -1] - bias                                       # (B,)
    last = last_token_index(response_mask)                             # (B,)
    return out.gather(1, last[:, None]).squeeze(1) - bias              # (B,)


# -----------------------------------------------------------------------------
# completions as RM inputs, and their scores


def encode_rows(tok, prompts: list[str], completions: list[str], block_size: int) -> list[tuple[list[int], int]]:
    """(tokens of prompt_i + completion_i + <|endoftext|>, the completion's token count) for each pair."""
    from nanorlhf.chat import chat_prompt
    encoded = {p: chat_prompt(tok, p) for p in set(prompts)}
    rows = []
    for prompt, c in zip(prompts, completions, strict=True):
        p = encoded[prompt]
        r = (tok.encode(c) + [tok.eot_id])[: max(1, block_size - len(p))]  # truncate long completions
        rows.append(((p + r)[-block_size:], len(r)))                         # and, if need be, the prompt's start
    return rows


def pad_rows(rows: list[tuple[list[int], int]], pad_id: int, block_size: int | None = None):
    """Right-padded (N, T) tokens, attention_mask, response_mask of encode_rows' rows.

    T is their longest; given block_size, rounded up to precision.SHAPE_MULTIPLE (at most block_size): fewer
    distinct shapes for bfloat16's kernels, the padding masked out like any other.
    """
    T = max(len(r) for r, _ in rows)
    T = T if block_size is None else round_up(T, cap=block_size)
    tokens = torch.full((len(rows), T), pad_id, dtype=torch.long)
    attention_mask = torch.zeros(len(rows), T, dtype=torch.long)
    response_mask = torch.zeros(len(rows), T, dtype=torch.long)
    for i, (r, n) in enumerate(rows):
        tokens[i, :len(r)] = torch.tensor(r)
        attention_mask[i, :len(r)] = 1
        response_mask[i, len(r) - n:len(r)] = 1
    return tokens, attention_mask, response_mask


def encode_texts(tok, prompts: list[str], completions: list[str], block_size: int):
    """Right-padded (N, T) tokens, attention_mask, response_mask of prompt_i + completion_i + <|endoftext|>."""
    return pad_rows(encode_rows(tok, prompts, completions, block_size), tok.pad_id)


def score_texts(rm, tok, prompts: list[str], texts: list[str], device, bias: float = 0.0,
                batch: int = 64) -> torch.Tensor:
    """r(x_i, y_i) for (prompt, completion) pairs, `batch` rows per forward pass.  # (N,)

    Differentiable (the RM fit calls it); wrap evaluation calls in torch.no_grad(). Batching
    changes only the speed: each row is right-padded and attends to its own tokens alone, so the
    rows go through the model shortest first (a pass pads to its own longest row, rounded up) and come back
    in the callers' order.
    """
    rows = encode_rows(tok, prompts, texts, rm.cfg.block_size)
    order = sorted(range(len(rows)), key=lambda i: len(rows[i][0]))
    out = []
    for i in range(0, len(rows), batch):
        passed = pad_rows([rows[j] for j in order[i:i + batch]], tok.pad_id, rm.cfg.block_size)
        t, a, r = (x.to(device) for x in passed)
        out.append(score_sequences(rm, t, a, r, bias))
    if not out:
        return torch.zeros(0, device=device)
    back = torch.empty(len(rows), dtype=torch.long)
    back[torch.tensor(order)] = torch.arange(len(rows))  # back[i]: where row i's score sits in the sorted order
    return torch.cat(out)[back.to(device)]


def comparison_texts(comparisons: list[dict]) -> tuple[list[str], list[str], list[int]]:
    """The (prompt, completion) rows of every comparison, flattened, and each comparison's K."""
    prompts = [c["prompt"] for c in comparisons for _ in c["completions"]]
    texts = [x for c in comparisons for x in c["completions"]]
    return prompts, texts, [len(c["completions"]) for c in comparisons]


# -----------------------------------------------------------------------------
# one epoch of RM training


@dataclass
class RMFit:
    """Where an RM fit stands, enough to continue it exactly (train_rm.py --resume), and its hooks."""
    step: int = 0
    """gradient steps done"""
    epoch: int = 0
    """the epoch the step is in"""
    order_state: torch.Tensor | None = None
    """the batch-order generator's state at the start of that epoch (None: the seed's)"""
    losses: list = field(default_factory=list)
    """every step's loss so far"""
    accs: list = field(default_factory=list)
    """every step's pairwise accuracy so far"""
    optim: dict | None = None
    """the optimiser's state"""
    save: Callable | None = None
    """save(fit) after every `every`-th step and the last (a resume point)"""
    every: int = 0
    validate: Callable | None = None
    """validate() -> the validation accuracy, logged as val/accuracy before the first step and after each fifth
    of them, in eval mode and without gradients (it draws no random numbers: the fit is unchanged)"""

    def state(self) -> dict:
        """The fields a resume point keeps (all but the hooks)."""
        return {k: getattr(self, k) for k in ("step", "epoch", "order_state", "losses", "accs", "optim")}


def fit_reward_model(rm, tok, comparisons: list[dict], hp: RewardConfig, *, seed: int, log=None, chunk: int = 16,
                     fit: RMFit | None = None) -> list[float]:
    """InstructGPT §3.5: each prompt's K-way ranking is ONE batch element (shuffling pairs overfits).

    hp.one_pass scores all the step's completions (every prompt's K) together, in length-sorted forward
    passes of `chunk` rows; False runs one forward per prompt (the plain path; the same loss to float rounding).
    A non-finite step is skipped and counted; 3 in a row stop the fit, as does an epoch of zero gradients
    (nanorlhf/infra/guard.py). With a log, progress lines are printed too. `fit` continues an earlier fit
    exactly (its batch order, optimiser and losses), saves resume points and logs validation accuracy
    (RMFit's hooks); the losses of every step return.
    """
    from nanorlhf.infra.guard import NonFiniteGuard
    from nanorlhf.infra.metrics import Progress
    from nanorlhf.infra.optim import clip_grad, cosine_lr, make_optimizer, set_lr
    train, lr, batch_prompts, fit = usable(comparisons), hp.lr, hp.batch_prompts, fit or RMFit()
    device = next(rm.parameters()).device
    opt = make_optimizer(rm, lr, weight_decay=0.0)
    if fit.optim is not None:
        opt.load_state_dict(fit.optim)
    g = torch.Generator().manual_seed(seed)
    if fit.order_state is not None:
        g.set_state(fit.order_state)
    per_epoch = math.ceil(len(train) / batch_prompts)
    steps = hp.epochs * per_epoch
    bar, losses, accs, step = Progress(steps, "rm", fit.step), fit.losses, fit.accs, fit.step
    guard, every = NonFiniteGuard(max_consecutive=3), max(1, min(10, steps // 20))

    def check(step: int) -> None:
        if fit.validate is not None and log is not None and (step == 0 or 5 * step // steps > 5 * (step - 1) // steps):
            rm.eval()
            with torch.no_grad():
                log.write(step, **{"val/accuracy": fit.validate()})
            rm.train()
    rm.train()
    if step == 0:
        check(0)
    for epoch in range(fit.epoch, hp.epochs):
        order_state = g.get_state()
        for idx in torch.randperm(len(train), generator=g).split(batch_prompts)[step - epoch * per_epoch:]:
            set_lr(opt, cosine_lr(step, steps, lr, warmup=max(1, steps // 20), min_lr=lr / 10))
            batch = [train[i] for i in idx.tolist()]
            if hp.one_pass:
                prompts, texts, ks = comparison_texts(batch)
                rewards = list(score_texts(rm, tok, prompts, texts, device, batch=chunk).split(ks))  # (K_i,) each
            else:
                rewards = [score_texts(rm, tok, [c["prompt"]] * len(c["completions"]), c["completions"], device)
                           for c in batch]                                                             # (K_i,) each
            loss = rm_batch_loss(rewards, [ranking_to_ranks(c["ranking"]) for c in batch],
                                 [c.get("weight", 1.0) for c in batch])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if guard.check(loss=loss, grad_norm=clip_grad(rm, 1.0)):
                opt.step()
            step += 1
            losses.append(loss.item())
            accs.append(sum(pairwise_accuracy(r.detach(), ranking_to_ranks(c["ranking"]))
                            for r, c in zip(rewards, batch)) / len(batch))
            if log is not None and step % every == 0:  # means over the last `every` steps: a curve of 20+ points
                log.write(step, **{"rm/loss": sum(losses[-every:]) / every, "rm/accuracy": sum(accs[-every:]) / every})
            if log is not None and bar.due(step):
                print(bar.line(step, loss=sum(losses[-20:]) / len(losses[-20:])))
            check(step)
            if step == (epoch + 1) * per_epoch:
                guard.end_epoch(f"RM epoch {epoch + 1}")  # before its last step's resume point is saved
            if fit.save is not None and ((fit.every and step % fit.every == 0) or step == steps):
                fit.step, fit.epoch, fit.order_state, fit.optim = step, epoch, order_state, opt.state_dict()
                fit.save(fit)
    rm.eval()
    return losses


@torch.no_grad()
def demo_bias(rm, tok, demos: list[dict], device) -> float:
    """InstructGPT §3.5: the bias that makes the labelers' demonstrations score 0 on average."""
    return normalize_bias(score_texts(rm, tok, [d["prompt"] for d in demos], [d["response"] for d in demos],
                                      device).tolist())


@torch.no_grad()
def ranking_counts(rm, tok, comparisons: list[dict], device, key: str = "ranking",
                   every: bool = False) -> list[tuple[int, int]]:
    """Per comparison row, (pairs the RM orders as the ranking does, pairs; (0, 0) where every pair ties): the
    counts behind ranking_accuracy, kept apart so that an interval can resample rows.

    key: the ranking to score against; every: against every ranking a row carries instead (rankings.every_ranking:
    on validation rows its labeler's, a second labeler's and each group's), scored once, for a tighter figure.
    """
    rankings = every_ranking if every else (lambda c: [c[key]])
    scored = [i for i, c in enumerate(comparisons) if any(ranking_to_pairs(r) for r in rankings(c))]
    prompts, texts, ks = comparison_texts([comparisons[i] for i in scored])
    out = [(0, 0)] * len(comparisons)
    for i, r in zip(scored, score_texts(rm, tok, prompts, texts, device).split(ks)):  # length-sorted passes
        r = r.tolist()  # one device sync a prompt, not one a pair
        pairs = [p for ranking in rankings(comparisons[i]) for p in ranking_to_pairs(ranking)]
        out[i] = (sum(int(r[w] > r[lo]) for w, lo in pairs), len(pairs))
    return out


def ranking_accuracy(rm, tok, comparisons: list[dict], device, key: str = "ranking", every: bool = False) -> float:
    """Pairwise accuracy of the RM over all untied pairs of the comparisons (pairs pooled; ranking_counts)."""
    counts = ranking_counts(rm, tok, comparisons, device, key, every)
    return sum(k for k, _ in counts) / max(sum(n for _, n in counts), 1)
