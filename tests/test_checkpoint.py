"""Checkpoints: safe loading, atomic writes, damage detected, exact resume, same seed same run."""
import os
import subprocess
import sys

import pytest
import torch

import pretrain
from nanorlhf import checkpoint
from nanorlhf.checkpoint import CheckpointError, hash_file, load_checkpoint, recorded_hashes, save_checkpoint
from nanorlhf.infra import fileio
from nanorlhf.infra.fileio import file_sha256
from nanorlhf.infra.config import parse_config
from nanorlhf.tokenizer import Tokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Evil:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))  # unpickling this would create the file


def test_code_running_pickle_is_refused(tmp_path):
    """A .pt whose pickle would create a sentinel file is refused, and the sentinel never appears."""
    sentinel, bad = tmp_path / "pwned", tmp_path / "bad.pt"
    torch.save({"model": Evil(str(sentinel))}, bad)
    assert not sentinel.exists()
    with pytest.raises(CheckpointError, match="refused"):
        load_checkpoint(bad)
    assert not sentinel.exists()


def test_round_trip_keeps_everything(tmp_path):
    """Model, config, step, data position and RNG states come back as saved."""
    m = torch.nn.Linear(3, 2)
    save_checkpoint(tmp_path / "c.pt", model=m.state_dict(), config={"a": 1}, step=7, data_pos={"epoch": 1})
    ck = load_checkpoint(tmp_path / "c.pt")
    assert ck["step"] == 7 and ck["config"] == {"a": 1} and ck["data_pos"] == {"epoch": 1}
    assert torch.equal(ck["model"]["weight"], m.weight)
    assert set(ck["rng"]) >= {"python", "numpy", "torch"}


def test_failed_write_keeps_previous_checkpoint(tmp_path, monkeypatch):
    """A writer failing half way leaves the previous checkpoint loadable (its hash beside it unchanged) and no temp
    file behind."""
    path = tmp_path / "c.pt"
    save_checkpoint(path, model={"w": torch.ones(3)}, config={}, step=1)

    def half_write(obj, f):
        f.write(b"PK\x03\x04 half a file")
        raise OSError("disk full")
    monkeypatch.setattr(checkpoint.torch, "save", half_write)
    with pytest.raises(OSError):
        save_checkpoint(path, model={"w": torch.zeros(3)}, config={}, step=2)
    monkeypatch.undo()
    assert load_checkpoint(path)["step"] == 1
    assert sorted(os.listdir(tmp_path)) == ["c.pt", "c.pt.sha256"]


def flip(path, n: int = 256) -> None:
    """Invert n bytes in the middle of a file, as a bad disk or a bad copy might."""
    raw = bytearray(open(path, "rb").read())
    mid = len(raw) // 2
    raw[mid:mid + n] = bytes(b ^ 0xFF for b in raw[mid:mid + n])
    open(path, "wb").write(raw)


def test_a_damaged_checkpoint_is_refused_as_damaged(tmp_path):
    """256 flipped bytes, which torch.load itself reads without a word: refused as damaged, by the SHA-256 beside the
    file or, where it has none (an older checkpoint), by the archive's own CRCs."""
    path = tmp_path / "c.pt"
    save_checkpoint(path, model={"w": torch.randn(64, 64)}, config={}, step=1)
    assert open(hash_file(path)).read().split() == [file_sha256(path, 64), "c.pt"]  # sha256sum -c reads it
    flip(path)
    assert torch.load(path, weights_only=True)["step"] == 1                         # what torch alone does
    with pytest.raises(CheckpointError, match="c.pt is damaged: its content does not match the SHA-256"):
        load_checkpoint(path)
    os.remove(hash_file(path))
    with pytest.raises(CheckpointError, match="c.pt is damaged: its archive entry .* fails its CRC check"):
        load_checkpoint(path)


