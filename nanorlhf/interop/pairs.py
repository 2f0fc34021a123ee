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

In: `read_pairs` takes any of the three formats, TRL's implicit-prompt rows too (chosen and rejected holding the
prompt: split at the last <|assistant|>, or at the longest shared prefix), strips the chat markers and returns K = 2
comparisons. A multi-turn row (HH, messages, or several <|user|> turns) is reduced to its last turn, since the chat
format has one; a row it cannot use is skipped; both are counted and reported, and only a file with no usable row
fails, naming the formats it read.
"""
from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from typing import ClassVar

from nanorlhf.infra.jsonl import COMPARISON, iter_jsonl, read_jsonl, write_jsonl
from nanorlhf.infra.schemas import PAIR, DataError, validate_row
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


# -----------------------------------------------------------------------------
# in: any of the formats, explicit or implicit prompt, one turn or the last of several


def _text(value, what: str) -> str:
    if not isinstance(value, str):
        raise DataError(f"expected a string, got {type(value).__name__}", field=what)
    return value


def _messages(value, what: str) -> list[dict]:
    if not (isinstance(value, list) and value and all(isinstance(m, dict) and isinstance(m.get("content"), str)
                                                      for m in value)):
        raise DataError("expected a list of messages [{'role': ..., 'content': ...}]", field=what)
    return value


def _hh(text) -> tuple[str, str, bool]:
    """(last human turn, last assistant reply, whether earlier turns were dropped) of an HH string."""
    text = _text(text, "chosen")
    if not text.startswith(HUMAN) or AI not in text:
        raise DataError("expected '\\n\\nHuman: ...\\n\\nAssistant: ...' (Anthropic HH)")
    head, response = text.rsplit(AI, 1)
    return head.rsplit(HUMAN, 1)[1], response, text.count(HUMAN) > 1


def _last_turn(messages: list[dict]) -> tuple[str, bool]:
    """The last user message of a conversation's prompt (a system message folded in as "{system}\\n\\n{user}", as
    the exported chat template does), and whether earlier turns were dropped."""
    system = [m["content"] for m in messages if m.get("role") == "system"]
    turns = [m for m in messages if m.get("role") != "system"]
    if not turns or turns[-1].get("role") != "user":
        raise DataError("the prompt's messages do not end with a user turn")
    return "".join(f"{t}\n\n" for t in system) + turns[-1]["content"], len(turns) > 1


def _split_implicit(chosen: str, rejected: str) -> tuple[str, str, str]:
    """TRL's implicit prompt: the chat-format prompt up to the last <|assistant|>, else the longest shared prefix
    (ended before a space, as TRL's maybe_extract_prompt does)."""
    if ASSISTANT in chosen and ASSISTANT in rejected:
        (p1, a), (p2, b) = chosen.rsplit(ASSISTANT, 1), rejected.rsplit(ASSISTANT, 1)
        if p1 == p2:
            return p1 + ASSISTANT, a, b
    n = next((i for i, (x, y) in enumerate(zip(chosen, rejected)) if x != y), min(len(chosen), len(rejected)))
    n -= n > 0 and chosen[n - 1] == " "
    return chosen[:n], chosen[n:], rejected[n:]


def detect(row: dict) -> str:
    """A pair row's format: trl or conversational (each with "implicit" when the prompt is inside chosen and
    rejected), hh, or unknown."""
    if "chosen" not in row or "rejected" not in row:
        return "unknown"
    implicit = "" if "prompt" in row else " implicit"
    if isinstance(row["chosen"], list) or isinstance(row.get("prompt"), list):
        return "conversational" + implicit
    if implicit and isinstance(row["chosen"], str) and row["chosen"].startswith(HUMAN):
        return "hh"
    return "trl" + implicit


def from_row(row: dict) -> tuple[dict, bool]:
    """One pair row of any format (detect) as {"prompt", "chosen", "rejected"} in plain text, and whether it was
    reduced to its last turn."""
    fmt = detect(row)
    if fmt == "unknown":
        raise DataError("a pair needs prompt, chosen and rejected (TRL) or chosen and rejected (implicit prompt, HH)")
    chosen, rejected = row["chosen"], row["rejected"]
    if fmt == "hh":
        (p1, a, many), (p2, b, _) = _hh(chosen), _hh(rejected)
        if p1 != p2:
            raise DataError("chosen and rejected answer different prompts")
        return {"prompt": p1, "chosen": a, "rejected": b}, many
    if fmt.startswith("conversational"):  # TRL's message lists
        chosen, rejected = _messages(chosen, "chosen"), _messages(rejected, "rejected")
        prompt = _messages(row["prompt"], "prompt") if "prompt" in row else chosen[:-1]
        if "prompt" not in row and chosen[:-1] != rejected[:-1]:
            raise DataError("chosen and rejected answer different conversations")
        if chosen[-1].get("role") != "assistant" or rejected[-1].get("role") != "assistant":
            raise DataError("chosen and rejected must end with an assistant message")
        text, many = _last_turn(prompt)
        return {"prompt": text, "chosen": chosen[-1]["content"], "rejected": rejected[-1]["content"]}, many
    chosen, rejected = _text(chosen, "chosen"), _text(rejected, "rejected")
    if "prompt" in row:
        prompt = _text(row["prompt"], "prompt")
    else:
        prompt, chosen, rejected = _split_implicit(chosen, rejected)
    many = prompt.count(USER) > 1
    if prompt.endswith(ASSISTANT) and USER in prompt:
        prompt = prompt[:-len(ASSISTANT)].rsplit(USER, 1)[1]
    chosen, rejected = (t.removesuffix(END) for t in (chosen, rejected))
    if not prompt.strip():
        raise DataError("empty prompt", field="prompt")
    return {"prompt": prompt, "chosen": chosen, "rejected": rejected}, many


def read_pairs(path: str, labeler: str = "import", source: str = "human") -> list[dict]:
    """A pairs file as K = 2 comparisons, keeping what it can: each row in any format of from_row, multi-turn rows
    reduced to their last turn, rows it cannot use skipped; what was reduced or skipped is counted and printed
    (the first skip with its line). A file with no usable row is a DataError naming the formats it found."""
    pairs, kept, formats, reduced, skipped = [], [], Counter(), 0, []
    for line, row in enumerate(iter_jsonl(path, (), unique_key=None), 1):
        fmt = detect(row)
        try:
            pair, many = from_row(row)
            validate_row(pair, PAIR)
        except DataError as e:
            skipped.append(f"{e.at(path, line)} ({fmt} row)")
            continue
        formats[fmt] += 1
        reduced += many
        pairs.append(pair)
        kept.append(row)
    if not pairs:
        what = (f"none of its {len(skipped)} rows is usable (the first: {skipped[0]})" if skipped
                else "no pairs in it (the file is empty)")
        raise DataError(f"{path}: {what}")
    out = trl_pairs_to_comparisons(pairs, labeler=labeler, source=source)
    for c, row in zip(out, kept):
        c["labeler"] = str(row.get("labeler", labeler))
        if isinstance(row.get("prompt_id"), str):
            c["prompt_id"] = row["prompt_id"]
    notes = ([f"{reduced} multi-turn rows reduced to their last turn"] if reduced else []) + (
        [f"{len(skipped)} rows skipped (the first: {skipped[0]})"] if skipped else [])
    print(f"{path}: {len(out)} pairs ({', '.join(f'{n} {f}' for f, n in formats.items())})"
          + (f"; {'; '.join(notes)}" if notes else ""))
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
