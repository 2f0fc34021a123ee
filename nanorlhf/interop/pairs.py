"""Preference pairs in the formats other libraries read, both ways: TRL (Hugging Face) and Anthropic HH.

    python -m nanorlhf.interop.pairs --comparisons=out/small/rm/comparisons.jsonl --out=out/pairs.jsonl
    python -m nanorlhf.interop.pairs --comparisons=labels/export/comparisons.jsonl --out=out/hh.jsonl --format=hh
    python train_rm.py --pairs=out/pairs.jsonl ...      # and train_dpo.py --pairs=...: pairs back in

Out: each K-way ranking becomes its C(K, 2) untied pairs (InstructGPT §3.5):
  trl             {"prompt": "<|user|>Q<|assistant|>", "chosen": "A", "rejected": "B", "prompt_id", ...}
                  the prompt in the chat format the SFT model was trained on, so TRL trains on what the
                  model knows (the exported tokenizer appends <|endoftext|> as eos)
  conversational  TRL's message lists, {"prompt": [{"role": "user", ...}], "chosen": [{"role": "assistant", ...}]}
  hh              {"chosen": "\\n\\nHuman: Q\\n\\nAssistant: A", "rejected": ...}
Every row keeps `prompt_id` (a prompt's ~19 pairs must stay together when shuffled: §3.5 says that pairs of one
prompt shuffled apart overfit), `comparison_id` and `labeler`. Ties give no pair; a pair whose two texts are
identical is dropped; comparisons marked `below_cutoff` (human labelers under the gold-agreement cutoff) are
left out unless --keep_below_cutoff=true.

In: `read_pairs` takes any of the three formats (chat markers stripped) and returns K = 2 comparisons.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import ClassVar

from nanorlhf.infra.jsonl import COMPARISON, iter_jsonl, read_jsonl, write_jsonl
from nanorlhf.infra.schemas import DataError
from nanorlhf.rankings import ranking_to_pairs, trl_pairs_to_comparisons

USER, ASSISTANT, END = "<|user|>", "<|assistant|>", "<|endoftext|>"
HUMAN, AI = "\n\nHuman: ", "\n\nAssistant: "
FORMATS = ("trl", "conversational", "hh")


def ranked_pairs(c: dict) -> list[tuple[str, str]]:
    """(chosen, rejected) texts of a comparison's untied pairs (rankings.ranking_to_pairs); identical texts dropped."""
    texts = c["completions"]
    return [(texts[a], texts[b]) for a, b in ranking_to_pairs(c["ranking"]) if texts[a] != texts[b]]


def to_rows(comparisons: list[dict], fmt: str = "trl", keep_below_cutoff: bool = False) -> list[dict]:
    """The comparisons' pairs as rows of `fmt` (one of FORMATS)."""
    rows = []
    for c in comparisons:
        if c.get("below_cutoff") and not keep_below_cutoff:
            continue
        ids = {"prompt_id": c["prompt_id"], "comparison_id": c["id"], "labeler": c["labeler"]}
        for chosen, rejected in ranked_pairs(c):
            if fmt == "trl":
                row = {"prompt": f"{USER}{c['prompt']}{ASSISTANT}", "chosen": chosen, "rejected": rejected}
            elif fmt == "conversational":
                row = {"prompt": [{"role": "user", "content": c["prompt"]}],
                       "chosen": [{"role": "assistant", "content": chosen}],
                       "rejected": [{"role": "assistant", "content": rejected}]}
            else:
                row = {"chosen": f"{HUMAN}{c['prompt']}{AI}{chosen}", "rejected": f"{HUMAN}{c['prompt']}{AI}{rejected}"}
            rows.append({**row, **ids})
    return rows


def _message(value, role: str) -> str:
    """The text of a one-message list [{"role": role, "content": text}] (TRL's conversational format)."""
    if (not isinstance(value, list) or len(value) != 1 or not isinstance(value[0], dict)
            or value[0].get("role") != role or not isinstance(value[0].get("content"), str)):
        raise DataError(f"expected one {role} message [{{'role': '{role}', 'content': ...}}] (the chat format "
                        "has one turn)")
    return value[0]["content"]


