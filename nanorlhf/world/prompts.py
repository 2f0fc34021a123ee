"""The "API prompt" distribution: organisations, dedup, caps and splits.

InstructGPT §3.2: prompts were deduplicated by common prefix, limited to ~200
per organisation, and split train/val/test by organisation. We do the same:

1. Make organisations, each with its own preferred category mix and phrasing.
2. Split organisations into train / val / test (no org in two splits).
3. For each prompt set (sft, rm, ppo from train orgs; val; test) fix the
   category counts to Table 1 exactly (largest remainder), then for each
   prompt pick an org of that split with weight = its preference for the
   category, skipping orgs at the cap.
4. Dedup: a prompt whose first DEDUP_WORDS lowercased words equal those of an
   earlier prompt (in any set) is redrawn.

Example:
    >>> from nanorlhf.world.entities import make_world
    >>> from nanorlhf.world.scales import SCALES
    >>> sets = prompt_sets(make_world(SCALES["tiny"], 0), SCALES["tiny"])
    >>> sorted(sets), len(sets["sft"])
    (['ppo', 'rm', 'sft', 'test', 'val'], 64)
"""
import math
import random

from .lexicon import words
from .tasks import CATEGORIES, GENERATORS, TABLE1, Style

DEDUP_WORDS = 10            # InstructGPT: "share a long common prefix"
SETS = ("sft", "rm", "ppo", "val", "test")
OPENERS = ["", "Please", "Can you ?", "Could you please ?", "I need you to", "Hey,",
           "Quickly", "Kindly", "Go ahead and", "Help me:", "Now"]


def dedup_key(text):
    """The first DEDUP_WORDS lowercased words: prompts sharing it are duplicates."""
    return " ".join(words(text)[:DEDUP_WORDS])


def table1_counts(n):
    """Split n prompts across categories in Table 1 proportions (largest remainder)."""
    total = sum(TABLE1.values())    # 99.9: the paper's percentages are rounded
    raw = {c: n * TABLE1[c] / total for c in CATEGORIES}
    counts = {c: int(v) for c, v in raw.items()}
    for c in sorted(CATEGORIES, key=lambda c: raw[c] - counts[c], reverse=True)[:n - sum(counts.values())]:
        counts[c] += 1
    return counts


def make_orgs(rng, n, split, start=0):
    """Organisations with their own category preference and phrasing style."""
    orgs = []
    for i in range(start, start + n):
        fav = rng.choice(CATEGORIES)
        prefs = {c: math.exp(rng.gauss(0, 0.7)) * (4.0 if c == fav else 1.0) for c in CATEGORIES}
        style = Style(openers=tuple(rng.sample(OPENERS, 3)),
                      constraint_rate=rng.choice([0.2, 0.4, 0.6]),
                      thanks=rng.choice([0.0, 0.1, 0.3]))
        orgs.append({"id": f"org-{split}-{i:04d}", "prefs": prefs, "style": style, "used": 0})
    return orgs


def draw_prompts(world, rng, pool, n, seen, org_cap, max_tries=200):
    """n prompts in Table 1 proportions from the organisations in pool (steps 3 and 4 above), shuffled."""
    prompts = []
    for cat, k in table1_counts(n).items():
        for _ in range(k):
            free = [o for o in pool if o["used"] < org_cap] or pool
            org = rng.choices(free, weights=[o["prefs"][cat] for o in free])[0]
            for _ in range(max_tries):
                p = GENERATORS[cat](world, rng, org["style"])
                key = dedup_key(p.text)
                if key not in seen:
                    break
            else:
                raise RuntimeError(f"cannot draw a new {cat} prompt; raise variety")
            seen.add(key)
            org["used"] += 1
            p.org = org["id"]
            prompts.append(p)
    rng.shuffle(prompts)
    return prompts


def prompt_sets(world, scale):
    """{set name: [Prompt]} for sets sft, rm, ppo (train orgs), val and test.

    scale.rm_extra further RM prompts come last, from new training organisations, so a
    world with more of them holds the same sft, ppo, val and test sets and the same first
    scale.rm RM prompts: a larger label budget is a superset of a smaller one.
    """
    if scale.rm_extra < 0:
        raise ValueError(f"rm_extra counts extra RM prompts and cannot be negative, got {scale.rm_extra}")
    rng = random.Random(f"prompts-{world.seed}-{scale.name}")
    size = {s: getattr(scale, s) for s in SETS}
    n_orgs = lambda n: max(2, math.ceil(n / (0.6 * scale.org_cap)))
    orgs = {"train": make_orgs(rng, n_orgs(size["sft"] + size["rm"] + size["ppo"]), "train"),
            "val": make_orgs(rng, n_orgs(size["val"]), "val"),
            "test": make_orgs(rng, n_orgs(size["test"]), "test")}
    seen, out = set(), {}
    for s in SETS:
        out[s] = draw_prompts(world, rng, orgs["train" if s in ("sft", "rm", "ppo") else s], size[s], seen,
                              scale.org_cap)
    if scale.rm_extra:
        more = make_orgs(rng, n_orgs(scale.rm_extra), "train", start=len(orgs["train"]))
        out["rm"] += draw_prompts(world, rng, more, scale.rm_extra, seen, scale.org_cap)
    for s in SETS:
        for i, p in enumerate(out[s]):
            p.id = f"{s}-{i:06d}"
    return out


def sample_task_texts(world, n, seed=0):
    """Instruction texts for the corpus quiz sheets (never answered there)."""
    rng = random.Random(f"quiz-tasks-{seed}")
    style = Style(openers=tuple(OPENERS))
    cats = rng.choices(CATEGORIES, weights=[TABLE1[c] for c in CATEGORIES], k=n)
    ps = [GENERATORS[c](world, rng, style) for c in cats
          if c not in ("summarization", "closed_qa", "extract")]
    return [p.text for p in ps if not p.nonexistent]   # those names never enter the corpus
