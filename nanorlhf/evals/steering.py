"""Steering two traits back at inference, with a capability floor (nanorlhf/steering.py, CAA).

For one policy (PPO when given, else SFT):
  1. sycophancy direction: residual activations at the last token of the answer that adopts a
     user's false belief minus those of the correction (evals/sycophancy.twins), averaged over
     half A of the false-belief prompts; hallucination direction: a closed-domain answer with a
     sentence about someone the passage never names minus the faithful answer, on half A of the
     closed-domain items.
  2. The layer: every layer is tried at multiplier -K and +K on half A (a table); the one where
     -K lowers the sycophancy rate most is kept. Nothing below is chosen on half B.
  3. On half B: the sycophancy rate at multipliers -K .. +K (steered from the prompt's last token
     on), and the hallucination rate at -K, 0, +K, with Wilson intervals.
  4. The capability floor at -K, 0, +K, steered the same way: few-shot fact accuracy (the
     knowledge suite's quiz format) and the public-task analogs that are generated (SQuAD F1,
     DROP EM, translation BLEU; HellaSwag is scored by the log-probs of given endings, with no
     generated position to steer, so it is left out).

Example:
    sec = steering(ctx)       # tables, steering.png, data["sycophancy"][-4.0]["rate"]
"""
from __future__ import annotations

import random

from nanorlhf.evals.alignment_tax import translation_prompts
from nanorlhf.evals.common import bench_items, chat_answers, doc_answers, md_table, new_figure, pct, rate_errorbar
from nanorlhf.evals.common import save_figure
from nanorlhf.evals.context import Section
from nanorlhf.evals.knowledge import fact_accuracy
from nanorlhf.evals.sycophancy import rate, twins
from nanorlhf.evals.textmatch import bleu, exact_match, f1_score
from nanorlhf.masks import last_token_index
from nanorlhf.reward import encode_texts
from nanorlhf.steering import contrastive_vector, record, steer

K = 8.0
MULTIPLIERS = (-K, -K / 2, 0.0, K / 2, K)


def answer_activations(model, tok, layer: int, prompts: list[str], answers: list[str]):
    """Residual stream after block `layer` at each answer's last token (the one before the end token).  # (N, C)"""
    dev = next(model.parameters()).device
    t, a, r = (x.to(dev) for x in encode_texts(tok, prompts, answers, model.cfg.block_size))
    return record(model, layer, t, a, (last_token_index(r) - 1).clamp(min=0))


def closed_twins(world, items: list[dict], seed: int = 0) -> list[tuple[dict, str, str]]:
    """(item, the faithful closed-domain answer with one of its names swapped for one the passage never names, the
    faithful answer) per item that has a name to swap: the same length, one entity from outside the passage apart."""
    rng = random.Random(f"closed-twins-{seed}")
    names = [c.name for c in world.characters] + [p.name for p in world.places]
    out = []
    for it in items:
        ans = it.get("answer")
        faithful = (", ".join(ans) + "." if isinstance(ans, list) else f"{ans}." if ans else
                    it["passage"].split(". ")[0].rstrip(".") + ".")
        inside = [n for n in names if n in faithful]
        outside = [n for n in names if n not in it["passage"] and n not in (it.get("text") or "")]
        if inside and outside:
            out.append((it, faithful.replace(rng.choice(inside), rng.choice(outside)), faithful))
    return out


def direction(model, tok, layer: int, prompts: list[str], pairs: list[tuple[str, str]]):
    with_trait = answer_activations(model, tok, layer, prompts, [w for w, _ in pairs])
    return contrastive_vector(with_trait, answer_activations(model, tok, layer, prompts, [o for _, o in pairs]))


def steered_rate(ctx, model, tok, layer, vector, m, items, flag: str) -> dict:
    with steer(model, layer, vector, m):
        answers = chat_answers(model, tok, [it["text"] for it in items], 32, seed=ctx.seed)
    return rate([ctx.judge.features(it, a)[flag] > 0 for it, a in zip(items, answers)])


def capability(ctx, model, tok, layer, vector, m, n: int = 100) -> dict:
    """Few-shot fact accuracy and the generated public-task scores, steered at multiplier m."""
    sq, dr = bench_items(ctx, "squad", n), bench_items(ctx, "drop", n)
    tr, pool = bench_items(ctx, "translation", n), bench_items(ctx, "translation", 10**9)
    with steer(model, layer, vector, m):
        facts = fact_accuracy(model, tok, ctx.judge.world, n=n, seed=ctx.seed)["all"]
        sq_out = doc_answers(model, tok, [it["doc_prompt"] for it in sq], 8)
        dr_out = doc_answers(model, tok, [it["doc_prompt"] for it in dr], 6)
        tr_out = doc_answers(model, tok, translation_prompts(tr, pool, seed=ctx.seed), 32)
    return {"facts": facts, "squad_f1": sum(f1_score(p, it["answer"]) for p, it in zip(sq_out, sq)) / len(sq),
            "drop_em": sum(exact_match(p, str(it["answer"])) for p, it in zip(dr_out, dr)) / len(dr),
            "translation_bleu": bleu(tr_out, [it["target"] for it in tr])}


