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

Beside each checkpoint, `<name>.sha256` holds its SHA-256 (the format `sha256sum -c` reads). torch
checks no checksum when it loads, so a file with flipped bytes would load and train; load_checkpoint
compares the file with that hash (and, for a file without one, the archive's own CRCs) and refuses a
damaged file as damaged. While a new checkpoint replaces an old one the hash file lists both, so a kill
at any moment leaves a checkpoint that matches it. The loader also names what a stage checkpoint lacks.

Example:
    save_checkpoint("out/ckpt.pt", model=m.state_dict(), config=asdict(cfg), step=10)
    ck = load_checkpoint("out/ckpt.pt")
    m.load_state_dict(ck["model"])
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
import pickle
import random
import zipfile

import numpy as np
import torch

from nanorlhf.infra.cli import UserError
from nanorlhf.infra.config import config_diff, config_hash
from nanorlhf.infra.fileio import atomic_write, file_sha256, write_text


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
          "data_pos": data_pos or {}, "extra": extra or {}, "from_checkpoint": paths_from(path, config)}
    if optim is not None:
        ck["optim"] = optim
    if with_rng:
        ck["rng"] = rng_state()
    atomic_torch_save(ck, path)


def paths_from(path, config: dict) -> dict[str, str]:
    """Each path the config names that exists (an input file or folder: data_dir, sft, rm, ...), relative to the
    checkpoint's folder: where to find it again once the run folder and its data have moved together."""
    here = os.path.dirname(os.path.abspath(os.fspath(path)))
    return {k: os.path.relpath(os.path.abspath(v), here) for k, v in config.items()
            if isinstance(v, str) and v and k != "out_dir" and os.path.exists(v)}


def saved_path(ck: dict, path, key: str) -> str:
    """The input a checkpoint's config names under `key` (its data_dir, say), found from here: as saved when it
    exists from the current folder, else at the place it had relative to the checkpoint (a moved run folder), else
    as saved ('' when the config has none).

    Example:
        saved_path(load_checkpoint("elsewhere/out/tiny/sft_a/ckpt.pt"), ..., "data_dir")  # elsewhere/data/tiny
    """
    saved = ck.get("config", {}).get(key, "")
    rel = ck.get("from_checkpoint", {}).get(key)
    if not saved or os.path.exists(saved) or rel is None:
        return saved
    moved = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(os.fspath(path))), rel))
    return moved if os.path.exists(moved) else saved


