"""The RM stage resumes like the others: killed with SIGKILL right after a resume point (out_dir/fit.pt) in its second
epoch and resumed with --resume=true, it ends with the reward model, bias and report of an uninterrupted run, bit
for bit, each step logged once; a changed config is refused."""
import json
import os
import subprocess
import sys

import pytest
import torch

import train_rm
from nanorlhf.checkpoint import CheckpointError, load_checkpoint
from nanorlhf.infra.config import parse_config
from test_ppo_resume import same_state

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def flags(s, out, *extra):
    return ["--preset=tiny", f"--sft={s['out']}/sft/ckpt.pt", f"--data_dir={s['data']}", f"--out_dir={out}",
            "--epochs=2", "--max_prompts=24", "--val_prompts=8", "--save_every=2", "--heldout_folds=0",
            "--claim_checks=false", "--fact_checks=0", *extra]


def test_killed_and_resumed_rm_equals_an_uninterrupted_run(stages, tmp_path):
    """SIGKILL after step 8's resume point (of 12, 6 an epoch), then --resume=true: the same weights, bias and
    accuracy as the straight run; metrics.jsonl has each logged step once; fit.pt is gone once ckpt.pt is written."""
    straight = train_rm.main(parse_config(train_rm.Config, flags(stages, tmp_path / "straight")))
    killed = tmp_path / "killed"
    env = {**os.environ, "OMP_NUM_THREADS": str(torch.get_num_threads())}
    p = subprocess.run([sys.executable, "train_rm.py", *flags(stages, killed, "--kill_at=8")], cwd=ROOT,
                       capture_output=True, text=True, env=env)
    assert p.returncode == -9, p.stderr[-2000:]
    assert load_checkpoint(killed / "fit.pt")["extra"]["fit"]["epoch"] == 1 and not (killed / "ckpt.pt").exists()
    with pytest.raises(CheckpointError, match="lr: 0.0003 -> 0.5"):
        train_rm.main(parse_config(train_rm.Config, flags(stages, killed, "--resume=true", "--lr=0.5")))
    resumed = train_rm.main(parse_config(train_rm.Config, flags(stages, killed, "--resume=true")))
    a, b = load_checkpoint(tmp_path / "straight" / "ckpt.pt"), load_checkpoint(killed / "ckpt.pt")
    assert same_state(a["model"], b["model"])
    assert resumed["bias"] == straight["bias"] and resumed["report"] == straight["report"]
    steps = [json.loads(line)["step"] for line in open(killed / "metrics.jsonl")]
    assert steps == [json.loads(line)["step"] for line in open(tmp_path / "straight" / "metrics.jsonl")]
    assert not (killed / "fit.pt").exists()
