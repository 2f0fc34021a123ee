"""PPO resumes exactly: killed with SIGKILL after an iteration's checkpoint and resumed, it ends with the same
weights and optimiser state, bit for bit, as an uninterrupted run (prompts, sampling, minibatch order and the
PPO-ptx stream all continue where they were); a changed config is refused; metrics have no duplicate rows; what a
kill cut short (a metrics line, a kept checkpoint) is repaired."""
import json
import os
import subprocess
import sys

import pytest
import torch

import train_ppo
from nanorlhf.checkpoint import CheckpointError, load_checkpoint
from nanorlhf.infra import cli
from nanorlhf.infra.config import parse_config

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def flags(s, out, *extra):
    return ["--preset=tiny", f"--sft={s['out']}/sft/ckpt.pt", f"--rm={s['out']}/rm/ckpt.pt", f"--data_dir={s['data']}",
            f"--out_dir={out}", "--iterations=4", "--ptx_coef=1.0", "--ptx_batch_size=2", *extra]


def same_state(a: dict, b: dict) -> bool:
    """Every tensor of two (nested) state dicts equal, bit for bit."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_state(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same_state(x, y) for x, y in zip(a, b))
    return a == b


@pytest.fixture(scope="module")
def straight(stages, tmp_path_factory):
    """The uninterrupted run's folder."""
    out = tmp_path_factory.mktemp("straight")
    train_ppo.main(parse_config(train_ppo.Config, flags(stages, out)))
    return out


@pytest.mark.parametrize("kill_at", [1, 2, 3])
def test_killed_and_resumed_ppo_equals_an_uninterrupted_run(stages, straight, tmp_path, kill_at):
    """SIGKILL right after iteration kill_at's checkpoint, then --resume=true: final policy, value model and
    optimiser state equal the straight run's exactly; metrics.jsonl has each iteration once."""
    killed = tmp_path / "killed"
    env = {**os.environ, "OMP_NUM_THREADS": str(torch.get_num_threads())}
    p = subprocess.run([sys.executable, "train_ppo.py", *flags(stages, killed, f"--kill_at={kill_at}")], cwd=ROOT,
                       capture_output=True, text=True, env=env)
    assert p.returncode == -9, p.stderr[-2000:]
    train_ppo.main(parse_config(train_ppo.Config, flags(stages, killed, "--resume=true")))
    a, b = load_checkpoint(straight / "ckpt.pt"), load_checkpoint(killed / "ckpt.pt")
    assert same_state(a["model"], b["model"]) and same_state(a["extra"]["value"], b["extra"]["value"])
    assert same_state(a["optim"], b["optim"])
    steps = [json.loads(line)["step"] for line in open(killed / "metrics.jsonl")]
    assert steps == [1, 2, 3, 4]


def test_resume_with_a_changed_lr_is_refused(stages, tmp_path):
    """--resume=true --lr=0.5 names the differing field and trains nothing; --iterations may change."""
    out = tmp_path / "run"
    train_ppo.main(parse_config(train_ppo.Config, flags(stages, out, "--iterations=1")))
    before = open(out / "ckpt.pt", "rb").read()
    with pytest.raises(CheckpointError, match="lr: 0.0002 -> 0.5"):
        train_ppo.main(parse_config(train_ppo.Config, flags(stages, out, "--iterations=2", "--resume=true",
                                                            "--lr=0.5")))
    assert open(out / "ckpt.pt", "rb").read() == before
    train_ppo.main(parse_config(train_ppo.Config, flags(stages, out, "--iterations=2", "--resume=true")))
    assert load_checkpoint(out / "ckpt.pt")["step"] == 2


def dead_pid() -> int:
    """The id of a process that has ended (its temp files are orphans)."""
    p = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(p.stdout)


def test_a_torn_metrics_line_and_a_kept_checkpoint_cut_by_a_kill_are_repaired(stages, tmp_path, capsys):
    """A kill mid-append leaves a torn last line in metrics.jsonl; one during iter1.pt's write (after ckpt.pt's)
    leaves its temp file and no iter1.pt. `train_ppo.py --resume=true` drops the torn line, removes the temp file,
    writes iter1.pt byte for byte as the run would have, and carries on."""
    out = tmp_path / "run"
    train_ppo.main(parse_config(train_ppo.Config, flags(stages, out, "--iterations=1")))
    kept = (out / "iter1.pt").read_bytes()
    for name in ("iter1.pt", "iter1.pt.sha256"):
        os.remove(out / name)
    (out / f".iter1.pt.{dead_pid()}.0badf00d.tmp").write_bytes(kept[:1000])
    with open(out / "metrics.jsonl", "a") as f:
        f.write('{"step": 2, "objective/sc')
    with pytest.warns(UserWarning, match="metrics.jsonl:2: skipping torn last line"):
        cli.run(train_ppo.main, train_ppo.Config, train_ppo.__doc__,
                flags(stages, out, "--iterations=2", "--resume=true"))
    assert "removed 1 unfinished temporary file" in capsys.readouterr().out
    assert (out / "iter1.pt").read_bytes() == kept and load_checkpoint(out / "iter1.pt")["step"] == 1
    assert [json.loads(line)["step"] for line in open(out / "metrics.jsonl")] == [1, 2]
    assert not [n for n in os.listdir(out) if n.endswith(".tmp")]