def weights_hash(state: dict) -> str:
    """SHA-256 (16 hex digits) of a state dict's names, dtypes, shapes and bytes: what a checkpoint holds, where
    the file's own hash also changes with torch's per-save serialization id."""
    h = hashlib.sha256()
    for k in sorted(state):
        t = state[k].detach().cpu().contiguous()
        h.update(f"{k}:{t.dtype}:{tuple(t.shape)}".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()[:16]


def hash_file(path) -> str:
    """The file beside a checkpoint that holds its SHA-256."""
    return os.fspath(path) + ".sha256"


def recorded_hashes(path) -> list[str] | None:
    """The hashes written beside a checkpoint (two while a save is replacing it), or None if there is no hash file."""
    try:
        with open(hash_file(path), encoding="utf-8") as f:
            return [line.split()[0] for line in f if line.strip()]
    except FileNotFoundError:
        return None


def atomic_torch_save(obj, path) -> None:
    """torch.save through atomic_write, with the file's hash written beside it: first the new hash beside the old
    (before the new file takes the old one's place), then the new alone."""
    path, name = os.fspath(path), os.path.basename(os.fspath(path))
    old, new = (recorded_hashes(path) or [])[:1], []

    def record(tmp: str) -> None:
        new.append(file_sha256(tmp, 64))
        write_text(hash_file(path), "".join(f"{h}  {name}\n" for h in new + old))
    atomic_write(path, lambda f: torch.save(obj, f), before_replace=record)
    write_text(hash_file(path), f"{new[0]}  {name}\n")


def restore_copy(src, dst) -> None:
    """Unless dst exists, write it as an exact copy of the checkpoint src (hash file too): a kept copy that a run
    writes right after src (train_ppo.py's iter{N}.pt), which a kill during its write left unwritten."""
    if os.path.exists(dst):
        return
    check_intact(os.fspath(src))
    with open(src, "rb") as f:
        data = f.read()
    atomic_write(dst, lambda f: f.write(data))
    write_text(hash_file(dst), f"{file_sha256(dst, 64)}  {os.path.basename(os.fspath(dst))}\n")
    print(f"wrote {dst}, which a killed run left unwritten")


def remove_checkpoint(path) -> None:
    """Remove a checkpoint and the hash beside it (if there)."""
    for p in (os.fspath(path), hash_file(path)):
        if os.path.exists(p):
            os.remove(p)


def check_intact(path: str) -> None:
    """Refuse a damaged file: one whose content does not match the hash beside it or, with no hash file, whose
    archive entries fail their CRC."""
    want = recorded_hashes(path)
    if want is not None and file_sha256(path, 64) not in want:
        raise CheckpointError(f"{path} is damaged: its content does not match the SHA-256 written beside it in "
                              f"{hash_file(path)} (or it was copied there without its own); retrain it or restore "
                              "a copy with its .sha256")
    if want is None:
        try:
            with zipfile.ZipFile(path) as z:
                bad = z.testzip()
        except (zipfile.BadZipFile, OSError, EOFError) as e:
            bad = str(e)
        if bad is not None:
            raise CheckpointError(f"{path} is damaged: its archive entry {bad} fails its CRC check")


def load_checkpoint(path, map_location="cpu") -> dict:
    """Load with weights_only=True; refuse anything that would need to run code, a damaged file, and a file
    without the "model" and "config" of a stage checkpoint."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise MissingCheckpoint(path)
    if not zipfile.is_zipfile(path):  # torch.save writes a zip archive; anything else is not one of ours
        raise CheckpointError(f"{path} is not a checkpoint (not a torch archive: truncated, or another kind of file)")
    check_intact(path)
    try:
        ck = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as e:
        raise CheckpointError(
            f"refused to load {path}: it is not a plain tensor checkpoint "
            f"(loading it would need to run code). Details: {str(e).splitlines()[0]}") from None
    except (RuntimeError, EOFError) as e:
        raise CheckpointError(f"cannot read checkpoint {path}: {e}") from None
    if not isinstance(ck, dict):
        raise CheckpointError(f"{path} is not a stage checkpoint: it holds a {type(ck).__name__}, not a dict")
    lacks = [k for k in ("model", "config") if not isinstance(ck.get(k), dict)]
    if lacks:
        raise CheckpointError(f"{path} is not a stage checkpoint: it has no {' or '.join(map(repr, lacks))} dict")
    return ck


def load_weights(path, map_location="cpu") -> dict:
    """A bare state dict (train_sft.py's epoch{E}.pt), refused like a checkpoint when damaged."""
    check_intact(os.fspath(path))
    return torch.load(path, map_location=map_location, weights_only=True)


def check_resume_config(ck: dict, config: dict, ignore: tuple[str, ...] = ()) -> None:
    """Resuming with a changed config fails loudly, naming the fields that differ; a path written another way
    (`data/tiny/` for `data/tiny`) is no change."""
    def plain(d: dict) -> dict:
        return {k: os.path.normpath(v) if isinstance(v, str) and os.sep in v else v for k, v in d.items()}
    diff = config_diff(plain(ck["config"]), plain(config), ignore=ignore)
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
        try:
            return Tokenizer.from_dict(saved)
        except (KeyError, TypeError, ValueError) as e:
            raise CheckpointError(f"{path}: the tokenizer it holds is damaged ({type(e).__name__}: {e})") from None
    if not isinstance(saved, str):
        raise CheckpointError(f"{path}: its tokenizer entry is neither a tokenizer nor a path")
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
        mc, saved_tok = dict(ck["extra"]["model_config"]), ck["extra"]["tokenizer"]
    except (KeyError, TypeError, ValueError):
        raise CheckpointError(f"{path} is not a stage checkpoint (it has no model config or tokenizer)") from None
    tok = checkpoint_tokenizer(saved_tok, os.fspath(path))  # a damaged tokenizer is a DataError naming it
    known = {f.name for f in dataclasses.fields(GPTConfig)}
    if set(mc) != known:
        odd = [f"unknown key {k!r}" for k in sorted(set(mc) - known)] + [f"no {k!r}" for k in sorted(known - set(mc))]
        raise CheckpointError(f"{path}: its model config does not describe a GPT ({', '.join(odd)})")
    if dropout is not None:
        mc["dropout"] = dropout
    has = "a reward model" if "head.weight" in ck["model"] else "a language model"
    want = "a language model" if kind == "gpt" else "a reward model"
    if has != want:
        raise CheckpointError(f"{path} holds {has}, where {want} is needed")
    try:
        net = (GPT if kind == "gpt" else ScalarHeadModel)(GPTConfig(**mc))
    except (ValueError, TypeError) as e:  # a ConfigError among them: a value no model can have
        raise CheckpointError(f"{path}: its model config is not valid ({e})") from None
    check_weights(path, net.state_dict(), ck["model"])
    net.load_state_dict(ck["model"])
    return net.to(device), tok, ck


def check_weights(path, want: dict, have: dict) -> None:
    """Name the weights a checkpoint lacks, has in excess, or has in another shape than its model config's."""
    missing, extra = [k for k in want if k not in have], [k for k in have if k not in want]
    shapes = [f"{k} {tuple(have[k].shape)} (expected {tuple(want[k].shape)})" for k in want
              if k in have and (not isinstance(have[k], torch.Tensor) or have[k].shape != want[k].shape)]
    for words, names in (("lacks", missing), ("has unknown weights", extra),
                         ("has weights of the wrong shape", shapes)):
        if names:
            more = f" and {len(names) - 3} more" if len(names) > 3 else ""
            raise CheckpointError(f"{path} {words}: {', '.join(names[:3])}{more}")