def test_a_kill_between_a_checkpoint_and_its_hash_leaves_one_that_loads(tmp_path, monkeypatch):
    """While a save replaces a checkpoint its hash file lists the old and the new hash: killed before the new file
    takes the old one's place (here: os.replace fails), the old checkpoint still loads; after, only the new hash."""
    path = tmp_path / "c.pt"
    save_checkpoint(path, model={"w": torch.ones(3)}, config={}, step=1)
    real_replace = os.replace

    def killed_at_the_checkpoints_rename(src, dst):
        if os.fspath(dst) == str(path):
            raise KeyboardInterrupt  # the process dies here
        real_replace(src, dst)
    monkeypatch.setattr(fileio.os, "replace", killed_at_the_checkpoints_rename)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(path, model={"w": torch.zeros(3)}, config={}, step=2)
    monkeypatch.undo()
    assert len(recorded_hashes(path)) == 2 and load_checkpoint(path)["step"] == 1
    save_checkpoint(path, model={"w": torch.zeros(3)}, config={}, step=2)
    assert recorded_hashes(path) == [file_sha256(path, 64)] and load_checkpoint(path)["step"] == 2


# -----------------------------------------------------------------------------
# exact resume through pretrain.py on a tiny hermetic corpus

def tiny_corpus(tmp_path):
    text = "\n\n".join(f"Encyclopedia: fox {i % 7} lives in the {['mill', 'pond', 'hill'][i % 3]}. "
                       f"It likes {['plums', 'fish', 'bread'][i % 3]} and {i % 5} red hats."
                       for i in range(300))
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(text)
    Tokenizer.train(text, vocab_size=300).save(tmp_path / "tokenizer.tiktoken")
    return corpus


def flags(corpus, out_dir, **kw):
    base = dict(corpus=str(corpus), out_dir=str(out_dir), n_layer=1, n_head=2, n_embd=32, block_size=32,
                batch_size=4, max_steps=12, warmup=2, eval_every=6, eval_batches=1, ckpt_every=6,
                log_every=6, dropout=0.1)
    base.update(kw)
    return [f"--{k}={v}" for k, v in base.items()]


