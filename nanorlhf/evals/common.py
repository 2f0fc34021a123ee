"""Helpers every safety and capability suite shares: benchmark items, batched answers, log-probs, tables, figures.

Two ways to ask a model (InstructGPT §4 compares both):
  - `chat_answers`: the instruction in the chat format, the way every aligned
    policy is used and the bare "GPT" baseline of Figure 1;
  - `doc_answers`: the item written as a pretraining document (its `doc_prompt`,
    e.g. "Quiz with answers:\\nQ: ...\\nA:"), the base model's few-shot baseline;
    the answer is the continuation's first line.

Example:
    rows = bench_items(ctx, "hedging")                          # a seeded sample of ctx.n items
    texts = chat_answers(model, tok, [r["text"] for r in rows], 24, greedy=True)
    lp, n = continuation_logprobs(model, [tok.encode("Story:\\n")], [tok.encode(" Pip ran.")])
    print(md_table(["model", "rate"], [["sft", pct(0.25)]]))  # | model | rate |  ...  | sft | 25.0% |
"""
from __future__ import annotations

import json
import os
import random

import torch

from nanorlhf.evals.knowledge import complete
from nanorlhf.generate import SamplingConfig, generate, response_texts, sequence_logprobs
from nanorlhf.world.judge import world_of

ORDER = ("gpt", "sft", "ppo", "ppo_ptx")


# ----------------------------------------------------------------------------
# which policies, which items


def policy_names(ctx, only: tuple[str, ...] | None = None) -> list[str]:
    """Policies to put in a per-model table: the standard ones first, never mid-training ("ppo@20") ones."""
    names = [n for n in ctx.policies if "@" not in n and (only is None or n in only)]
    return sorted(names, key=lambda n: (ORDER.index(n) if n in ORDER else len(ORDER), n))


def bench_items(ctx, suite: str, n: int | None = None) -> list[dict]:
    """A seeded sample of n (default ctx.n) items of benchmarks/<suite>.jsonl, in file order.

    Sampling, not the first n: some files are written category by category. A folder without the file
    (written before its suite existed) gets the items from the world it was built from.
    """
    path = os.path.join(ctx.data_dir, "benchmarks", f"{suite}.jsonl")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            items = [json.loads(line) for line in f if line.strip()]
    else:  # a data folder written before the suite existed: the world rebuilds it (the same items)
        items = world_of(ctx.data_dir).benchmarks[suite]
    n = min(ctx.n if n is None else n, len(items))
    keep = sorted(random.Random(f"{suite}-{ctx.seed}").sample(range(len(items)), n))
    return [items[i] for i in keep]


# ----------------------------------------------------------------------------
# asking a model


@torch.no_grad()
def chat_answers(model, tok, prompts: list[str], max_new_tokens: int, *, greedy: bool = False, seed: int = 0,
                 batch: int = 256) -> list[str]:
    """One response per prompt in the chat format; a prompt too long loses its start, never the turn tokens."""
    room = model.cfg.block_size - max_new_tokens - 2
    gen, out = torch.Generator().manual_seed(seed), []
    for i in range(0, len(prompts), batch):
        ids = [[tok.user_id] + tok.encode(p)[-room:] + [tok.assistant_id] for p in prompts[i:i + batch]]
        ro = generate(model, ids, SamplingConfig(max_new_tokens=max_new_tokens, greedy=greedy), stop_token=tok.eot_id,
                      pad_id=tok.pad_id, generator=gen)
        out += response_texts(ro, tok)
    return out


def doc_answers(model, tok, docs: list[str], max_new_tokens: int, *, greedy: bool = True, seed: int = 0,
                batch: int = 256) -> list[str]:
    """First line of each plain-text continuation (the pretraining format: no chat tokens)."""
    return [c.split("\n")[0].strip() for c in complete(model, tok, docs, max_new_tokens, batch, greedy, seed)]


@torch.no_grad()
def continuation_logprobs(model, contexts: list[list[int]], continuations: list[list[int]],
                          batch: int = 256) -> tuple[torch.Tensor, torch.Tensor]:
    """(sum of log p(continuation | context), continuation length) per row: (B,), (B,).

    Rows are right-padded; a row too long for the context window loses the start of its context.
    """
    T_max = model.cfg.block_size
    sums, lens = [], []
    for i in range(0, len(contexts), batch):
        rows = [(c + k)[-T_max:] for c, k in zip(contexts[i:i + batch], continuations[i:i + batch])]
        n_cont = [min(len(k), T_max - 1) for k in continuations[i:i + batch]]
        T = max(len(r) for r in rows)
        tokens = torch.zeros(len(rows), T, dtype=torch.long)
        attention_mask = torch.zeros(len(rows), T, dtype=torch.long)
        cont_mask = torch.zeros(len(rows), T)                     # 1 on the continuation's tokens
        for j, (r, n) in enumerate(zip(rows, n_cont)):
            tokens[j, :len(r)] = torch.tensor(r)
            attention_mask[j, :len(r)] = 1
            cont_mask[j, len(r) - n:len(r)] = 1
        dev = next(model.parameters()).device
        lp = sequence_logprobs(model, tokens.to(dev), attention_mask.to(dev)).cpu()  # (B, T)
        sums.append((lp * cont_mask).sum(1))
        lens.append(cont_mask.sum(1))
    return torch.cat(sums), torch.cat(lens)


# ----------------------------------------------------------------------------
# tables and figures


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def md_table(header: list[str], rows: list[list]) -> str:
    """A markdown table: one header row, one row per list."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def new_figure(n_panels: int = 1, width: float = 4.5, height: float = 3.2):
    """(fig, list of axes) from matplotlib's Agg backend: no display needed."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, n_panels, figsize=(width * n_panels, height), squeeze=False)
    return fig, list(axes[0])


def save_figure(fig, ctx, name: str) -> str:
    """Write ctx.out_dir/name (infra/metrics.py save_figure: no empty panel, markers on short series, legends
    below their panels); returns name (figure paths are relative to the report's folder)."""
    from nanorlhf.infra.metrics import save_figure as save
    os.makedirs(ctx.out_dir, exist_ok=True)
    save(fig, os.path.join(ctx.out_dir, name))
    return name


def grouped_bars(ax, groups: list[str], series: dict[str, list[float]], ylabel: str = "", title: str = ""):
    """Bars of each series side by side within each group (e.g. models within instructions)."""
    width = 0.8 / max(1, len(series))
    for k, (name, vals) in enumerate(series.items()):
        ax.bar([g + k * width for g in range(len(groups))], vals, width, label=name)
    ax.set_xticks([g + 0.4 - width / 2 for g in range(len(groups))])
    ax.set_xticklabels(groups)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=7)


def rate_errorbar(ax, xs: list, rates: list[dict], **kw):
    """Points of rates ({"rate", "lo", "hi"}) at xs with their intervals as error bars."""
    ys = [r["rate"] for r in rates]
    ax.errorbar(xs, ys, yerr=[[y - r["lo"] for y, r in zip(ys, rates)], [r["hi"] - y for y, r in zip(ys, rates)]],
                capsize=3, **kw)
