"""One checkpoint format for every stage: safe to load, written atomically, exact to resume.

A checkpoint is a plain dict of tensors and Python primitives:
    model       state_dict of the network
    config      the script's resolved config, as a dict (and its hash)
    optim       optimiser state_dict (absent for inference-only files)
    step        optimisation steps done
    data_pos    where the data stream stands (script-defined dict of ints)
    rng         python, numpy and torch RNG states
    extra       anything else small (metrics, parent checkpoint hashes, ...)

Loading uses `torch.load(weights_only=True)` only: a file whose pickle would
run code is refused. Writing goes through a temp file in
the same folder, fsync and os.replace (check 2).

Example:
    save_checkpoint("out/ckpt.pt", model=m.state_dict(), config=asdict(cfg), step=10)
    ck = load_checkpoint("out/ckpt.pt")
    m.load_state_dict(ck["model"])
"""
from __future__ import annotations

import os
import pickle
import random
import zipfile

import numpy as np
import torch

from nanorlhf.infra.cli import UserError
from nanorlhf.infra.config import config_diff, config_hash
from nanorlhf.infra.fileio import atomic_write


class CheckpointError(UserError, RuntimeError):
    """A checkpoint that is missing, unsafe, corrupt or from a different config."""


class MissingCheckpoint(CheckpointError):
    """No checkpoint at a path an earlier stage should have written."""

    def __init__(self, path: str):
        super().__init__(f"no checkpoint at {path}")
        self.path = self.missing = path

    def __reduce__(self):  # rebuilt from its path, as a lane's process sends it back (nanorlhf/infra/lanes.py)
        return type(self), (self.path,)


# -----------------------------------------------------------------------------
# RNG state: python, numpy and torch, as weights_only-loadable values


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def rng_state() -> dict:
    name, keys, pos, has_gauss, gauss = np.random.get_state()
    return {
        "python": random.getstate(),
        "numpy": {"keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
                  "has_gauss": int(has_gauss), "gauss": float(gauss)},
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }


def set_rng_state(s: dict) -> None:
    v = s["python"]
    random.setstate((v[0], tuple(v[1]), v[2]))
    n = s["numpy"]
    np.random.set_state(("MT19937", n["keys"].numpy().astype(np.uint32), n["pos"],
                         n["has_gauss"], n["gauss"]))
    torch.set_rng_state(s["torch"])
    if s.get("cuda") and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(s["cuda"][:torch.cuda.device_count()])


# -----------------------------------------------------------------------------
# save and load


def save_checkpoint(path, *, model: dict, config: dict, step: int = 0, optim: dict | None = None,
                    data_pos: dict | None = None, extra: dict | None = None,
                    with_rng: bool = True) -> None:
    """Write atomically: temp file in the same folder, flush, fsync, os.replace.

    A model (or a state dict in extra, such as PPO's value function) with a NaN or infinite
    weight is refused with CheckpointError: a diverged run leaves no model behind.
    """
    for name, state in [("model", model)] + [(k, v) for k, v in (extra or {}).items() if isinstance(v, dict)]:
        bad = [k for k, t in state.items() if isinstance(t, torch.Tensor) and t.is_floating_point()
               and not bool(torch.isfinite(t).all())]
        if bad:
            raise CheckpointError(f"refusing to save {path}: {name} has non-finite weights in {', '.join(bad[:3])}")
    ck = {"model": model, "config": config, "config_hash": config_hash(config), "step": step,
          "data_pos": data_pos or {}, "extra": extra or {}}
    if optim is not None:
        ck["optim"] = optim
    if with_rng:
        ck["rng"] = rng_state()
    atomic_torch_save(ck, path)


def atomic_torch_save(obj, path) -> None:
    atomic_write(path, lambda f: torch.save(obj, f))


def load_checkpoint(path, map_location="cpu") -> dict:
    """Load with weights_only=True; refuse anything that would need to run code."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise MissingCheckpoint(path)
    if not zipfile.is_zipfile(path):  # torch.save writes a zip archive; anything else is not one of ours
        raise CheckpointError(f"{path} is not a checkpoint (not a torch archive: truncated, or another kind of file)")
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as e:
        raise CheckpointError(
            f"refused to load {path}: it is not a plain tensor checkpoint "
            f"(loading it would need to run code). Details: {str(e).splitlines()[0]}") from None
    except (RuntimeError, EOFError) as e:
        raise CheckpointError(f"cannot read checkpoint {path}: {e}") from None


def check_resume_config(ck: dict, config: dict, ignore: tuple[str, ...] = ()) -> None:
    """Resuming with a changed config fails loudly, naming the fields that differ."""
    diff = config_diff(ck["config"], config, ignore=ignore)
    if diff:
        raise CheckpointError("cannot resume: the config differs from the checkpoint's in\n  "
                              + "\n  ".join(diff))


# -----------------------------------------------------------------------------
# models from checkpoints: every stage saves extra["model_config"] and extra["tokenizer"] (the tokenizer itself)


def checkpoint_tokenizer(saved, path: str):
    """The tokenizer a checkpoint holds (a dict: Tokenizer.to_dict), or, in checkpoints written before it was kept
    inside, the .tiktoken file it names: where it was, else by its name beside the checkpoint or in its run folder."""
    from nanorlhf.tokenizer import Tokenizer
    if isinstance(saved, dict):
        return Tokenizer.from_dict(saved)
    folder = os.path.dirname(os.path.abspath(path))
    for p in (saved, os.path.join(folder, os.path.basename(saved)),
              os.path.join(os.path.dirname(folder), os.path.basename(saved))):
        if os.path.isfile(p) and os.path.isfile(p + ".json"):
            return Tokenizer.load(p)
    raise CheckpointError(f"{path} names its tokenizer by a path that no longer exists ({saved}): put "
                          f"{os.path.basename(saved)} and its .json beside the checkpoint")


def load_model(path, device: str = "cpu", kind: str = "gpt", dropout: float | None = None):
    """(model, tokenizer, checkpoint) from a stage checkpoint; kind is "gpt" or "scalar"."""
    from nanorlhf.model import GPT, GPTConfig, ScalarHeadModel
    ck = load_checkpoint(path, map_location="cpu")  # the network is built on the CPU, then moved
    try:
        mc = dict(ck["extra"]["model_config"])
        tok = checkpoint_tokenizer(ck["extra"]["tokenizer"], os.fspath(path))
    except (KeyError, TypeError, ValueError):
        raise CheckpointError(f"{path} is not a stage checkpoint (it has no model config or tokenizer)") from None
    if dropout is not None:
        mc["dropout"] = dropout
    has = "a reward model" if "head.weight" in ck["model"] else "a language model"
    want = "a language model" if kind == "gpt" else "a reward model"
    if has != want:
        raise CheckpointError(f"{path} holds {has}, where {want} is needed")
    net = (GPT if kind == "gpt" else ScalarHeadModel)(GPTConfig(**mc))
    try:
        net.load_state_dict(ck["model"])
    except RuntimeError as e:
        raise CheckpointError(f"{path}: its weights do not fit its model config ({str(e).splitlines()[0]})") from None
    return net.to(device), tok, ck
