"""Preference pairs: K-way comparisons to and from {"prompt", "chosen", "rejected"} JSONL.

That is the format TRL and most RLHF tools read. A K-way ranking becomes its
untied pairs (C(K, 2) minus ties); an imported pair becomes a K = 2 comparison.

Example:
    n = export_pairs(comparisons, "pairs.jsonl")     # 5 pairs from a K = 4 ranking with one tie
    back = import_pairs("pairs.jsonl")               # K = 2 comparisons, source "human"
"""
import hashlib
import json

from nanorlhf.jsonl import COMPARISON, PAIR, read_jsonl, validate_row, write_jsonl

# ----------------------------------------------------------------------------
# interop: K-way comparisons <-> (prompt, chosen, rejected) pairs (TRL's format)


def comparisons_to_pairs(comparisons) -> list[dict]:
    """Expand each K-way ranking into all its untied pairs: C(K,2) minus ties.

    InstructGPT §3.5 trains the RM on all C(K,2) pairs of one ranking; a tie says
    neither is better, so it gives no pair.

    Example:
        >>> c = {"id": "c1", "prompt_id": "p1", "prompt": "Q", "completions": ["a", "b", "c"],
        ...      "ranking": [[2], [0, 1]], "labeler": "L1", "source": "sim"}
        >>> [(p["chosen"], p["rejected"]) for p in comparisons_to_pairs([c])]
        [('c', 'a'), ('c', 'b')]
    """
    pairs = []
    for c in comparisons:
        validate_row(c, COMPARISON)
        groups, texts = c["ranking"], c["completions"]
        for hi, better in enumerate(groups):
            for worse in groups[hi + 1:]:
                pairs += [{"prompt": c["prompt"], "chosen": texts[a], "rejected": texts[b]}
                          for a in better for b in worse]
    return pairs


def _short_hash(*parts):
    return hashlib.sha1(json.dumps(parts, ensure_ascii=False).encode("utf-8")).hexdigest()[:12]


def pairs_to_comparisons(pairs, labeler="import", source="human") -> list[dict]:
    """Turn each (prompt, chosen, rejected) pair into a K=2 comparison.

    Ids are a short sha1 of the content, so importing the same file twice gives
    the same ids; a repeated identical pair gets a "-2", "-3", ... suffix.

    Example:
        >>> c = pairs_to_comparisons([{"prompt": "Q", "chosen": "a", "rejected": "b"}])[0]
        >>> c["completions"], c["ranking"], c["id"].startswith("pair-")
        (['a', 'b'], [[0], [1]], True)
    """
    out, seen = [], {}
    for pair in pairs:
        validate_row(pair, PAIR)
        cid = "pair-" + _short_hash(pair["prompt"], pair["chosen"], pair["rejected"])
        seen[cid] = seen.get(cid, 0) + 1
        out.append({"id": cid if seen[cid] == 1 else f"{cid}-{seen[cid]}",
                    "prompt_id": "p-" + _short_hash(pair["prompt"]), "prompt": pair["prompt"],
                    "completions": [pair["chosen"], pair["rejected"]], "ranking": [[0], [1]],
                    "labeler": labeler, "source": source})
    return out


def export_pairs(comparisons, path) -> int:
    """Write the untied pairs of `comparisons` to a PAIR JSONL file; return how many."""
    pairs = comparisons_to_pairs(comparisons)
    write_jsonl(path, pairs, PAIR)
    return len(pairs)


def import_pairs(path, labeler="import", source="human") -> list[dict]:
    """Read a PAIR JSONL file (e.g. for TRL) as K=2 comparisons; extra keys are ignored."""
    return pairs_to_comparisons(read_jsonl(path, PAIR, unique_key=None), labeler, source)
