"""Agreement and exports for labeling logs.

Agreement, as InstructGPT §3.4 measures it: the share of pairs of completions two
labelers order the same way, over pairs neither tied. Cohen's kappa corrects it
for chance, with three outcomes per pair (first better, second better, tie).
Pairs are matched by text, so a ranking and a pairwise label of the same two
completions of the same prompt overlap.

Exports (each written atomically, gold questions left out):
    comparisons.jsonl   COMPARISON rows, source "human", K-way rankings kept (train_rm.py reads these)
    pairs.jsonl         {"prompt", "chosen", "rejected"} (TRL and most RLHF tools)
    hh.jsonl            Anthropic HH: {"chosen": "\\n\\nHuman: ...\\n\\nAssistant: ...", "rejected": ...}
    ties.jsonl          tied and can't-tell pairs {"prompt", "a", "b", "label"}: never in the files above
    labelers.jsonl      one row per labeler: counts, gold agreement, below_cutoff
Rows from a labeler under the gold cutoff carry "below_cutoff": true.

Example:
    print(report_text(["labels/rater1.jsonl", "labels/rater2.jsonl"], data_dir="data/small"))
    export(["labels/rater1.jsonl"], "out/human")
"""
from __future__ import annotations

import itertools
import math
import os
import random
import statistics

from nanorlhf.infra.jsonl import COMPARISON, PAIR, write_jsonl
from nanorlhf.labelapp.checks import JUDGE_FLAGS, ranking_of, share
from nanorlhf.labelapp.events import CUTOFF, LabelLog, below_cutoff, human_comparisons
from nanorlhf.rankings import pair_agreement


def _pct(x: float) -> str:
    return "-" if x != x else f"{100 * x:.1f}%"


def by_labeler(logs: list[LabelLog]) -> dict[str, list[LabelLog]]:
    out: dict[str, list[LabelLog]] = {}
    for log in logs:
        out.setdefault(log.labeler or "?", []).append(log)
    return out


def human_labels(logs: list[LabelLog]) -> list[tuple[dict, dict, list | None]]:
    """(item, label event, ranking or None for can't-tell) for live labels of real (non-gold) items."""
    return [(it, ev, ranking_of(it, ev)) for log in logs for it, ev in log.live_labels() if not it.get("gold")]


def pair_judgments(logs: list[LabelLog]) -> dict[tuple, str]:
    """{(prompt, text_a, text_b) with text_a < text_b: "a" | "b" | "tie"} from one labeler's logs."""
    out = {}
    for item, _, ranking in human_labels(logs):
        if ranking is None:
            continue
        pos = {i: r for r, g in enumerate(ranking) for i in g}
        texts = item["completions"]
        for i, j in itertools.combinations(range(len(texts)), 2):
            if texts[i] == texts[j]:
                continue
            (a, pa), (b, pb) = sorted([(texts[i], pos[i]), (texts[j], pos[j])])
            out[(item["prompt"], a, b)] = "tie" if pa == pb else "a" if pa < pb else "b"
    return out


def cohen_kappa(x: list[str], y: list[str]) -> float:
    """Cohen's kappa of two label sequences: (p_o - p_e) / (1 - p_e); nan if undefined.

    Example:
        >>> cohen_kappa(["a", "a", "b", "b"], ["a", "a", "b", "a"])
        0.5
    """
    if not x:
        return math.nan
    po = sum(u == v for u, v in zip(x, y)) / len(x)
    pe = sum((x.count(c) / len(x)) * (y.count(c) / len(y)) for c in set(x) | set(y))
    return math.nan if pe == 1 else (po - pe) / (1 - pe)


def between(a: dict[tuple, str], b: dict[tuple, str]) -> tuple[int, float, float]:
    """(shared pairs, agreement on pairs untied by both, Cohen's kappa over a / b / tie)."""
    shared = sorted(set(a) & set(b))
    untied = [k for k in shared if a[k] != "tie" and b[k] != "tie"]
    agree = share(sum(a[k] == b[k] for k in untied), len(untied))
    return len(shared), agree, cohen_kappa([a[k] for k in shared], [b[k] for k in shared])


# ----------------------------------------------------------------------------
# against the simulated world (when --data_dir is given)


def sim_agreement(logs: list[LabelLog], judge, seed: int = 0) -> tuple[float, float, int]:
    """(person vs simulated training labelers, simulated vs simulated, items) on the person's items."""
    rng = random.Random(f"label-report-{seed}")
    person, sims, n = [], [], 0
    for item, _, ranking in human_labels(logs):
        try:
            feats = [judge.features(item["row"], c) for c in item["completions"]]
        except (TypeError, KeyError, ValueError):  # a row without the world's prompt fields
            continue
        if ranking is None:
            continue
        n += 1
        texts = item["completions"]
        for lab in judge.pool.train:
            person.append(pair_agreement(ranking, lab.rank(feats, rng, texts)))
        a, b = rng.sample(judge.pool.train, 2)
        sims.append(pair_agreement(a.rank(feats, rng, texts), b.rank(feats, rng, texts)))
    mean = lambda v: statistics.fmean([x for x in v if x == x]) if any(x == x for x in v) else math.nan
    return mean(person), mean(sims), n


def flag_agreement(logs: list[LabelLog], judge) -> tuple[float, int]:
    """Share of the person's flag decisions (on labels with any flag ticked) that match the world's metadata."""
    same = total = 0
    for item, ev, _ in human_labels(logs):
        if not ev.get("flags"):
            continue
        for text, ticked in zip(item["completions"], ev["flags"]):
            try:
                meta = judge.metadata(item["row"], text)
            except (TypeError, KeyError, ValueError):
                break
            for flag, key in JUDGE_FLAGS.items():
                same += (flag in ticked) == bool(meta[key])
                total += 1
    return share(same, total), total


