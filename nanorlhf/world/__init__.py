"""The toy world: village facts, pretraining corpus, API prompts, demonstrations,
gold scorers and benchmark suites, all from one seed.

Example:
    >>> data = build_world("tiny", seed=0)
    >>> len(data.prompts["sft"]) == len(data.demos)
    True
    >>> f = features(data.world, data.prompts["sft"][0], data.demos[0]["response"])
    >>> set(f) == set(FEATURES)
    True

Files written by `python -m nanorlhf.world --scale=small --seed=0 --out=data/small`
(UTF-8 JSONL, one object per line; `SCHEMA` below is the reference):
"""
import json
import os
import random
from dataclasses import dataclass, replace

from nanorlhf.infra.cli import UserError
from nanorlhf.infra.fileio import write_text

from .benchmarks import SUITES, benchmarks
from .completions import sample_completions
from .corpus import corpus
from .demos import DEMONSTRATORS, demonstrate
from .entities import World, make_world
from .prompts import DEDUP_WORDS, SETS, prompt_sets, sample_task_texts
from .scales import SCALES, Scale, get_scale
from .scorers import FEATURES, constraint_results, features, gold_metadata, toxicity
from .tasks import CATEGORIES, CLOSED_DOMAIN, TABLE1, Prompt, prompt_from_dict
from nanorlhf.infra.jsonl import write_jsonl

SCHEMA = f"""\
corpus.jsonl         {{id, kind, text}}; kind in encyclopedia, story, gossip, quiz,
                     answered_quiz, forum, jobs, moon, exam; text opens with a source tag
                     line ("Encyclopedia: ...", "Quiz:", ...); never the chat format.
sft.jsonl            Prompt fields + {{prompt, response, demonstrator}}: prompt == text
                     (the instruction), response = the labeler demonstration.
public_tasks.jsonl   {{id, org, category, prompt, response}}: templated public-NLP tasks with instructions (the
                     FLAN/T0 analog's training set), as many as the demonstrations.
rm_prompts.jsonl     Prompt fields + {{prompt}} (== text; no responses: rank samples with the labelers).
                     `--rm_extra=N` appends N more from new training organisations; every
                     other file, and the RM file's first lines, stay byte for byte the same.
ppo_prompts.jsonl    Prompt fields.
val_prompts.jsonl    Prompt fields (held-out organisations).
test_prompts.jsonl   Prompt fields (held-out organisations).
  Prompt fields: id ("sft-000012"), org ("org-train-0042"), category (one of
  {", ".join(CATEGORIES)}), task (sub-type, e.g. "story", "myth",
  "false_premise", "nonexistent"), text, subject, attribute, answer (value / label /
  list / moon-speak), constraints ([{{"type": "mention", "word"}} | {{"type": "avoid",
  "word"}} | {{"type": "n_items", "n"}} | {{"type": "mood", "mood"}} | {{"type":
  "max_words", "n"}}]), passage (closed-domain input), source (text to rewrite /
  classify / translate), options (labels), false_premise ({{attribute, claimed, true}}),
  nonexistent ({{name, kind}}), items (brainstorm pool), belief ({{attribute, stated, true,
  holds}}: a belief the user states before the question; task "belief").
  Dedup: prompts sharing their first {DEDUP_WORDS} lowercased words are dropped;
  organisations never cross train/val/test.
benchmarks/<suite>.jsonl  suites {", ".join(SUITES)}; every item
  has id and doc_prompt (the task in pretraining-document format); truthfulqa,
  closed_hallucination, hedging, false_premise, sycophancy items are Prompt dicts (+ myth_answer
  for truthfulqa, neutral: the question without the belief for sycophancy); toxicity {{prefix, prefix_toxicity, bucket, instructions}}; bias
  {{kind, job, sentence_a, sentence_b, group_a, group_b, stereotyped}}; squad {{passage,
  question, answer}}; drop {{passage, question, answer:int}}; hellaswag {{context,
  endings[4], label}}; translation {{source, target}}.
world.json           entities (characters, places, objects), facts [{{subject,
                     attribute, value, myth}}], nonexistent names, job skews.
"""
__doc__ += "\n" + SCHEMA


@dataclass
class WorldData:
    """Everything one seed builds."""
    scale: Scale
    world: World
    corpus: list            # [{id, kind, text}]
    prompts: dict           # set name (sft, rm, ppo, val, test) -> [Prompt]
    demos: list             # one per prompts["sft"]: {id, response, demonstrator}
    benchmarks: dict        # suite -> [item dict]
    seed: int = 0