def params(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_resume_after_sigkill_is_exact(tmp_path):
    """N steps straight equal k steps, SIGKILL, resume, N-k steps: same losses and parameters."""
    corpus = tiny_corpus(tmp_path)
    straight = pretrain.main(parse_config(pretrain.Config, flags(corpus, tmp_path / "a")))
    cmd = [sys.executable, "pretrain.py", *flags(corpus, tmp_path / "b", kill_at_step=6)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == -9, proc.stderr[-2000:]  # killed by SIGKILL right after step 6's checkpoint
    resumed = pretrain.main(parse_config(pretrain.Config, flags(corpus, tmp_path / "b", resume=True)))
    assert resumed["losses"] == straight["losses"][6:]
    a, b = params(straight["model"]), params(resumed["model"])
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_resume_with_changed_config_fails_loudly(tmp_path):
    """Resuming with a different config names the differing field."""
    corpus = tiny_corpus(tmp_path)
    pretrain.main(parse_config(pretrain.Config, flags(corpus, tmp_path / "a", max_steps=6)))
    with pytest.raises(CheckpointError, match="lr"):
        pretrain.main(parse_config(pretrain.Config, flags(corpus, tmp_path / "a", max_steps=6,
                                                                   resume=True, lr=0.5)))


def test_same_seed_same_run(tmp_path):
    """Two runs with one seed give identical losses and weights; another seed differs."""
    corpus = tiny_corpus(tmp_path)
    runs = [pretrain.main(parse_config(pretrain.Config, flags(corpus, tmp_path / n, max_steps=6, seed=s)))
            for n, s in (("a", 0), ("b", 0), ("c", 1))]
    assert runs[0]["losses"] == runs[1]["losses"]
    assert runs[0]["losses"] != runs[2]["losses"]
    a, b = params(runs[0]["model"]), params(runs[1]["model"])
    assert all(torch.equal(a[k], b[k]) for k in a)


# -----------------------------------------------------------------------------
# checkpoints that travel: the tokenizer inside, never a path


def test_moving_the_data_folder_breaks_neither_export_nor_sample(tmp_path):
    """A checkpoint holds its tokenizer itself (no path): with the folder it was trained from renamed, the model
    loads with the same tokenizer, exports, and answers a prompt through sample.py."""
    import sample
    from nanorlhf.checkpoint import load_model
    from nanorlhf.interop.export import ExportConfig, export
    data = tmp_path / "data"
    data.mkdir()
    corpus = tiny_corpus(data)
    pretrain.main(parse_config(pretrain.Config, flags(corpus, tmp_path / "out", max_steps=2)))
    ck = load_checkpoint(tmp_path / "out" / "ckpt.pt")
    assert isinstance(ck["extra"]["tokenizer"], dict) and str(tmp_path) not in repr(ck["extra"]["tokenizer"])
    before = Tokenizer.load(data / "tokenizer.tiktoken")
    os.rename(data, tmp_path / "moved")
    _, tok, _ = load_model(tmp_path / "out" / "ckpt.pt")
    assert tok.enc._mergeable_ranks == before.enc._mergeable_ranks and tok.eot_id == before.eot_id
    assert export(ExportConfig(ckpt=str(tmp_path / "out" / "ckpt.pt"), out=str(tmp_path / "hf")))["files"]
    rows = sample.main(parse_config(sample.Config, [f"--ckpt={tmp_path}/out/ckpt.pt", "--prompt=fox 3 lives",
                                                    "--max_new_tokens=4"]))
    assert rows[0][0]["prompt"] == "fox 3 lives"


def test_an_older_checkpoint_finds_its_tokenizer_by_path_or_beside_it(tmp_path):
    """A checkpoint written when extra["tokenizer"] was a path still loads: from that path, then (the file moved)
    from beside the checkpoint; with the file gone, one line names the path and where to put the file."""
    from nanorlhf.checkpoint import load_model
    from nanorlhf.model import GPT, GPTConfig
    tok_dir, out = tmp_path / "data", tmp_path / "out"
    tok_dir.mkdir()
    out.mkdir()
    tok = Tokenizer.train("a fox and a hen " * 40, vocab_size=270)
    tok.save(tok_dir / "tokenizer.tiktoken")
    mc = GPTConfig(vocab_size=tok.vocab_size, block_size=16, n_layer=1, n_head=2, n_embd=16)
    save_checkpoint(out / "ckpt.pt", model=GPT(mc).state_dict(), config={}, with_rng=False,
                    extra={"model_config": mc.__dict__, "tokenizer": str(tok_dir / "tokenizer.tiktoken")})
    assert load_model(out / "ckpt.pt")[1].vocab_size == tok.vocab_size
    for name in ("tokenizer.tiktoken", "tokenizer.tiktoken.json"):
        os.rename(tok_dir / name, out / name)
    assert load_model(out / "ckpt.pt")[1].vocab_size == tok.vocab_size
    for name in ("tokenizer.tiktoken", "tokenizer.tiktoken.json"):
        os.remove(out / name)
    with pytest.raises(CheckpointError, match="no longer exists.*beside the checkpoint"):
        load_model(out / "ckpt.pt")


def test_a_path_written_another_way_is_no_config_change():
    """Resuming with --data_dir=data/tiny/ where the run had data/tiny is allowed; another value is still refused."""
    ck = {"config": {"data_dir": "data/tiny", "lr": 0.1}}
    checkpoint.check_resume_config(ck, {"data_dir": "data/tiny/", "lr": 0.1})
    checkpoint.check_resume_config(ck, {"data_dir": "./data//tiny", "lr": 0.1})
    with pytest.raises(CheckpointError, match="data_dir: 'data/tiny' -> 'data/small'"):
        checkpoint.check_resume_config(ck, {"data_dir": "data/small", "lr": 0.1})
