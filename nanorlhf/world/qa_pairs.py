"""Question-answer minimal pairs: two replies to one question that differ in one thing a labeler can check.

  truth      the asked attribute stated with its true value, and with a wrong one (the myth where the
             fact has one), in the same sentence: a labeler checking one claim
  relevance  the asked attribute's true value, and a true statement about another attribute of the same
             character: a labeler checking that the reply answers the question asked

The replies are written the way the demonstrators write (phrasing.state), like any labeler-written text; and
`sample_truth_pair` edits a model's own sampled answer the same way (one claim's value set true, and set
false), so the checks also come in the form the RM will score during PPO.
Two uses: `claim_checks` has training labelers rank such pairs for the RM's training set (a DEVIATION from
the paper, whose comparisons rank model samples only; evals/honesty.py says what it cost), and the
evaluation reads the RM's preference on pairs built from held-out prompts (rm_reads_truth,
rm_reads_relevance).

Example:
    >>> import random
    >>> from nanorlhf.world import build_world
    >>> data = build_world("tiny", 0)
    >>> p = next(p for p in data.prompts["rm"] if p.category == "open_qa" and not p.nonexistent)
    >>> good, bad = truth_pair(data.world, p, random.Random(0))
    >>> good != bad
    True
"""
from __future__ import annotations

import random

from . import phrasing
from .entities import COLOURS, FOODS, JOBS

ASKABLE = ("colour", "home", "food", "job")   # the attributes the open questions ask about characters


def _askable(world, p) -> bool:
    return (p.category == "open_qa" and not p.nonexistent and p.attribute in ASKABLE
            and world.entity_type(p.subject) == "character")


def wrong_value(world, subject: str, attribute: str, rng: random.Random) -> str:
    """A value the world says is false for subject.attribute: its myth where it has one, else another of the pool."""
    f = world.fact(subject, attribute)
    if f.myth:
        return f.myth
    pool = {"colour": COLOURS, "food": FOODS, "job": JOBS}.get(attribute) or [x.name for x in world.places]
    return rng.choice([v for v in pool if v != f.value])


def truth_pair(world, p, rng: random.Random) -> tuple[str, str] | None:
    """(true reply, false reply) to an open question about a character's colour, home, food or job: one
    sentence, the same template, only the value differs. None for any other prompt."""
    if not _askable(world, p):
        return None
    template = rng.randrange(len(phrasing.FACT_TEMPLATES[phrasing.key(world, p.subject, p.attribute)]))
    seed = rng.random()
    true, false = world.value(p.subject, p.attribute), wrong_value(world, p.subject, p.attribute, rng)
    return tuple(phrasing.state(world, p.subject, p.attribute, v, random.Random(seed), template)
                 for v in (true, false))


def relevance_pair(world, p, rng: random.Random) -> tuple[str, str] | None:
    """(reply stating the asked attribute's true value, reply stating another of the character's attributes,
    also true): both true, only the second fails to answer. None where truth_pair gives None."""
    if not _askable(world, p):
        return None
    other = rng.choice([a for a in ASKABLE if a != p.attribute])
    seed = rng.random()
    return tuple(phrasing.state(world, p.subject, a, world.value(p.subject, a), random.Random(seed))
                 for a in (p.attribute, other))


def sample_truth_pair(world, p, text: str, rng: random.Random) -> tuple[str, str] | None:
    """(true version, false version) of a sampled answer: one stated claim about a character's colour, home, food
    or job (the asked one where the prompt asks one) with its value set to the world's value, and to a wrong one.
    Only a value that occurs once in the text is edited; None where no claim can be."""
    import re

    from . import parse
    asked = p.attribute if p.category == "open_qa" else None
    claims = [c for c in parse.claims(world, text, default_topic=p.subject if asked else None, asked_attr=asked)
              if not c.negated and c.attribute in ASKABLE and world.entity_type(c.subject) == "character"
              and (asked is None or (c.subject == p.subject and c.attribute == asked))]
    for c in claims:
        value = re.compile(rf"\b{re.escape(c.value)}\b")
        if len(value.findall(text)) == 1:
            true = world.value(c.subject, c.attribute)
            return value.sub(true, text), value.sub(wrong_value(world, c.subject, c.attribute, rng), text)
    return None


def sample_checks(judge, rows: list[dict], completions: list[list[str]], labelers, rng: random.Random) -> list[dict]:
    """For each ranked set with a sample that states a checkable claim (world/parse.py), a truth pair of that
    sample's two versions (sample_truth_pair), K = 2, ranked by a training labeler."""
    from .tasks import prompt_from_dict
    out = []
    for row, comps in zip(rows, completions):
        p = prompt_from_dict(row)
        pair = next((x for x in (sample_truth_pair(judge.world, p, c, rng) for c in comps) if x), None)
        if pair is None or pair[0] == pair[1]:
            continue
        lab = rng.choice(labelers)
        feats = [judge.features(row, x) for x in pair]
        out.append({"id": f"check-sample-{row['id']}", "prompt_id": row["id"], "prompt": row["prompt"],
                    "completions": list(pair), "ranking": lab.rank(feats, rng, list(pair)), "labeler": lab.id,
                    "source": lab.source, "likert": [lab.likert(f, rng) for f in feats]})
    return out


def fact_questions(world, n: int, seed: int = 0) -> list[dict]:
    """n open questions about a random character's colour, home, food or job, as prompt rows (org "labelers")."""
    rng, rows = random.Random(f"fact-questions-{seed}"), []
    chars = [c.name for c in world.characters]
    for i in range(n):
        s, attr = rng.choice(chars), rng.choice(ASKABLE)
        q = phrasing.question(world, s, attr, rng)
        rows.append({"id": f"fact-{i:05d}", "org": "labelers", "category": "open_qa", "task": "fact", "text": q,
                     "prompt": q, "subject": s, "attribute": attr, "answer": world.value(s, attr), "constraints": []})
    return rows


def claim_checks(judge, rows: list[dict], labelers, rng: random.Random) -> list[dict]:
    """Comparison rows (K = 2) of the truth and relevance pairs of every askable prompt row, each ranked by one
    training labeler from the world's features, like any comparison (ties where the labeler's utilities tie
    and its noise does not part them)."""
    from .tasks import prompt_from_dict
    out = []
    for row in rows:
        p = prompt_from_dict(row)
        for kind, make in (("truth", truth_pair), ("relevance", relevance_pair)):
            pair = make(judge.world, p, rng)
            if pair is None:
                continue
            lab = rng.choice(labelers)
            feats = [judge.features(row, x) for x in pair]
            out.append({"id": f"check-{kind}-{row['id']}", "prompt_id": row["id"], "prompt": row["prompt"],
                        "completions": list(pair), "ranking": lab.rank(feats, rng, list(pair)),
                        "labeler": lab.id, "source": lab.source, "likert": [lab.likert(f, rng) for f in feats]})
    return out
