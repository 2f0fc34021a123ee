"""One non-finite policy for every training loop (nanorlhf/infra/guard.py), and no non-finite model on disk; a finite
run that diverges or learns nothing stops too, and saves nothing."""
import os

import pytest
import torch

import train_rm
import train_sft
from nanorlhf.checkpoint import CheckpointError, save_checkpoint
from nanorlhf.infra import cli
from nanorlhf.infra.config import parse_config
from nanorlhf.infra.guard import DivergedError, NonFiniteError, NonFiniteGuard, check_val


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


def test_an_epoch_of_zero_gradients_is_a_failure():
    """end_epoch raises when every step of the epoch had a zero gradient norm, not when one step moved; a check
    without a gradient (PPO's score) counts for neither."""
    guard = NonFiniteGuard()
    guard.check(loss=1.0, grad_norm=0.0)
    guard.check(loss=1.0, grad_norm=0.5)
    guard.end_epoch()                                      # one step moved: fine
    guard.check(score=1.0)
    guard.end_epoch()                                      # no gradient seen at all: nothing to judge
    guard.check(loss=1.0, grad_norm=0.0)
    with pytest.raises(DivergedError, match="every gradient of the epoch 3 was zero"):
        guard.end_epoch("epoch 3")
    check_val(9.9, 1.0, "after epoch 1")                   # under 10x its start
    with pytest.raises(DivergedError, match="after epoch 2 is 10.1, over 10x its start"):
        check_val(10.1, 1.0, "after epoch 2")


def sft_flags(stages, out, *extra):
    return ["--preset=tiny", f"--base={stages['out']}/base/ckpt.pt", f"--data_dir={stages['data']}",
            f"--out_dir={out}", "--epochs=1", *extra]


def test_a_diverging_sft_run_exits_1_and_saves_nothing(stages, tmp_path, capsys):
    """train_sft.py --lr=1e3: the validation loss ends its epoch far past 10x the base model's, so the run stops in
    one line (exit 1) and writes neither the epoch's weights nor a checkpoint."""
    out = tmp_path / "sft"
    with pytest.raises(SystemExit) as e:
        # float32: under bfloat16 (the tiny preset's auto) the gradients overflow before the loss is judged
        cli.run(train_sft.main, train_sft.Config, train_sft.__doc__, sft_flags(stages, out, "--lr=1e3",
                                                                               "--dtype=float32"))
    err = capsys.readouterr().err
    assert e.value.code == 1 and len(err.strip().splitlines()) == 1 and "diverged" in err, err
    assert not [n for n in os.listdir(out) if n.endswith(".pt")]


def test_zero_gradients_for_an_epoch_stop_sft_before_it_saves(stages, tmp_path, monkeypatch):
    """Every gradient zeroed after the backward pass (as a clip of 0 would): the epoch changes nothing, and SFT
    stops with DivergedError before writing its weights."""
    def zero_all(model, max_norm):
        for p in model.parameters():
            if p.grad is not None:
                p.grad.zero_()
        return 0.0
    monkeypatch.setattr(train_sft, "clip_grad", zero_all)
    with pytest.raises(DivergedError, match="every gradient of the epoch 1 was zero"):
        train_sft.main(parse_config(train_sft.Config, sft_flags(stages, tmp_path / "sft")))
    assert not [n for n in os.listdir(tmp_path / "sft") if n.endswith(".pt")]
