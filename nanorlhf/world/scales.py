"""Scale knob: how big the world, corpus and prompt sets are.

Example:
    >>> SCALES["tiny"].sft, SCALES["paper"].rm
    (64, 33207)
"""
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Scale:
    """Sizes of one world; pipeline scripts may `dataclasses.replace` fields."""
    name: str
    n_characters: int       # village characters (6 facts each)
    n_places: int           # places (2 facts each)
    n_objects: int          # objects (4 facts each)
    n_nonexistent: int      # plausible names that never appear in the corpus
    myth_frac: float        # share of characters with one popular myth
    corpus_words: int       # target size of the pretraining corpus in words
    sft: int                # SFT prompts (with demonstrations); paper 12,725
    rm: int                 # RM prompts (ranked completions); paper 33,207
    ppo: int                # PPO prompts (no labels); paper 31,144
    val: int                # validation prompts (held-out organisations)
    test: int               # test prompts (held-out organisations)
    org_cap: int            # max prompts per organisation; paper ~200
    bench: int              # items per benchmark suite
    rm_extra: int = 0       # more RM prompts, drawn after every other set from new training organisations:
                            # growing it leaves the other sets and the first `rm` RM prompts as they are


SCALES = {
    "tiny": Scale("tiny", 12, 10, 10, 8, 0.25, 25_000, 64, 64, 64, 32, 32, 16, 8),
    "small": Scale("small", 60, 40, 40, 30, 0.3, 700_000, 1500, 1500, 2000, 300, 300, 60, 300),
    "paper": Scale("paper", 60, 40, 40, 30, 0.3, 3_500_000, 12725, 33207, 31144, 3000, 3000,
                   200, 1000),
}


def get_scale(scale):
    """Accept a name ("small") or a Scale; return a Scale."""
    if isinstance(scale, str) and scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}: one of {', '.join(SCALES)}")
    return SCALES[scale] if isinstance(scale, str) else scale


__all__ = ["Scale", "SCALES", "get_scale", "replace"]
