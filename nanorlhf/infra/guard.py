"""One policy for a non-finite loss, shared by every training loop (pretraining, SFT, RM, PPO, DPO).

A step whose loss, gradient norm or reward is NaN or infinite is skipped and counted;
`max_consecutive` such steps in a row stop the run with NonFiniteError, a plain message
naming the quantities and steps. save_checkpoint refuses a model with a non-finite
weight (nanorlhf/checkpoint.py), so a diverged run never leaves a model behind.

A finite run can diverge too. `check_val` stops it (DivergedError) when the validation loss
rises past DIVERGED times its start, and `end_epoch` when every gradient of an epoch was zero
(nothing was learned: a clip of 0, a loss that does not reach the weights); each stage calls
them before it saves, so such a run saves nothing.

Example:
    guard = NonFiniteGuard(max_consecutive=3)
    loss.backward(); gnorm = clip_grad(model, 1.0)
    if guard.check(loss=loss, grad_norm=gnorm):
        opt.step()                      # else: skipped, counted in guard.skipped
"""
import math

import torch


DIVERGED = 10.0  # a validation loss this many times its start means the run diverged


class NonFiniteError(RuntimeError):
    """Too many non-finite steps in a row: the run stops rather than train on NaN."""


class DivergedError(NonFiniteError):
    """A finite run that diverged (validation loss far above its start) or learned nothing (zero gradients)."""


class NonFiniteGuard:
    """Call .check(loss=..., reward=..., grad_norm=...) once per step.

    Returns True if every value is finite, else False (skip the step; counted
    in .skipped). max_consecutive bad steps in a row raise NonFiniteError naming
    the quantities and steps.
    """

    def __init__(self, max_consecutive=3):
        self.max_consecutive = max_consecutive
        self.step = 0  # number of checks so far
        self.skipped = 0
        self.recent = []  # descriptions of the current run of bad steps
        self.graded = self.moved = False  # this epoch had a step with a gradient norm, and a non-zero one

    def check(self, **named_scalars):
        step, self.step = self.step, self.step + 1
        bad = [name for name, v in named_scalars.items() if not _all_finite(v)]
        if not bad:
            self.recent = []
            if "grad_norm" in named_scalars:
                self.graded, self.moved = True, self.moved or float(named_scalars["grad_norm"]) != 0.0
            return True
        self.skipped += 1
        self.recent.append(f"step {step}: " + ", ".join(f"{n}={_show(named_scalars[n])}" for n in bad))
        if len(self.recent) >= self.max_consecutive:
            raise NonFiniteError(
                f"{len(self.recent)} consecutive steps with non-finite values, stopping (lower the learning "
                "rate, or check the data): "
                + "; ".join(self.recent)
            )
        return False

    def end_epoch(self, what: str = "epoch") -> None:
        """At the end of an epoch (or a PPO iteration): DivergedError if no step of it had a non-zero gradient."""
        if self.graded and not self.moved:
            raise DivergedError(f"every gradient of the {what} was zero: training changes nothing; stopping "
                                "without saving")
        self.graded = self.moved = False


def _all_finite(v):
    if isinstance(v, torch.Tensor):
        return bool(torch.isfinite(v).all())
    return math.isfinite(float(v))


def _show(v):
    if isinstance(v, torch.Tensor) and v.numel() == 1:
        v = v.item()
    return v if not isinstance(v, torch.Tensor) else "tensor with non-finite entries"


def check_val(loss: float, start: float | None, where: str) -> None:
    """DivergedError if a validation loss has risen past DIVERGED times its start (None: not known, not checked)."""
    if start is not None and not loss <= DIVERGED * start:
        raise DivergedError(f"the validation loss {where} is {loss:.4g}, over {DIVERGED:g}x its start ({start:.4g}): "
                            "the run diverged; stopping without saving (lower the learning rate)")
