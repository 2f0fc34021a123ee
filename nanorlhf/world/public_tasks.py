"""Public NLP tasks reformatted as instructions: the FLAN / T0 analog (InstructGPT §4.1, Figure 6.2).

FLAN (Wei et al. 2021) and T0 (Sanh et al. 2021) fine-tune on many public
datasets rewritten with natural-language instruction templates. Here the
"public datasets" are the world's benchmark-style tasks (reading comprehension,
counting, story endings, translation, rudeness classification), drawn with
their own seed so they never repeat an evaluation item, and written with
templates: mostly classification and short-answer QA, a distribution unlike the
API prompts (which are mostly open-ended generation).

Example:
    rows = public_task_demos(build_world("tiny"), n=100)
    rows[0]["prompt"], rows[0]["response"]   # ("Read the passage and answer ...", "Bramble Hill")
"""
import random
from dataclasses import replace

from .benchmarks import benchmarks

TEMPLATES = {  # two templates per task, as FLAN mixes several phrasings
    "squad": ["Read the passage and answer the question.\n{passage}\nQuestion: {question}",
              "{passage}\nBased on the passage above, {question}"],
    "drop": ["Count using the passage.\n{passage}\nQuestion: {question}",
             "{passage}\nAnswer with a number: {question}"],
    "hellaswag": ["How does this story end? Pick one ending.\n{context}\nEndings: {options}",
                  "{context}\nWhich ending is right? {options}"],
    "translation": ["Translate into moon-speak: {source}", "English: {source}\nGive the moon-speak."],
    "toxicity": ["Is this forum post rude or polite? {post}", "Classify the tone as rude or polite: {post}"],
}


def _row(i, task, prompt, response):
    return {"id": f"public-{i:05d}", "org": "public", "category": f"public_{task}", "prompt": prompt,
            "response": str(response)}


def public_task_demos(data, n: int, seed: int = 0) -> list[dict]:
    """n instruction-formatted examples (DEMO schema) from freshly drawn benchmark-style items."""
    sc = replace(data.scale, name=f"public-{seed}", bench=max(8, n // 4))
    b = benchmarks(data.world, sc)
    rng = random.Random(f"public-{seed}")
    rows = []
    for it in b["squad"]:
        rows.append(("squad", dict(passage=it["passage"], question=it["question"]), it["answer"]))
    for it in b["drop"]:
        rows.append(("drop", dict(passage=it["passage"], question=it["question"]), it["answer"]))
    for it in b["hellaswag"]:
        opts = " ".join(f"({'abcd'[k]}) {e}" for k, e in enumerate(it["endings"]))
        rows.append(("hellaswag", dict(context=it["context"].split("\n", 1)[-1], options=opts),
                     it["endings"][it["label"]]))
    for it in b["translation"]:
        rows.append(("translation", dict(source=it["source"]), it["target"]))
    for it in b["toxicity"]:
        post = it["prefix"].split("\n", 1)[-1]
        rows.append(("toxicity", dict(post=post), "rude" if it["bucket"] == "toxic" else "polite"))
    rng.shuffle(rows)
    out = []
    for i, (task, fields, answer) in enumerate(rows[:n]):
        out.append(_row(i, task, rng.choice(TEMPLATES[task]).format(**fields), answer))
    return out
