"""sample.py: one policy through a pipe, several side by side with the world's scores, and its usage errors."""
import io
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


def test_a_free_prompt_has_no_gold(run_dir, capsys):
    """A prompt the world did not generate gets the RM's score and no gold, and the output says so."""
    res = sample.main(parse_config(sample.Config, ["--compare=sft", f"--run={run_dir}", "--size=tiny",
                                                   "--prompt=Write a poem about tea."]))
    assert "gold" not in res[0][0] and "rm" in res[0][0] and not res[0][0]["world"]
    assert "no gold" in capsys.readouterr().out


def test_one_round_through_a_pipe(stages):
    """`sample.py --ckpt=...` reads prompts from stdin, one a line, and prints each answer; a bad line is answered
    in one line on stderr and the session goes on to the next; blank lines are skipped."""
    ckpt = os.path.join(stages["out"], "sft", "ckpt.pt")
    p = subprocess.run([sys.executable, "sample.py", f"--ckpt={ckpt}", "--seed", "3"],
                       input="Tell me about a fox.\ntest:abc\n\nName a hen.\n", capture_output=True, text=True,
                       cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("prompt: Tell me about a fox.") and "--- sft" in p.stdout
    assert "prompt: Name a hen." in p.stdout and "Traceback" not in p.stderr
    want = f"sample.py: test:abc: {stages['data']} has 32 test prompts, test:0 to test:31"
    assert p.stderr.strip().splitlines() == [want]


def test_one_policy_streams_what_it_samples(stages, capsys):
    """One policy's answer is printed piece by piece as generate() samples it, and the pieces make the answer."""
    from nanorlhf.checkpoint import load_model
    from nanorlhf.generate import SamplingConfig
    from nanorlhf.world.answers import answer
    model, tok, _ = load_model(os.path.join(stages["out"], "sft", "ckpt.pt"), dropout=0.0)
    pieces = []
    text, dropped = answer(model.eval(), tok, "Tell me about a fox.", base=False, hp=SamplingConfig(), seed=1,
                           on_text=pieces.append)
    assert dropped == 0 and len(pieces) > 1 and "".join(pieces).strip() == text
    assert text == answer(model, tok, "Tell me about a fox.", base=False, hp=SamplingConfig(), seed=1)[0]


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_a_session_answers_an_empty_line(stages, monkeypatch, capsys):
    """At a terminal, an empty line is answered with what to type, and the session goes on to the next prompt."""
    monkeypatch.setattr(sys, "stdin", Terminal("\nName a hen.\n"))
    res = sample.main(parse_config(sample.Config, [f"--ckpt={stages['out']}/sft/ckpt.pt", "--max_new_tokens=4"]))
    out = capsys.readouterr().out
    assert "(an empty line: type a prompt, or Ctrl-D to end)" in out and len(res) == 1 and "prompt: Name a hen." in out


def run_cli(argv, capsys):
    """sample.py as `python sample.py ARGV` runs it (cli.run): (exit status, stdout, stderr)."""
    from nanorlhf.infra.cli import run
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        run(sample.main, sample.Config, sample.__doc__, argv)
        raise SystemExit(0)
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


def test_each_mistake_is_one_line_or_a_note(stages, tmp_path, monkeypatch, capsys):
    """A test:N out of range or not a number, too many new tokens for the context, and test:N with no data folder
    (the checkpoint's relative data_dir seen from another folder) each exit 2 with one line naming the problem;
    a prompt longer than the context is answered from its end, with a note."""
    from nanorlhf.checkpoint import load_checkpoint, save_checkpoint
    sft = os.path.join(stages["out"], "sft", "ckpt.pt")
    for flags, message in ((["--prompt=test:99999"], "has 32 test prompts, test:0 to test:31"),
                           (["--prompt=test:abc"], "test:abc: "),
                           (["--prompt=hi", "--max_new_tokens=500"], "at most 125 new tokens leave room")):
        code, out, err = run_cli([f"--ckpt={sft}", *flags], capsys)
        assert code == 2 and err.count("\n") == 1 and message in err, (flags, err)
    code, out, err = run_cli([f"--ckpt={sft}", "--prompt=" + "Tell me about a fox. " * 60], capsys)
    assert code == 0 and "note: the prompt's first" in out and "fit sft's context of 128 tokens" in out
    ck = load_checkpoint(sft)
    monkeypatch.chdir(tmp_path)  # another folder: data/tiny is not here (nor where the checkpoint records it)
    save_checkpoint(tmp_path / "ckpt.pt", **{k: ck[k] for k in ("model", "step", "extra")},
                    config={**ck["config"], "data_dir": "data/tiny"}, with_rng=False)
    code, out, err = run_cli(["--ckpt=ckpt.pt", "--prompt=test:0"], capsys)
    assert code == 2 and err.count("\n") == 1 and "none at data/tiny: give --data_dir" in err, err


def test_a_missing_lineage_policy_hints_a_command_that_makes_it(run_dir, capsys):
    """--compare=dpo on a run without DPO names the missing checkpoint and the pipeline run that trains it."""
    code, _, err = run_cli(["--compare=dpo", f"--run={run_dir}", "--size=tiny", "--prompt=hi"], capsys)
    assert code == 2 and "dpo_tiny/ckpt.pt" in err and "--lineage=true first" in err


@pytest.mark.parametrize("flags, message", [
    (["--compare=sft,pop"], "pop; choose among"),
    (["--ckpt=a.pt", "--compare=sft"], "not both"),
    ([], "not both"),
])
def test_usage_errors(flags, message, capsys):
    """Both or neither of --ckpt / --compare, or an unknown policy, is a one-line usage error (exit 2)."""
    code, _, err = run_cli(flags, capsys)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_help_lists_the_sampling_flags(capsys):
    """--help starts with what sample.py does and lists the sampling flags (cli.run, as the command line runs it)."""
    code, out, _ = run_cli(["--help"], capsys)
    assert code == 0 and out.startswith("Talk to the trained models") and "--temperature" in out
