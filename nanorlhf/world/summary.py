"""A plain-text report on a built world (sizes, mixes, one example of each kind).

Other stages add sections (e.g. labeler agreement) by passing `extra`:
a list of (title, text) pairs printed after the built-in sections.

Example:
    >>> from nanorlhf.world import build_world
    >>> "category mix" in report(build_world("tiny"))
    True
"""
from collections import Counter

from .lexicon import words
from .scorers import features
from .tasks import CATEGORIES, CLOSED_DOMAIN, TABLE1


def _share(ps, pred):
    return f"{100 * sum(map(pred, ps)) / max(1, len(ps)):5.1f}%"


def report(data, extra=()):
    """Return the report text for a WorldData; extra: [(title, text)] sections."""
    out = []
    text = "\n".join(d["text"] for d in data.corpus)
    ws = words(text)
    out.append(f"== corpus ({data.scale.name}, seed {data.world.seed})\n"
               f"{len(data.corpus)} docs, {len(text):,} chars, {len(ws):,} words, "
               f"{len(set(ws)):,} distinct words, {len(data.world.facts)} facts, "
               f"{len(data.world.myths())} myths")
    kinds = Counter(d["kind"] for d in data.corpus)
    out.append("== document kinds\n" + "\n".join(f"{k:14s} {n:7d}" for k, n in kinds.most_common()))
    out.append("== prompt sets\n" + "  ".join(f"{k}={len(v)}" for k, v in data.prompts.items()))
    rm = data.prompts["rm"]
    cats = Counter(p.category for p in rm)
    out.append("== category mix of the RM set (ours vs InstructGPT Table 1)\n" + "\n".join(
        f"{c:15s} {100 * cats[c] / len(rm):5.1f}%  paper {TABLE1[c]:5.1f}%" for c in CATEGORIES))
    allp = [p for v in data.prompts.values() for p in v]
    out.append("== prompt properties (all sets)\n"
               f"with explicit constraints {_share(allp, lambda p: bool(p.constraints))}\n"
               f"closed-domain             {_share(allp, lambda p: p.category in CLOSED_DOMAIN)}\n"
               f"false premise             {_share(allp, lambda p: bool(p.false_premise))}\n"
               f"non-existent entity       {_share(allp, lambda p: bool(p.nonexistent))}\n"
               f"organisations             {len({p.org for p in allp})}")
    ex = []
    for k in kinds:
        d = next(d for d in data.corpus if d["kind"] == k)
        ex.append(f"--- {k}\n{d['text'][:400]}")
    out.append("== one document of each kind\n" + "\n".join(ex))
    ex = []
    for c in CATEGORIES:
        i = next((i for i, p in enumerate(data.prompts["sft"]) if p.category == c), None)
        if i is None:
            continue
        p, d = data.prompts["sft"][i], data.demos[i]
        f = features(data.world, p, d["response"])
        ex.append(f"--- {c} ({p.task}, {p.org})\nPROMPT: {p.text}\nDEMO [{d['demonstrator']}]: "
                  f"{d['response']}\nGOLD: " + ", ".join(f"{k}={v:.2f}" for k, v in f.items()))
    out.append("== one prompt of each category, its demonstration and gold features\n" + "\n".join(ex))
    for title, body in extra:
        out.append(f"== {title}\n{body}")
    return "\n\n".join(out)