def steering(ctx) -> Section:
    """The steering sweep on one policy: layer choice on half A, rates and capability against the multiplier on B."""
    name = "ppo" if "ppo" in ctx.policies else "sft"
    model, tok = ctx.model(name)
    world = ctx.judge.world
    syc = [it for it in bench_items(ctx, "sycophancy", 10**9) if not it["belief"]["holds"]]
    closed = bench_items(ctx, "closed_hallucination", 10**9)
    a, b = syc[0::2], syc[1::2]
    ca, cb = closed[0::2], closed[1::2]
    pairs_a = twins(world, a, ctx.seed)
    layers = {}
    for layer in range(model.cfg.n_layer):
        v = direction(model, tok, layer, [it["text"] for it in a], pairs_a)
        layers[layer] = {"vector": v, **{m: steered_rate(ctx, model, tok, layer, v, m, a, "sycophantic")["rate"]
                                        for m in (-K, K)}}
    layer = min(layers, key=lambda L: layers[L][-K])
    v_syc = layers[layer]["vector"]
    hal = closed_twins(world, ca, ctx.seed)
    v_hal = direction(model, tok, layer, [it["text"] for it, _, _ in hal], [(h, f) for _, h, f in hal])
    sweep = {m: steered_rate(ctx, model, tok, layer, v_syc, m, b, "sycophantic") for m in MULTIPLIERS}
    hall = {m: steered_rate(ctx, model, tok, layer, v_hal, m, cb, "hallucination") for m in (-K, 0.0, K)}
    floor = {m: capability(ctx, model, tok, layer, v_syc, m) for m in (-K, 0.0, K)}
    ci = lambda r: f"{pct(r['rate'])} [{pct(r['lo'])}, {pct(r['hi'])}]"
    ltable = md_table(["layer", "|v|", f"sycophancy at -{K:g}", f"at +{K:g}"],
                      [[L, f"{d['vector'].norm():.2f}", pct(d[-K]), pct(d[K])] for L, d in layers.items()])
    stable = md_table(["multiplier", f"sycophancy ({len(b)} prompts)", f"hallucination ({len(cb)} items)",
                       "fact accuracy", "SQuAD F1", "DROP EM", "translation BLEU"],
                      [[f"{m:+g}", ci(sweep[m]), ci(hall[m]) if m in hall else "",
                        *([pct(floor[m]["facts"]), f"{floor[m]['squad_f1']:.3f}", pct(floor[m]["drop_em"]),
                           f"{floor[m]['translation_bleu']:.3f}"] if m in floor else ["", "", "", ""])]
                       for m in MULTIPLIERS])
    fig, axes = new_figure(2)
    ms = list(MULTIPLIERS)
    rate_errorbar(axes[0], ms, [sweep[m] for m in ms], marker="o", label="sycophancy")
    rate_errorbar(axes[0], list(hall), list(hall.values()), marker="s", label="hallucination (its vector)")
    axes[0].set_xlabel("steering multiplier")
    axes[0].set_ylabel("share of answers")
    axes[0].set_title(f"{name}, layer {layer}")
    axes[0].legend(fontsize=7)
    fm = list(floor)
    for key in ("facts", "squad_f1", "drop_em", "translation_bleu"):
        axes[1].plot(fm, [floor[m][key] for m in fm], "o-", label=key)
    axes[1].set_xlabel("steering multiplier (sycophancy vector)")
    axes[1].set_ylabel("score")
    axes[1].set_title("capability floor")
    axes[1].legend(fontsize=7)
    figs = [save_figure(fig, ctx, "steering.png")]
    text = (f"Contrastive activation addition on `{name}`: the sycophancy vector is the mean difference of the "
            f"residual stream at the answer's last token between adopting a user's false belief and correcting "
            f"it ({len(a)} prompts of half A); the layer is chosen on half A:\n\n{ltable}\n\nOn half B (never used "
            f"to build or choose), layer {layer}, steered from the prompt's last token on; hallucination with its "
            f"own vector from {len(hal)} closed-domain pairs; the capability floor under the sycophancy vector:\n\n"
            + stable)
    data = {"policy": name, "layer": layer, "layers": {L: {k: d[k] for k in (-K, K)} for L, d in layers.items()},
            "sycophancy": sweep, "hallucination": hall, "capability": floor}
    return Section("Steering sycophancy and hallucination", text, figs, data)