def build_world(scale="small", seed=0):
    """Build the world, corpus, prompt sets, SFT demonstrations and benchmarks."""
    sc = get_scale(scale)
    w = make_world(sc, seed)
    sets = prompt_sets(w, sc)
    docs = corpus(w, sc, task_texts=sample_task_texts(w, 400, seed))
    rng = random.Random(f"demos-{seed}-{sc.name}")
    demos = []
    for p in sets["sft"]:
        name, resp = demonstrate(w, p, rng)
        demos.append({"id": p.id, "response": resp, "demonstrator": name})
    return WorldData(sc, w, docs, sets, demos, benchmarks(w, sc), seed)


def _jsonl(path, rows):
    write_jsonl(path, [dict(sorted(r.items())) for r in rows])


def write_world(data, out):
    """Write the files described in SCHEMA under directory out."""
    os.makedirs(os.path.join(out, "benchmarks"), exist_ok=True)
    _jsonl(os.path.join(out, "corpus.jsonl"), data.corpus)
    _jsonl(os.path.join(out, "sft.jsonl"),
           [{**p.to_dict(), "prompt": p.text, **d} for p, d in zip(data.prompts["sft"], data.demos)])
    for s in ("rm", "ppo", "val", "test"):
        _jsonl(os.path.join(out, f"{s}_prompts.jsonl"), [{**p.to_dict(), "prompt": p.text} for p in data.prompts[s]])
    for name, items in data.benchmarks.items():
        _jsonl(os.path.join(out, "benchmarks", f"{name}.jsonl"), items)
    # the FLAN/T0 analog's training set: public-NLP-style tasks with instructions, as many as the demonstrations
    from .public_tasks import public_task_demos
    write_jsonl(os.path.join(out, "public_tasks.jsonl"), public_task_demos(data, n=len(data.prompts["sft"])))
    write_text(os.path.join(out, "world.json"), json.dumps(data.world.to_json(), ensure_ascii=False, indent=1,
                                                          sort_keys=True))
    extra = {"rm_extra": data.scale.rm_extra} if data.scale.rm_extra else {}
    # how to rebuild this world; written last, so a folder without it is an unfinished build
    write_text(os.path.join(out, "meta.json"), json.dumps({"scale": data.scale.name, "seed": data.seed, **extra}))


class WorldMismatch(UserError):
    """A data folder holding a world other than the one a run asked for: never written over unasked."""


def world_in(out: str) -> dict | None:
    """The meta.json of the world in folder out; None if none is there; WorldMismatch for the files of a world
    without one (an unfinished build, or files of the user's own)."""
    meta = os.path.join(out, "meta.json")
    if os.path.exists(meta):
        with open(meta, encoding="utf-8") as f:
            return json.load(f)
    if os.path.exists(os.path.join(out, "corpus.jsonl")):
        raise WorldMismatch(f"{out} holds world files but no meta.json (an unfinished build, or files of your "
                            "own); they are left as they are: give another folder, or rebuild it (--fresh=true / "
                            "--force=true)")
    return None


def ensure_world(out: str, scale: str, rm_prompts: int, fresh: bool = False, seed: int = 0) -> bool:
    """Build the world of `scale` and `seed` into `out` unless it is there with room for `rm_prompts` RM prompts.
    With fewer, it grows: the prompts past the scale's own come from new training organisations (`rm_extra`),
    appended, so that every other set stays the same. A world of another scale, seed or settings is not this
    run's to rebuild: WorldMismatch, unless fresh (which rebuilds whatever is there). Returns whether it built."""
    own = get_scale(scale)
    world = replace(own, rm_extra=max(0, rm_prompts - own.rm))
    built = None if fresh else world_in(out)
    if built is not None:
        if {k: v for k, v in built.items() if k != "rm_extra"} != {"scale": own.name, "seed": seed}:
            settings = ", ".join(f"{k} {v}" for k, v in built.items())
            raise WorldMismatch(f"{out} holds a world of {settings}, not the {scale} world of seed {seed} this run "
                                "needs; it is left as it is: give another data folder, or --fresh=true to rebuild it")
        if built.get("rm_extra", 0) >= world.rm_extra and os.path.exists(os.path.join(out, "public_tasks.jsonl")):
            return False
        print(f"{out}: growing its RM prompts to {own.rm + world.rm_extra} (every other file stays the same)")
    write_world(build_world(world, seed), out)
    return True


__all__ = ["build_world", "write_world", "WorldData", "SCHEMA", "SCALES", "Scale", "get_scale",
           "FEATURES", "features", "constraint_results", "gold_metadata", "toxicity",
           "sample_completions", "Prompt", "prompt_from_dict", "CATEGORIES", "TABLE1",
           "CLOSED_DOMAIN", "DEMONSTRATORS", "SETS", "SUITES"]
