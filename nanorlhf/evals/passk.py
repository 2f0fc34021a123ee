"""Pass@k on held-out verifiable tasks: does RL sharpen pass@1 while the SFT model covers more at large k?

Yue et al. 2025 ("Does reinforcement learning really incentivize reasoning capacity...") report that RL with
verifiable rewards raises pass@1 but that the base model solves as many tasks or more at large k: RL narrows
the sampling distribution onto answers the base model could already reach. Here: the test prompts a rule can
check (world/verifiers.py), n samples each per policy, and the unbiased estimator of Chen et al. 2021,

    pass@k = E_tasks[ 1 - C(n - c, k) / C(n, k) ],   c = the task's n samples that pass

with the difference between two policies at pass@1 and at the largest k, each paired over tasks (a bootstrap
interval).

Example:
    pass_at_k(16, 4, 1)   # 0.25
"""
from __future__ import annotations

import math
import os

from nanorlhf.evals.common import chat_answers, md_table, new_figure, pct, save_figure
from nanorlhf.evals.context import Section
from nanorlhf.infra.jsonl import PROMPT, read_jsonl
from nanorlhf.world import prompt_from_dict
from nanorlhf.world.verifiers import checkable, verifiable


def pass_at_k(n: int, c: int, k: int) -> float:
    """Chen et al. 2021's unbiased pass@k from n samples of which c pass."""
    return 1.0 if n - c < k else 1.0 - math.comb(n - c, k) / math.comb(n, k)


def passk_section(ctx, policies: list[str], n: int = 16) -> Section:
    """Pass@k for k = 1..n of each named policy on the verifiable test prompts; the last against the first at pass@1
    and at the largest k, paired over tasks."""
    from nanorlhf.evals.preference import paired_difference
    rows = [r for r in read_jsonl(os.path.join(ctx.data_dir, "test_prompts.jsonl"), PROMPT)
            if checkable(prompt_from_dict(r))][:ctx.n]
    counts = {}
    for name in policies:
        model, tok = ctx.model(name)
        passed = [0] * len(rows)
        for s in range(n):
            answers = chat_answers(model, tok, [r["prompt"] for r in rows], ctx.max_new_tokens, seed=ctx.seed + s)
            for i, (r, a) in enumerate(zip(rows, answers)):
                passed[i] += int(verifiable(prompt_from_dict(r), a) == 1.0)
        counts[name] = passed
    ks = [k for k in (1, 2, 4, 8, 16, 32) if k <= n]
    curves = {m: {k: sum(pass_at_k(n, c, k) for c in cs) / len(cs) for k in ks} for m, cs in counts.items()}
    first, last = policies[0], policies[-1]
    d, d_top = (paired_difference([pass_at_k(n, c, k) for c in counts[first]],
                                  [pass_at_k(n, c, k) for c in counts[last]]) for k in (1, ks[-1]))
    fig, (ax,) = new_figure(1)
    for m, cur in curves.items():
        ax.plot(ks, [cur[k] for k in ks], "o-", label=m)
    ax.set(xscale="log", xlabel="k (samples a task)", ylabel="pass@k", title=f"verifiable test tasks ({len(rows)})")
    ax.set_xticks(ks, [str(k) for k in ks])
    ax.legend(fontsize=8)
    figs = [save_figure(fig, ctx, "passk.png")]
    table = md_table(["policy"] + [f"pass@{k}" for k in ks],
                     [[m] + [pct(cur[k]) for k in ks] for m, cur in curves.items()])
    text = (f"{len(rows)} test prompts a rule can check (closed QA, extract, classification, explicit constraints), "
            f"{n} samples each. pass@1 of {last} against {first}: {100 * d['diff']:+.1f} points "
            f"[{100 * d['lo']:+.1f}, {100 * d['hi']:+.1f}]; at pass@{ks[-1]}: {100 * d_top['diff']:+.1f} points "
            f"[{100 * d_top['lo']:+.1f}, {100 * d_top['hi']:+.1f}]; both paired over tasks.\n\n" + table)
    return Section("Pass@k on verifiable tasks", text, figs, {"curves": curves, "pass1_diff": d, "top_k": ks[-1],
                                                              "top_diff": d_top, "n_tasks": len(rows), "samples": n})
