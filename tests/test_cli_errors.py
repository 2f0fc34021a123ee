"""Every mistake a user can make ends in one plain line, a non-zero exit and no damage (nanorlhf/infra/cli.py).

Each case runs a script's entry point (cli.run, as `python script.py ...` does) on a bad
invocation or a bad input and checks: exit status != 0, no traceback, a message naming the
culprit, and every file that existed before unchanged. Kinds: unknown flag, bad type, bad
value, unknown preset or choice, missing / empty / malformed / non-UTF-8 / wrong-format
file, wrong-kind / truncated / random-bytes / code-running checkpoint, missing upstream
stage, and a full disk (a tiny RLIMIT_FSIZE, in a subprocess).
"""
import importlib
import os
import resource
import shutil
import subprocess
import sys

import pytest
import torch

from nanorlhf.infra import cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = {"pretrain": "pretrain", "sft": "train_sft", "rm": "train_rm", "ppo": "train_ppo", "dpo": "train_dpo",
           "eval": "evaluate", "label": "label", "pipeline": "pipeline", "world": "nanorlhf.world.__main__",
           "iterated": "experiments.iterated"}


def invoke(script: str, argv: list[str], capsys) -> tuple[int, str]:
    mod = importlib.import_module(SCRIPTS[script])
    main = (lambda cfg: mod.main(cfg, [])) if script == "label" else mod.main
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:   # anything else (a traceback) fails the test
        cli.run(main, mod.Config, mod.__doc__, argv)
    return e.value.code, capsys.readouterr().err


def snapshot(root: str) -> dict:
    return {os.path.join(d, f): (os.path.getsize(os.path.join(d, f)), os.path.getmtime(os.path.join(d, f)))
            for d, _, fs in os.walk(root) for f in fs}


