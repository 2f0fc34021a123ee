"""One non-finite policy for every training loop (nanorlhf/infra/guard.py), and no non-finite model on disk."""
import os

import pytest
import torch

import train_rm
from nanorlhf.checkpoint import CheckpointError, save_checkpoint
from nanorlhf.infra.config import parse_config
from nanorlhf.infra.guard import NonFiniteError, NonFiniteGuard


def test_non_finite_guard():
    """A NaN step is skipped and counted; max_consecutive in a row raise, naming what and when."""
    guard = NonFiniteGuard(max_consecutive=3)
    assert guard.check(loss=1.0, reward=torch.tensor(0.5))  # step 0
    assert not guard.check(loss=float("nan"), reward=0.1)  # step 1
    assert guard.check(loss=1.0)  # step 2 resets the run
    assert not guard.check(loss=1.0, grad_norm=float("inf"))  # step 3
    assert not guard.check(reward=torch.tensor([1.0, float("nan")]))  # step 4
    assert guard.skipped == 3
    with pytest.raises(NonFiniteError, match=r"step 3: grad_norm=inf.*step 4: reward.*step 5: loss=nan"):
        guard.check(loss=torch.tensor(float("nan")))  # step 5: third bad in a row


def test_save_checkpoint_refuses_non_finite_weights(tmp_path):
    """A model, or a state dict in extra (PPO's value function), with a NaN weight is never written."""
    good = {"w": torch.ones(2)}
    save_checkpoint(tmp_path / "ok.pt", model=good, config={})
    for model, extra in (({"w": torch.tensor([1.0, float("nan")])}, None),
                         (good, {"value": {"head": torch.tensor([float("inf")])}})):
        with pytest.raises(CheckpointError, match="non-finite"):
            save_checkpoint(tmp_path / "bad.pt", model=model, config={}, extra=extra)
    assert not os.path.exists(tmp_path / "bad.pt")


def test_diverging_rm_stops_and_saves_nothing(stages):
    """An RM fit at lr 1e9 stops with the guard's message (or the save refuses NaN weights): no model is left."""
    out = os.path.join(stages["out"], "rm_diverge")
    cfg = parse_config(train_rm.Config, ["--preset=tiny", f"--sft={stages['out']}/sft/ckpt.pt",
                                         f"--data_dir={stages['data']}", f"--out_dir={out}", "--lr=1e9",
                                         f"--comparisons={stages['out']}/rm/comparisons.jsonl"])
    with pytest.raises((NonFiniteError, CheckpointError), match="non-finite"):
        train_rm.main(cfg)
    assert not os.path.exists(os.path.join(out, "ckpt.pt"))