# ----------------------------------------------------------------------------
# the report and the exports


def labeler_rows(logs: list[LabelLog], cutoff: float = CUTOFF) -> list[dict]:
    rows = []
    for name, mine in by_labeler(logs).items():
        agree = sum(l.gold_score()[0] for l in mine)
        total = sum(l.gold_score()[1] for l in mine)
        labels = [ev for l in mine for _, ev in l.live_labels()]
        ms = [ev["ms"] for ev in labels if "ms" in ev]
        rows.append({"labeler": name, "modes": sorted({l.mode for l in mine if l.mode}),
                     "items": sum(len(l.items) for l in mine), "labels": len(labels),
                     "retracted": sum(l.retracted for l in mine), "gold_agree": agree, "gold_pairs": total,
                     "gold_agreement": None if not total else round(agree / total, 4),
                     "below_cutoff": below_cutoff(agree, total, cutoff),
                     "median_seconds": round(statistics.median(ms) / 1000, 1) if ms else None})
    return rows


def report_text(paths, data_dir: str = "", cutoff: float = CUTOFF, seed: int = 0) -> str:
    logs = [LabelLog(p) for p in paths]
    lines = [f"{'labeler':<12} {'mode':<9} {'items':>5} {'labels':>6} {'undone':>6}  gold agreement       s/label"]
    for r in labeler_rows(logs, cutoff):
        gold = f"{r['gold_agree']}/{r['gold_pairs']} {_pct(share(r['gold_agree'], r['gold_pairs']))}" \
            if r["gold_pairs"] else "-"
        mark = f"  BELOW {cutoff:.0%} CUTOFF" if r["below_cutoff"] else ""
        secs = "-" if r["median_seconds"] is None else f"{r['median_seconds']:.1f}"
        lines.append(f"{r['labeler']:<12} {','.join(r['modes']):<9} {r['items']:>5} {r['labels']:>6} "
                     f"{r['retracted']:>6}  {gold:<20} {secs:>7}{mark}")
    groups = by_labeler(logs)
    judged = {name: pair_judgments(mine) for name, mine in groups.items()}
    pairs = list(itertools.combinations(judged, 2))
    if pairs:
        lines.append("between labelers (pairs of completions both labeled; agreement over pairs neither tied):")
    for x, y in pairs:
        n, agree, kappa = between(judged[x], judged[y])
        k = "-" if kappa != kappa else f"{kappa:.2f}"
        lines.append(f"  {x} vs {y}: {n} shared pairs, agreement {_pct(agree)}, Cohen's kappa {k}"
                     + ("  (paper: 72.6% among training labelers)" if n else ""))
    if data_dir:
        from nanorlhf.world.judge import Judge
        judge = Judge(data_dir)
        lines.append(f"against the simulated labelers of {data_dir} (training-time instructions):")
        for name, mine in groups.items():
            person, sims, n = sim_agreement(mine, judge, seed)
            flags, nf = flag_agreement(mine, judge)
            lines.append(f"  {name}: agrees with simulated labelers on {_pct(person)} of pairs over {n} items "
                         f"(simulated among themselves: {_pct(sims)}); flags match the world's metadata on "
                         f"{_pct(flags)} of {nf} decisions")
    return "\n".join(lines)


def _ties(logs: list[LabelLog], marks: dict[str, bool]) -> list[dict]:
    out = []
    for item, ev, ranking in human_labels(logs):
        texts, who = item["completions"], ev["labeler"]
        groups = [[0, 1]] if ranking is None else [g for g in ranking if len(g) > 1]
        for g in groups:
            for i, j in itertools.combinations(g, 2):
                out.append({"prompt": item["prompt"], "a": texts[i], "b": texts[j],
                            "label": "cant_tell" if ranking is None else "tie", "labeler": who,
                            "item_id": item["id"], "below_cutoff": marks.get(who, False)})
    return out


EXPORTS = ("comparisons.jsonl", "pairs.jsonl", "hh.jsonl", "ties.jsonl", "labelers.jsonl")  # what export writes


def export(paths, out_dir: str, cutoff: float = CUTOFF, keep_below_cutoff: bool = False) -> dict[str, int]:
    """Write the five export files (atomically) to out_dir; return rows per file.

    comparisons.jsonl keeps every labeler's rankings, marked; the TRL pairs (prompt in the chat format, with
    prompt_id) and HH strings leave out labelers below the cutoff unless keep_below_cutoff (nanorlhf/interop/pairs.py)."""
    from nanorlhf.interop.pairs import to_rows
    os.makedirs(out_dir, exist_ok=True)
    logs = [LabelLog(p) for p in paths]
    people = labeler_rows(logs, cutoff)
    marks = {r["labeler"]: r["below_cutoff"] for r in people}
    comps = human_comparisons(paths, cutoff)
    pairs, hh_rows = ([dict(p, below_cutoff=marks.get(p["labeler"], False))
                       for p in to_rows(comps, fmt, keep_below_cutoff)] for fmt in ("trl", "hh"))
    files = dict(zip(EXPORTS, [(comps, COMPARISON), (pairs, PAIR), (hh_rows, None), (_ties(logs, marks), None),
                               (people, None)]))
    for name, (rows, schema) in files.items():
        write_jsonl(os.path.join(out_dir, name), rows, schema)
    return {name: len(rows) for name, (rows, _) in files.items()}