@pytest.fixture(scope="module")
def files(stages, tmp_path_factory):
    """Bad inputs beside the tiny stages' good ones."""
    d = tmp_path_factory.mktemp("bad")
    out, data = stages["out"], stages["data"]
    p = {k: str(d / k) for k in ("empty.jsonl", "notjson.jsonl", "latin1.jsonl", "trl.jsonl", "nodemo.jsonl",
                                 "random.pt", "truncated.pt", "plain.pt", "code.pt")}
    open(p["empty.jsonl"], "w").close()
    open(p["notjson.jsonl"], "w").write("{this is not json\n")
    open(p["latin1.jsonl"], "wb").write('{"text": "caf\xe9"}\n'.encode("latin-1"))
    open(p["trl.jsonl"], "w").write('{"prompt": "Hi?", "chosen": "Hello.", "rejected": "Go away."}\n')
    open(p["nodemo.jsonl"], "w").write('{"id": "d1", "prompt": "Hi?"}\n')
    open(p["random.pt"], "wb").write(os.urandom(4096))
    ck = open(f"{out}/sft/ckpt.pt", "rb").read()
    open(p["truncated.pt"], "wb").write(ck[: len(ck) // 2])
    torch.save({"weights": torch.zeros(3)}, p["plain.pt"])
    torch.save({"model": Exploit()}, p["code.pt"])
    head = ('{"id": "e1", "type": "session", "time": 1.0, "labeler": "rater1", "mode": "rank", "instructions": "train"}\n'
            '{"id": "e2", "type": "item", "time": 1.0, "labeler": "rater1", '
            '"item": {"id": "i1", "prompt": "Hi?", "completions": ["a", "b", "c"]}}\n')
    label = '{"id": "e3", "type": "label", "time": 2.0, "labeler": "rater1", "item_id": "i1", "ranking": %s}\n'
    for name, tail in (("noitem", '{"id": "e3", "type": "item", "time": 2.0, "labeler": "rater1"}\n'),
                       ("outofrange", label % "[[0], [1], [7]]"), ("string", label % '"3142"')):
        p[f"log_{name}"] = str(d / f"log_{name}.jsonl")
        open(p[f"log_{name}"], "w").write(head + tail)
    empty_world = str(d / "data" / "tiny")                      # a world folder whose demonstrations are empty
    shutil.copytree(data, empty_world)
    open(os.path.join(empty_world, "sft.jsonl"), "w").close()
    return {**p, "out": out, "data": data, "empty_world": empty_world, "dir": str(d), "sft": f"{out}/sft/ckpt.pt",
            "rm": f"{out}/rm/ckpt.pt", "base": f"{out}/base/ckpt.pt", "cmp": f"{out}/rm/comparisons.jsonl"}


class Exploit:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


def cases(f):
    """(script, argv, what the message must name): at least 40 of them."""
    new = os.path.join(f["dir"], "new")                          # an out_dir no case may create files in
    ppo = ["--preset=tiny", f"--sft={f['sft']}", f"--rm={f['rm']}", f"--data_dir={f['data']}", f"--out_dir={new}"]
    sft = ["--preset=tiny", f"--base={f['base']}", f"--data_dir={f['data']}", f"--out_dir={new}"]
    rm = ["--preset=tiny", f"--sft={f['sft']}", f"--data_dir={f['data']}", f"--out_dir={new}"]
    dpo = [f"--sft={f['sft']}", f"--out_dir={new}", "--val_comparisons="]
    pre = ["--preset=tiny", f"--corpus={f['data']}/corpus.jsonl", f"--out_dir={new}"]
    ev = ["--preset=tiny", f"--data_dir={f['data']}", f"--out_dir={new}", "--suite=preference"]
    missing_tiny = os.path.join(f["dir"], "fresh", "out", "tiny", "sft", "ckpt.pt")
    return [
        # flags: unknown, mistyped, ill-typed, out of range, unknown preset or choice
        ("pretrain", ["--betta=0.1"], "unknown flag --betta"),
        ("ppo", ["--betta=0.1"], "did you mean --beta"),
        ("rm", ["--lr=abc"], "--lr=abc: expected float"),
        ("sft", ["--epochs=1.5"], "--epochs=1.5: expected int"),
        ("dpo", ["--batch_prompts=-1"], "--batch_prompts=-1"),
        ("pretrain", ["--max_steps=0"], "--max_steps=0"),
        ("ppo", ["--iterations=0"], "--iterations=0"),
        ("rm", ["--lr=nan"], "--lr=nan"),
        ("sft", ["--lr=inf"], "--lr=inf"),
        ("pretrain", ["--preset=tinny"], "did you mean tiny"),
        ("eval", ["--suite=ladderr"], "--suite=ladderr"),
        ("eval", ["--split=train"], "--split=train"),
        ("ppo", ["--device=gpu"], "--device=gpu"),
        ("pretrain", ["--dtype=float16"], "--dtype=float16"),
        ("pipeline", ["--ppo_beta=-1"], "--ppo_beta=-1"),
        ("label", ["--k_min=0"], "--k_min=0"),
        ("ppo", ["--resume=maybe"], "--resume=maybe: expected bool"),
        ("sft", ["epochs=2"], "did you mean --epochs"),
        ("ppo", ["--kl_estimator=k9"], "--kl_estimator=k9"),
        ("ppo", ["--kl_in_reward=false"], "kl_estimator=k3"),
        ("world", ["--scale=huge"], "--scale=huge"),
        ("iterated", ["--rounds=0"], "--rounds=0"),
        # a missing input or upstream stage: the file, and the command that makes it
        ("sft", sft[:2] + [f"--data_dir={os.path.join(f['dir'], 'nodata', 'tiny')}", f"--out_dir={new}"],
         "python -m nanorlhf.world --scale=tiny"),
        ("ppo", ["--preset=tiny", f"--sft={missing_tiny}", f"--rm={f['rm']}", f"--out_dir={new}"],
         "run train_sft.py --preset=tiny first"),
        ("rm", ["--preset=tiny", f"--sft={missing_tiny}", f"--out_dir={new}"], "no checkpoint at"),
        ("pretrain", pre[:1] + [f"--corpus={f['dir']}/nocorpus.jsonl", f"--out_dir={new}"], "nocorpus.jsonl"),
        ("eval", ev + [f"--policies=sft={missing_tiny}", "--reference=sft", f"--rm={f['rm']}"], "no checkpoint at"),
        ("dpo", dpo + [f"--comparisons={f['dir']}/nocmp.jsonl"], "nocmp.jsonl"),
        ("label", [f"--report={f['dir']}/labels/eve.jsonI", f"--export={f['dir']}"], "no such labeling log"),
        # empty, malformed, non-UTF-8 or foreign-format data
        ("sft", sft[:2] + [f"--data_dir={f['empty_world']}", f"--out_dir={new}"], "no demonstrations"),
        ("rm", rm + [f"--comparisons={f['empty.jsonl']}"], "no comparisons"),
        ("dpo", dpo + [f"--comparisons={f['empty.jsonl']}"], "no comparisons"),
        ("rm", rm + [f"--comparisons={f['notjson.jsonl']}"], "notjson.jsonl"),
        ("rm", rm + [f"--comparisons={f['latin1.jsonl']}"], "latin1.jsonl"),
        ("dpo", dpo + [f"--comparisons={f['trl.jsonl']}"], "trl.jsonl"),
        ("label", ["--labeler=rater1", f"--completions={f['empty.jsonl']}", f"--log={f['dir']}/l.jsonl"],
         "no completions"),
        ("label", ["--labeler=rater1", f"--completions={f['notjson.jsonl']}", f"--log={f['dir']}/l.jsonl"],
         "notjson.jsonl"),
        ("pretrain", pre[:1] + [f"--corpus={f['latin1.jsonl']}", f"--out_dir={new}"], "latin1.jsonl"),
        ("label", [f"--report={f['log_noitem']}"], "event 3 (item): no item with an id"),
        ("label", [f"--report={f['log_outofrange']}", f"--export={f['dir']}"], "not an order of the item's 3"),
        ("label", [f"--report={f['log_string']}"], "ranking must be a list"),
        # checkpoints of the wrong kind, truncated, random bytes, or needing to run code
        ("ppo", ppo[:1] + [f"--sft={f['random.pt']}"] + ppo[2:], "random.pt is not a checkpoint"),
        ("ppo", ppo[:1] + [f"--sft={f['truncated.pt']}"] + ppo[2:], "truncated.pt is not a checkpoint"),
        ("ppo", ppo[:2] + [f"--rm={f['sft']}"] + ppo[3:], "where a reward model is needed"),
        ("ppo", ppo[:1] + [f"--sft={f['rm']}"] + ppo[2:], "where a language model is needed"),
        ("sft", sft[:1] + [f"--base={f['plain.pt']}"] + sft[2:], "not a stage checkpoint"),
        ("rm", rm[:1] + [f"--sft={f['code.pt']}"] + rm[2:], "would need to run code"),
        ("eval", ev + [f"--policies=sft={f['sft']}", "--reference=sft", f"--rm={f['sft']}"],
         "where a reward model is needed"),
        ("dpo", [f"--sft={f['random.pt']}", f"--comparisons={f['cmp']}", f"--out_dir={new}", "--val_comparisons="],
         "random.pt is not a checkpoint"),
    ]


def test_each_bad_invocation_is_answered_in_one_line_and_changes_nothing(files, capsys):
    """>= 40 bad invocations across the scripts: exit != 0, no traceback, the culprit named, no file touched."""
    all_cases = cases(files)
    assert len(all_cases) >= 40
    for script, argv, culprit in all_cases:
        before = snapshot(files["dir"]) | snapshot(files["out"])
        code, err = invoke(script, argv, capsys)
        assert code != 0, (script, argv)
        assert "Traceback" not in err and err.strip(), (script, argv, err)
        assert culprit in err, (script, argv, err)
        after = snapshot(files["dir"]) | snapshot(files["out"])
        assert {k: v for k, v in after.items() if k in before} == before, (script, argv)
        assert not os.path.exists(os.path.join(files["dir"], "new", "ckpt.pt")), (script, argv)


def test_usage_errors_exit_2_and_the_message_is_one_line(files, capsys):
    """A mistyped flag is a usage error (exit 2) answered in one line, not the 40-line flag list."""
    code, err = invoke("ppo", ["--betta=0.1"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1


def test_a_real_process_prints_no_traceback_and_debug_shows_one(files):
    """`python train_ppo.py --betta=0.1` as a user types it: one line, exit 2; --debug=true keeps the traceback."""
    run = lambda *a: subprocess.run([sys.executable, "train_ppo.py", *a], cwd=ROOT, capture_output=True, text=True)
    p = run("--betta=0.1")
    assert p.returncode == 2 and "Traceback" not in p.stderr and "did you mean --beta" in p.stderr
    d = run("--betta=0.1", "--debug=true")
    assert d.returncode != 0 and "Traceback" in d.stderr


def test_a_full_disk_is_named_and_leaves_no_checkpoint(files, tmp_path):
    """A file-size limit of 64 kB (a full disk, for the writer): pretraining stops saying so, saves nothing."""
    out = tmp_path / "full"
    limit = lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (64_000, 64_000))
    p = subprocess.run([sys.executable, "pretrain.py", "--preset=tiny", f"--corpus={files['data']}/corpus.jsonl",
                        f"--out_dir={out}", "--max_steps=2", "--ckpt_every=2", "--eval_every=2"],
                       cwd=ROOT, capture_output=True, text=True, preexec_fn=limit,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr[-2000:]
    assert "no space left" in p.stderr
    assert not (out / "ckpt.pt").exists() and not [n for n in os.listdir(out) if n.endswith(".tmp")]


def test_help_starts_with_the_purpose_and_lists_choices_and_presets(capsys):
    """--help: the script's one-line purpose first, each choice flag's values, each preset's settings."""
    mod = importlib.import_module("evaluate")
    with pytest.raises(SystemExit) as e:
        cli.run(mod.main, mod.Config, mod.__doc__, ["--help"])
    text = capsys.readouterr().out
    assert e.value.code == 0 and text.splitlines()[0] == mod.__doc__.strip().splitlines()[0]
    assert "--suite='preference'" in text and "one of: preference, knowledge, ladder, reward_features, all, honesty, truthfulness" in text
    assert "tiny: --" in text
