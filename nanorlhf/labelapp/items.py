"""The queue a labeler works through: prompts with completions, and gold questions mixed in.

An item is what the page shows once:

    {"id": "p-val-000003", "prompt_id": "val-000003", "prompt": "...",
     "completions": [K strings], "row": {prompt fields, for the judge},
     "gold": None | {"pairs": [[better, worse], ...], "kind": "..."},
     "left": 0 | 1}                       # pairwise mode: which completion is shown on the left

Gold questions (InstructGPT screened labelers on agreement with researchers, soft
cutoff 75%) have a known answer: a labeler demonstration beats the same text
garbled, stuck in a loop, or an answer to a different prompt. With no
demonstrations at hand, a completion beats its own garbled copy. The labeler does
not see which items are gold. Real items are the same for every labeler with the
same seed (so labelers overlap and can be compared); the display order (shuffled
in ranking mode, left/right in pairwise mode) is drawn per labeler and recorded.

Example:
    rows = [{"id": "v1", "prompt": "Name a fox.", "completions": ["Pip.", "A fox.", "Tom."]}]
    demos = [{"id": "s1", "prompt": "Name a crow.", "response": "Clover the crow."}, ...]
    queue = build_queue(rows, demos, n=10, mode="rank", gold_rate=0.1, seed=0, labeler="alice")
"""
from __future__ import annotations

import random

CONTENT_KEYS = ("completions", "response")


def prompt_row(row: dict) -> dict:
    """The prompt fields of a row (what Judge.features needs), without completions or answers."""
    return {k: v for k, v in row.items() if k not in CONTENT_KEYS}


def garble(text: str, rng: random.Random) -> str:
    """The same words in a shuffled order (word salad: worse than the original, always)."""
    words = text.split()
    for _ in range(10):
        rng.shuffle(words)
        if " ".join(words) != " ".join(text.split()):
            return " ".join(words)
    return text[::-1] if text[::-1] != text else text + " " + text[::-1]


def looping(text: str) -> str:
    """The first few words repeated, like a degenerate sampling loop."""
    head = " ".join(text.split()[:4]) or "the"
    return " ".join([head] * 8)


def _gold_from_demo(demo: dict, other: dict, mode: str, rng: random.Random) -> tuple[list[str], list]:
    good = demo["response"]
    bad = [garble(good, rng), other["response"], looping(good)]
    bad = [b for b in dict.fromkeys(bad) if b != good]
    texts = [good] + (bad if mode == "rank" else [rng.choice(bad)])
    return texts, [[0, j] for j in range(1, len(texts))]


def _gold_from_completion(row: dict, mode: str, rng: random.Random) -> tuple[list[str], list]:
    good = max(row["completions"], key=len)
    texts = [good, garble(good, rng)]
    if mode == "rank":
        texts += [c for c in row["completions"] if c not in texts][:rng.randint(2, 4)]
    return texts, [[0, 1]]


def _arrange(item: dict, texts: list[str], pairs: list, mode: str, rng: random.Random) -> dict:
    """Shuffle the display order (recorded in `order`: display slot -> source index)."""
    order = list(range(len(texts)))
    rng.shuffle(order)
    where = {src: slot for slot, src in enumerate(order)}
    item["completions"] = [texts[i] for i in order]
    item["order"] = order
    if pairs:
        item["gold"]["pairs"] = [[where[b], where[w]] for b, w in pairs]
    if mode == "pair":
        item["left"] = rng.randrange(2)
    return item


def real_item(row: dict, mode: str, seed: int, labeler: str) -> dict | None:
    """A prompt and its completions (2 of them, drawn per seed, in pairwise mode); None if under 2."""
    texts = [c for c in row["completions"] if isinstance(c, str)][:9]
    if len(texts) < 2:
        return None
    if mode == "pair":  # the same two completions for every labeler with this seed
        i, j = sorted(random.Random(f"pair-{seed}-{row['id']}").sample(range(len(texts)), 2))
        texts = [texts[i], texts[j]]
    item = {"id": f"p-{row['id']}", "prompt_id": row["id"], "prompt": row["prompt"], "row": prompt_row(row),
            "gold": None}
    return _arrange(item, texts, [], mode, random.Random(f"show-{seed}-{labeler}-{row['id']}"))


def gold_item(source: dict, other: dict | None, mode: str, seed: int, labeler: str) -> dict:
    """A gold question from a demonstration row (with `response`) or, failing that, a completions row."""
    rng = random.Random(f"gold-{seed}-{labeler}-{source['id']}")
    if "response" in source and other is not None:
        texts, pairs = _gold_from_demo(source, other, mode, rng)
        kind = "demonstration vs garbled / off-task / looping"
    else:
        texts, pairs = _gold_from_completion(source, mode, rng)
        kind = "completion vs its garbled copy"
    item = {"id": f"gold-{source['id']}", "prompt_id": source["id"], "prompt": source["prompt"],
            "row": prompt_row(source), "gold": {"pairs": pairs, "kind": kind}}
    return _arrange(item, texts, pairs, mode, rng)


def n_gold(n: int, gold_rate: float) -> int:
    """Gold questions among n items: round(n * rate), at least one if the rate is above 0."""
    return 0 if gold_rate <= 0 or n < 2 else max(1, round(n * gold_rate))


def build_queue(rows: list[dict], demos: list[dict], *, n: int, mode: str, gold_rate: float, seed: int,
                labeler: str) -> list[dict]:
    """n items: n - n_gold real ones from `rows` in order, gold questions at random places (not first).

    rows: {id, prompt, completions, ...}; demos: {id, prompt, response, ...} (may be empty:
    then gold questions garble a completion of a row not used as a real item, or of any row).
    """
    real = []
    for row in rows:
        if len(real) >= n - n_gold(n, gold_rate):
            break
        item = real_item(row, mode, seed, labeler)
        if item:
            real.append(item)
    used = {it["prompt_id"] for it in real}
    rng = random.Random(f"queue-{seed}-{labeler}")
    k = min(n_gold(n, gold_rate), n - len(real))
    if demos:
        pool = [d for d in demos if d["id"] not in used] or list(demos)
        picks = rng.sample(pool, min(k, len(pool)))
        others = [rng.choice([d for d in demos if d is not p] or [None]) for p in picks]
        golds = [gold_item(p, o, mode, seed, labeler) for p, o in zip(picks, others)]
    else:
        pool = [r for r in rows if r["id"] not in used and len(r["completions"]) >= 1] or \
               [r for r in rows if r["completions"]]
        golds = [gold_item(p, None, mode, seed, labeler) for p in rng.sample(pool, min(k, len(pool)))]
    queue = list(real)
    for g in golds:
        queue.insert(rng.randint(1, len(queue)) if queue else 0, g)
    return queue


def demo_rows(data_dir: str, n: int = 20, k_min: int = 4, k_max: int = 9, seed: int = 0,
              split: str = "val") -> list[dict]:
    """A model-free completions file: the world's stand-in SFT samples (with their defects).

    For tests, screenshots and trying the page without a trained policy:
        write_jsonl("samples.jsonl", demo_rows("data/tiny"))
    """
    from nanorlhf.world import sample_completions
    from nanorlhf.world.judge import world_of
    data, rng = world_of(data_dir), random.Random(f"demo-{seed}")
    return [{**p.to_dict(), "prompt": p.text,
             "completions": sample_completions(data.world, p, rng.randint(k_min, k_max), rng)}
            for p in data.prompts[split][:n]]
