"""sample.py: one policy through a pipe, several side by side with the world's scores, and its usage errors."""
import os
import subprocess
import sys

import pytest

import sample
from nanorlhf.infra.config import parse_config

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def run_dir(stages, tmp_path_factory):
    """A pipeline-shaped run folder (base_tiny, sft_tiny, ppo_tiny, rm) over the tiny stages' checkpoints."""
    run = tmp_path_factory.mktemp("run")
    for kind, stage in (("base", "base"), ("sft", "sft"), ("ppo", "sft"), ("rm", "rm")):
        name = kind if kind == "rm" else f"{kind}_tiny"
        os.symlink(os.path.join(stages["out"], stage), run / name)
    return str(run)


def test_compare_scores_a_world_prompt(run_dir):
    """--compare answers one test prompt with every named policy; each answer has gold, RM score and a 1-7 Likert,
    and the base model gets the raw text (its answer differs from the chat policies' format)."""
    res = sample.main(parse_config(sample.Config, ["--compare=gpt,sft,ppo", f"--run={run_dir}", "--size=tiny",
                                                   "--prompt=test:0"]))
    rows = res[0]
    assert [r["policy"] for r in rows] == ["gpt_tiny", "sft_tiny", "ppo_tiny"]
    assert all(r["world"] and 1 <= r["likert"] <= 7 and "gold" in r and "rm" in r for r in rows)
    assert rows[1]["answer"] == rows[2]["answer"]  # the same checkpoint with the same seed says the same thing


def test_a_free_prompt_has_no_gold(run_dir):
    """A prompt the world did not generate gets the RM's score and no gold, and the output says so."""
    res = sample.main(parse_config(sample.Config, ["--compare=sft", f"--run={run_dir}", "--size=tiny",
                                                   "--prompt=Write a poem about tea."]))
    assert "gold" not in res[0][0] and "rm" in res[0][0] and not res[0][0]["world"]
    assert "no gold" in sample.show(res[0])


def test_one_round_through_a_pipe(stages):
    """`sample.py --ckpt=...` reads prompts from stdin, one a line, and prints each answer."""
    ckpt = os.path.join(stages["out"], "sft", "ckpt.pt")
    p = subprocess.run([sys.executable, "sample.py", f"--ckpt={ckpt}", "--seed=3"],
                       input="Tell me about a fox.\n", capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("prompt: Tell me about a fox.") and "--- sft" in p.stdout


@pytest.mark.parametrize("flags, message", [
    (["--compare=sft,pop"], "pop; choose among"),
    (["--ckpt=a.pt", "--compare=sft"], "not both"),
    ([], "not both"),
])
def test_usage_errors(flags, message):
    """Both or neither of --ckpt / --compare, or an unknown policy, is a one-line usage error (exit 2)."""
    p = subprocess.run([sys.executable, "sample.py", *flags], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert p.returncode == 2 and message in p.stderr and len(p.stderr.strip().splitlines()) == 1


def test_help_lists_the_sampling_flags():
    p = subprocess.run([sys.executable, "sample.py", "--help"], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert p.returncode == 0 and "Talk to the trained models" in p.stdout and "temperature" in p.stdout
