"""Verifiable rewards: the tasks whose answer a rule can check from the response alone (RL from verifiable rewards).

After InstructGPT, RL moved to rewards a program computes, like GSM8K's exact match on the final number: no
reward model, no labeler. The world has such tasks; each check reads the response and the prompt's own answer
key (as GSM8K's is), never the gold utility or a labeler:

  closed_qa        the answer span appears in the response ("does not say" where the passage does not)
  extract          the names the response lists are exactly the answer key's
  classification   the response names one option, the right one
  constraints      every explicit constraint of the prompt holds (word limits, "mention X", "avoid X", n items)

`verifiable(p, response)` is 1.0 or 0.0, and None for a prompt no rule can check (a story, an open question),
which RLVR leaves out. `random_rewards` is the control: a fair coin per response, drawn independently of the
text, so a run on it learns nothing about the task (Shao et al. 2025, "Spurious rewards").

Example:
    verifiable(p, "The text says: the blue kite.")     # 1.0 when p.answer == "the blue kite"
"""
from __future__ import annotations

import re

import torch

from .lexicon import words
from .scorers import constraint_results

NOT_SAID = ("does not say", "not in the text", "does not tell", "no answer")


def checkable(p) -> bool:
    """Whether a rule can check a response to p."""
    return p.category in ("closed_qa", "extract", "classification") or (
        bool(p.constraints) and p.category not in ("open_qa",))


def _text(response: str) -> str:
    return " " + " ".join(words(response)) + " "


def _names(response: str) -> set[str]:
    return set(re.findall(r"\b[A-Z][a-z]+(?: [A-Z][a-z]+)*\b", response)) - {"The", "None"}


def verifiable(p, response: str) -> float | None:
    """1.0 if the rule for p's task accepts the response, 0.0 if not, None if no rule checks p."""
    if not checkable(p):
        return None
    ok = True
    if p.category == "closed_qa":
        t = _text(response)
        ok = any(f" {x} " in t for x in NOT_SAID) if p.answer is None else f" {' '.join(words(p.answer))} " in t
    elif p.category == "extract":
        ok = _names(response) == set(p.answer or [])
    elif p.category == "classification":
        said = [o for o in p.options if f" {o} " in _text(response)]
        ok = said == [p.answer]
    if p.constraints:
        ok = ok and all(sat for _, sat in constraint_results(None, p, response))
    return float(ok)


def random_rewards(n: int, generator: torch.Generator) -> torch.Tensor:
    """The control: n fair coins, 0 or 1, from the run's generator (independent of the responses).  # (n,)"""
    return torch.randint(0, 2, (n,), generator=generator).float()
