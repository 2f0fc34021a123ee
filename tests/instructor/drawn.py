"""The held-out tests' cases are drawn from one seed: the grader draws it at grading time and passes it in
NANORLHF_GRADE_SEED (and prints it, so a failing case can be replayed with `grade --seed=S`); the suite's own
run uses 0. A failure names the seed."""
import os
import random

import torch

SEED = int(os.environ.get("NANORLHF_GRADE_SEED", "0"))


def generator(k: int) -> torch.Generator:
    """A torch generator for case k of the seed."""
    return torch.Generator().manual_seed(SEED * 1009 + k)


def rng(k: int) -> random.Random:
    """A Python generator for case k of the seed."""
    return random.Random(SEED * 1009 + k)


def close(got, want, what: str, atol=1e-6, rtol=1e-6):
    """assert_close whose message starts with what differs, the seed, then torch's own words, on one line."""
    torch.testing.assert_close(got, want, atol=atol, rtol=rtol, msg=lambda m: (
        f"{what} differs from the reference on a held-out case (seed {SEED}): " + " ".join(m.split())))