def _hh(text) -> tuple[str, str]:
    """(prompt, response) of a single-turn HH string '\\n\\nHuman: Q\\n\\nAssistant: A'."""
    if not isinstance(text, str) or not text.startswith(HUMAN) or text.count(HUMAN) != 1 or text.count(AI) != 1:
        raise DataError("expected one HH turn, '\\n\\nHuman: ...\\n\\nAssistant: ...' (the chat format has one turn)")
    prompt, response = text[len(HUMAN):].split(AI)
    return prompt, response


def from_row(row: dict) -> dict:
    """One pair row of any FORMATS as {"prompt", "chosen", "rejected"} in plain text."""
    if "prompt" not in row:  # HH: the prompt is inside both strings
        if "chosen" not in row or "rejected" not in row:
            raise DataError("a pair needs prompt, chosen and rejected (TRL) or chosen and rejected (HH)")
        (p1, chosen), (p2, rejected) = _hh(row["chosen"]), _hh(row["rejected"])
        if p1 != p2:
            raise DataError("chosen and rejected answer different prompts")
        return {"prompt": p1, "chosen": chosen, "rejected": rejected}
    if isinstance(row["prompt"], list):
        return {"prompt": _message(row["prompt"], "user"), "chosen": _message(row.get("chosen"), "assistant"),
                "rejected": _message(row.get("rejected"), "assistant")}
    out = {}
    for key in ("prompt", "chosen", "rejected"):
        if not isinstance(row.get(key), str):
            raise DataError(f"expected a string, got {type(row.get(key)).__name__}", field=key)
        out[key] = row[key]
    p = out["prompt"]
    if p.startswith(USER) and p.endswith(ASSISTANT):
        out["prompt"] = p[len(USER):-len(ASSISTANT)]
    out["chosen"], out["rejected"] = (t.removesuffix(END) for t in (out["chosen"], out["rejected"]))
    if not out["prompt"].strip():
        raise DataError("empty prompt", field="prompt")
    return out


def read_pairs(path: str, labeler: str = "import", source: str = "human") -> list[dict]:
    """A pairs file (TRL, TRL conversational or HH rows) as K = 2 comparisons; a row it cannot use is a DataError
    naming its line. A row's own prompt_id and labeler are kept."""
    out = []
    for line, row in enumerate(iter_jsonl(path, (), unique_key=None), 1):
        try:
            pair = from_row(row)
        except DataError as e:
            raise e.at(path, line) from None
        c = trl_pairs_to_comparisons([pair], labeler=str(row.get("labeler", labeler)), source=source)[0]
        if isinstance(row.get("prompt_id"), str):
            c["prompt_id"] = row["prompt_id"]
        out.append(c)
    if not out:
        raise DataError(f"{path}: no pairs in it (the file is empty)")
    return out


@dataclass
class PairsConfig:
    comparisons: str = ""
    """K-way comparisons (train_rm.py's comparisons.jsonl, or label.py's export) to write as pairs"""
    out: str = ""
    """the pairs file to write (JSONL)"""
    format: str = "trl"
    """trl (prompt in the chat format), conversational (TRL's message lists) or hh (Anthropic HH strings)"""
    keep_below_cutoff: bool = False
    """keep the comparisons of labelers under the gold-agreement cutoff"""
    CHOICES: ClassVar[dict] = {"format": FORMATS}


def main(cfg: PairsConfig) -> list[dict]:
    from nanorlhf.infra.cli import UsageError
    if not cfg.comparisons or not cfg.out:
        raise UsageError("give --comparisons=FILE and --out=FILE")
    comps = read_jsonl(cfg.comparisons, COMPARISON, nonempty="comparisons")
    rows = to_rows(comps, cfg.format, cfg.keep_below_cutoff)
    os.makedirs(os.path.dirname(cfg.out) or ".", exist_ok=True)
    write_jsonl(cfg.out, rows)
    skipped = sum(bool(c.get("below_cutoff")) for c in comps) if not cfg.keep_below_cutoff else 0
    print(f"{len(comps)} comparisons -> {len(rows)} {cfg.format} pairs in {cfg.out}"
          + (f" ({skipped} comparisons of labelers below the cutoff left out)" if skipped else ""))
    return rows


if __name__ == "__main__":
    from nanorlhf.infra.cli import run
    run(main, PairsConfig, __doc__)
