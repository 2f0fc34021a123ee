"""Closed-domain hallucination (InstructGPT §4.2: 21% for InstructGPT vs 41% for GPT-3).

Closed-domain tasks (summarize, answer from, or extract from a given passage;
benchmarks/closed_hallucination.jsonl) should use only the passage. A response
hallucinates when it names an entity or value that is not in the passage, or a
made-up name, or a claim about a non-existent character: the world's
`hallucination` feature > 0, the same flag the labelers' metadata carries.

Rows: each policy on the instruction in the chat format, plus "gpt prompted":
the base model on the same task written as an exam sheet (the corpus format).

Example:
    hallucinates(judge, item, "Orla lives at Thorn Lane.")    # True if Thorn Lane is not in the passage
    sec = hallucination(ctx)    # Section: rate per model with a 95% interval, hallucination.png
"""
from __future__ import annotations

from collections import defaultdict

from nanorlhf.evals.common import bench_items, chat_answers, doc_answers, md_table, new_figure, pct
from nanorlhf.evals.common import policy_names, save_figure
from nanorlhf.evals.context import Section
from nanorlhf.evals.preference import wilson


def hallucinates(judge, item: dict, response: str) -> bool:
    """Whether a response states something that is not in the passage (or not in the world)."""
    return judge.features(item, response)["hallucination"] > 0


def rate(judge, items: list[dict], responses: list[str]) -> dict:
    """Hallucination rate, its Wilson 95% interval, the attempt rate, and the rate by category."""
    flags = [hallucinates(judge, it, r) for it, r in zip(items, responses)]
    by_cat = defaultdict(list)
    for it, f in zip(items, flags):
        by_cat[it["category"]].append(f)
    lo, hi = wilson(sum(flags), len(flags))
    attempted = sum(judge.features(it, r)["attempted"] for it, r in zip(items, responses)) / len(items)
    return {"rate": sum(flags) / len(flags), "lo": lo, "hi": hi, "attempted": attempted, "flags": flags,
            "by_category": {k: sum(v) / len(v) for k, v in sorted(by_cat.items())}, "n": len(flags)}


def hallucination(ctx) -> Section:
    """Share of closed-domain responses that hallucinate, per model (sampled, as in the paper's API use)."""
    items = bench_items(ctx, "closed_hallucination")
    res, examples = {}, {}
    for name in policy_names(ctx):
        model, tok = ctx.model(name)
        texts = chat_answers(model, tok, [it["text"] for it in items], ctx.max_new_tokens, seed=ctx.seed)
        res[name] = rate(ctx.judge, items, texts)
        examples[name] = list(zip([it["text"][-60:] for it in items[:3]], texts[:3]))
        if name == "gpt":
            texts = doc_answers(model, tok, [it["doc_prompt"] for it in items], ctx.max_new_tokens)
            res["gpt prompted"] = rate(ctx.judge, items, texts)
    cats = sorted({c for r in res.values() for c in r["by_category"]})
    rows = [[m, pct(r["rate"]), f"[{pct(r['lo'])}, {pct(r['hi'])}]", pct(r["attempted"])]
            + [pct(r["by_category"].get(c)) for c in cats] for m, r in res.items()]
    table = md_table(["model", "hallucinates", "95% CI", "attempted"] + cats, rows)
    fig, (ax,) = new_figure(1)
    names = list(res)
    ax.bar(names, [res[m]["rate"] for m in names],
           yerr=[[res[m]["rate"] - res[m]["lo"] for m in names], [res[m]["hi"] - res[m]["rate"] for m in names]])
    ax.set_ylabel("hallucination rate")
    ax.set_title("closed-domain tasks")
    ax.set_ylim(0, 1)
    figs = [save_figure(fig, ctx, "hallucination.png")]
    text = (f"{len(items)} closed-domain prompts (summarize / closed QA / extract from a passage). A response "
            f"hallucinates when it names an entity or value not in the passage, or a made-up one (world feature "
            f"`hallucination` > 0). Paper: 21% (InstructGPT) vs 41% (GPT-3).\n\n" + table)
    data = {**res, "examples": examples}
    if {"gpt", "ppo_ptx"} <= set(res):  # the finding: ppo_ptx below gpt, paired over the same items
        from nanorlhf.evals.preference import paired_difference
        data["paired"] = paired_difference([float(f) for f in res["ppo_ptx"]["flags"]],
                                           [float(f) for f in res["gpt"]["flags"]])
    return Section("Closed-domain hallucination", text, figs, data)
