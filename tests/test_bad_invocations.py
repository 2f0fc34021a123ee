"""Every value is checked before work starts, and every bad input is refused in one plain line, changing nothing.

Each case runs an entry point as `python script.py ...` does (nanorlhf/infra/cli.py run, in this process; the
course's argparse main) and checks: a non-zero exit, exactly one line on stderr and no traceback, the culprit named
in it, and no file created or changed anywhere the run could write (the working folder, the tiny stages' and the
bad inputs' folders). The tables: values out of range or across fields (refused while the flags are read),
path kinds and OS errors, damaged or malformed checkpoints, mistyped inputs that used to be read as empty, data
that no model fits, and folders holding another world or another run's exports.
"""
import importlib
import json
import os
import shutil
import socket

import pytest
import torch

from nanorlhf.infra import cli

ENTRY = {"pretrain": "pretrain", "sft": "train_sft", "rm": "train_rm", "ppo": "train_ppo", "dpo": "train_dpo",
         "eval": "evaluate", "label": "label", "pipeline": "pipeline", "world": "nanorlhf.world.__main__",
         "iterated": "experiments.iterated", "ablate": "experiments.ablate", "sycophancy": "experiments.sycophancy",
         "first_rung": "experiments.first_rung"}


def invoke(script: str, argv: list[str], capsys) -> tuple[int, str]:
    """(exit status, stderr) of one invocation; any exception but SystemExit (a traceback) fails the test."""
    capsys.readouterr()
    if script == "course":
        from nanorlhf.assignments.__main__ import main
        try:
            code = main(argv)
        except SystemExit as e:
            code = e.code
        return code, capsys.readouterr().err
    mod = importlib.import_module(ENTRY[script])
    main = (lambda cfg: mod.main(cfg, [])) if script == "label" else mod.main
    with pytest.raises(SystemExit) as e:
        cli.run(main, mod.Config, mod.__doc__, argv)
    return e.value.code, capsys.readouterr().err


def snapshot(*roots: str) -> dict:
    return {os.path.join(d, f): (os.path.getsize(os.path.join(d, f)), os.path.getmtime(os.path.join(d, f)))
            for root in roots for d, _, fs in os.walk(root) for f in fs}


def refused(script: str, argv: list[str], culprit: str, capsys, *roots: str) -> None:
    """The invocation exits non-zero with one line naming the culprit, and leaves every file under roots as it was."""
    before = snapshot(*roots)
    code, err = invoke(script, argv, capsys)
    lines = err.strip().splitlines()
    assert code not in (0, None), (script, argv, err)
    assert len(lines) == 1 and "Traceback" not in err, (script, argv, err)
    assert culprit in err, (script, argv, err)
    assert snapshot(*roots) == before, (script, argv)


# -----------------------------------------------------------------------------
# refused while the flags are read: one value out of its range, or two that do not go together

TINY = ["--preset=tiny"]
FLAGS = [
    ("pretrain", TINY + ["--n_embd=65", "--n_head=2"], "--n_head=2 must divide --n_embd=65"),
    ("pretrain", ["--preset=large", "--n_head=7"], "--n_head=7 must divide --n_embd=384"),
    ("pretrain", TINY + ["--dropout=1.5"], "--dropout=1.5: must be in [0, 1)"),
    ("pretrain", TINY + ["--dropout=1"], "--dropout=1.0"),
    ("pretrain", TINY + ["--dropout=-0.1"], "--dropout=-0.1"),
    ("pretrain", TINY + ["--block_size=200000"], "--block_size=200000: must be in [1, 8192]"),
    ("pretrain", TINY + ["--block_size=0"], "--block_size=0"),
    ("pretrain", ["--scale=nowhere"], "--scale=nowhere: valid values are tiny, small, paper"),
    ("pretrain", TINY + ["--vocab_size=10"], "--vocab_size=10: must be in [260, inf)"),
    ("pretrain", TINY + ["--grad_clip=0"], "--grad_clip=0.0"),
    ("pretrain", TINY + ["--lr=0.01", "--min_lr=0.1"], "--min_lr=0.1 is above --lr=0.01"),
    ("pretrain", TINY + ["--lr=-1"], "--lr=-1.0"),
    ("pretrain", TINY + ["--batch_size=0"], "--batch_size=0"),
    ("pretrain", TINY + ["--n_layer=0"], "--n_layer=0"),
    ("pretrain", TINY + ["--eval_batches=0"], "--eval_batches=0"),
    ("pretrain", TINY + ["--attn=flash"], "--attn=flash"),
    ("pretrain", TINY + ["--warmup=-5"], "--warmup=-5"),
    ("pretrain", TINY + ["--weight_decay=nan"], "--weight_decay=nan"),
    ("pretrain", TINY + ["--kill_at_step=-1"], "--kill_at_step=-1"),
    ("pretrain", TINY + ["--device=tpu"], "--device=tpu"),
    ("pretrain", TINY + ["--eval_every=0"], "--eval_every=0"),
    ("sft", TINY + ["--dropout=1.2"], "--dropout=1.2"),
    ("sft", TINY + ["--val_every=1"], "--val_every=1: must be in [2, inf)"),
    ("sft", TINY + ["--grad_clip=0"], "--grad_clip=0.0"),
    ("sft", TINY + ["--epochs=0"], "--epochs=0"),
    ("sft", TINY + ["--batch_size=-4"], "--batch_size=-4"),
    ("sft", TINY + ["--select_prompts=0"], "--select_prompts=0"),
    ("sft", TINY + ["--loss_on_prompt=perhaps"], "--loss_on_prompt=perhaps: expected bool"),
    ("sft", TINY + ["--dtype=half"], "--dtype=half"),
    ("rm", TINY + ["--k_min=7", "--k_max=3"], "--k_min=7 is above --k_max=3"),
    ("rm", TINY + ["--k_max=50"], "--k_max=50: must be in [2, 9]"),
    ("rm", TINY + ["--k_min=1"], "--k_min=1"),
    ("rm", TINY + ["--heldout_folds=9"], "--heldout_folds=9: must be in [0, 5]"),
    ("rm", TINY + ["--heldout_folds=-1"], "--heldout_folds=-1"),
    ("rm", TINY + ["--human_only=true"], "--human_only=true needs --human_labels"),
    ("rm", TINY + ["--comparisons=a.jsonl", "--pairs=b.jsonl"], "give --comparisons or --pairs, not both"),
    ("rm", TINY + ["--heldout_only=true"], "--heldout_only=true needs --comparisons"),
    ("rm", TINY + ["--heldout_only=true", "--comparisons=c.jsonl", "--heldout_folds=0"], "--heldout_folds > 0"),
    ("rm", TINY + ["--heldout_only=true", "--comparisons=c.jsonl", "--resume=true"], "nothing to resume"),
    ("rm", TINY + ["--save_every=0"], "--save_every=0"),
    ("rm", TINY + ["--procs=0"], "--procs=0"),
    ("rm", TINY + ["--human_weight=0"], "--human_weight=0.0"),
    ("rm", TINY + ["--temperature=0"], "--temperature=0.0"),
    ("rm", TINY + ["--gen_batch=0"], "--gen_batch=0"),
    ("rm", TINY + ["--val_prompts=0"], "--val_prompts=0"),
    ("rm", TINY + ["--epochs=0"], "--epochs=0"),
    ("rm", TINY + ["--batch_prompts=0"], "--batch_prompts=0"),
    ("rm", TINY + ["--kway_batch=maybe"], "--kway_batch=maybe"),
    ("ppo", TINY + ["--minibatch_size=1000"], "--minibatch_size=1000 is above --batch_size=8"),
    ("ppo", TINY + ["--lam=5"], "--lam=5.0: must be in [0, 1]"),
    ("ppo", TINY + ["--lam=-0.5"], "--lam=-0.5"),
    ("ppo", TINY + ["--gamma=1.5"], "--gamma=1.5"),
    ("ppo", TINY + ["--clip=0"], "--clip=0.0: must be in (0, 1)"),
    ("ppo", TINY + ["--clip=1.5"], "--clip=1.5"),
    ("ppo", TINY + ["--grad_clip=0"], "--grad_clip=0.0"),
    ("ppo", TINY + ["--dropout=1"], "--dropout=1.0"),
    ("ppo", TINY + ["--temperature=0"], "--temperature=0.0"),
    ("ppo", TINY + ["--ppo_epochs=0"], "--ppo_epochs=0"),
    ("ppo", TINY + ["--kl_horizon=0"], "--kl_horizon=0"),
    ("ppo", TINY + ["--target_kl=-1"], "--target_kl=-1.0"),
    ("ppo", TINY + ["--rollout_cache=float16"], "--rollout_cache=float16"),
    ("ppo", TINY + ["--value_init=random"], "--value_init=random"),
    ("ppo", TINY + ["--save_every=0"], "--save_every=0"),
    ("ppo", TINY + ["--beta=inf"], "--beta=inf"),
    ("dpo", TINY + ["--grad_clip=0"], "--grad_clip=0.0"),
    ("dpo", TINY + ["--beta=0"], "--beta=0.0"),
    ("dpo", TINY + ["--val_prompts=0"], "--val_prompts=0"),
    ("dpo", TINY + ["--max_steps=-1"], "--max_steps=-1"),
    ("eval", ["--policies="], "--policies=: give name=checkpoint pairs"),
    ("eval", ["--policies=sft=a.pt,sft=b.pt"], "the name sft is given twice"),
    ("eval", ["--policies=sft"], "--policies=sft: give name=checkpoint pairs"),
    ("eval", ["--policies=sft=a.pt,=b.pt"], "give name=checkpoint pairs"),
    ("eval", ["--reference=sftt"], "--reference=sftt is not one of the policies"),
    ("eval", ["--reference=gpt"], "--reference=gpt is not one of the policies' names but gpt"),
    ("eval", ["--n_prompts=0"], "--n_prompts=0"),
    ("eval", ["--samples=-1"], "--samples=-1"),
    ("eval", ["--suite=ladder", "--sizes=,"], "--sizes=,"),
    ("eval", ["--max_new_tokens=0"], "--max_new_tokens=0"),
    ("label", ["--cutoff=2"], "--cutoff=2.0: must be in [0, 1]"),
    ("label", ["--cutoff=-0.1"], "--cutoff=-0.1"),
    ("label", ["--port=70000"], "--port=70000: must be in [0, 65535]"),
    ("label", ["--port=-1"], "--port=-1"),
    ("label", ["--gold_rate=1"], "--gold_rate=1.0"),
    ("label", ["--k_min=7", "--k_max=3"], "--k_min=7 is above --k_max=3"),
    ("label", ["--k_max=12"], "--k_max=12"),
    ("label", ["--mode=triple"], "--mode=triple: valid values are rank, pair"),
    ("label", ["--instructions=other"], "--instructions=other"),
    ("label", ["--max_body=0"], "--max_body=0"),
    ("label", ["--labeler=bad name!", "--completions=c.jsonl"], "--labeler=NAME is required"),
    ("world", ["--rm_extra=-1"], "--rm_extra=-1"),
    ("world", ["--seed=x"], "--seed=x: expected int"),
    ("pipeline", TINY + ["--sizes=big"], "--sizes=big: 'big' is not name:n_layerxn_embd"),
    ("pipeline", TINY + ["--sizes=a:2x64,a:1x16"], "each name once"),
    ("pipeline", TINY + ["--suites=toxicityy"], "--suites=toxicityy"),
    ("pipeline", TINY + ["--sizes=a:2x100,b:1x16"], "the width 100 of a does not divide into its 3 heads"),
    ("pipeline", TINY + ["--sft_dropout=1.5"], "--sft_dropout=1.5"),
    ("pipeline", ["--lanes=0"], "--lanes=0"),
    ("pipeline", TINY + ["--ppo_batch=0"], "--ppo_batch=0"),
    ("pipeline", TINY + ["--pretrain_steps=a:60"], "--pretrain_steps=a:60: give one value per size"),
    ("pipeline", ["--n_eval=0"], "--n_eval=0"),
    ("iterated", TINY + ["--k_min=7", "--k_max=3"], "--k_min=7 is above --k_max=3"),
    ("iterated", TINY + ["--ppo_minibatch_size=1000"], "--ppo_minibatch_size=1000 is above"),
    ("ablate", TINY + ["--size=zzz"], "--size=zzz is not one of the recipe's --sizes"),
    ("sycophancy", TINY + ["--shares=0,2"], "--shares=0,2"),
    ("sycophancy", TINY + ["--false_share=1.5"], "--false_share=1.5"),
    ("first_rung", ["--split=train"], "--split=train"),
    ("course", ["grade", "--repo=/nonexistent"], "/nonexistent is not a folder"),
    ("course", ["grade", "--timeout=nan"], "'nan' is not a finite number of seconds > 0"),
    ("course", ["grade", "--timeout=0"], "'0' is not a finite number of seconds > 0"),
    ("course", ["hint", "gae", "--level=7"], "--level must be 1..2"),
    ("course", ["hint", "gae", "--level=two"], "--level: invalid int value: 'two'"),
    ("course", ["make"], "required: out_dir"),
]


@pytest.mark.parametrize("script, argv, culprit", FLAGS, ids=[f"{s}:{' '.join(a)}" for s, a, _ in FLAGS])
def test_a_bad_value_is_refused_before_any_work(script, argv, culprit, capsys, tmp_path, monkeypatch):
    """A value out of range or two values that do not go together: one line naming the flag, nothing written
    (the run starts in an empty folder, which stays empty whatever default paths the script has)."""
    monkeypatch.chdir(tmp_path)
    refused(script, argv, culprit, capsys, str(tmp_path))
    assert os.listdir(tmp_path) == []


# -----------------------------------------------------------------------------
# refused once the inputs are read, before any training or sampling: checkpoints, data, folders, the OS


@pytest.fixture(scope="module")
def bad(stages, tmp_path_factory):
    """Damaged and malformed checkpoints, mistyped or empty inputs, and folders a run must not write over."""
    d = tmp_path_factory.mktemp("bad_inputs")
    sft = os.path.join(stages["out"], "sft", "ckpt.pt")
    p = {"dir": str(d), "sft": sft, "rm": os.path.join(stages["out"], "rm", "ckpt.pt"), "data": stages["data"],
         "base": os.path.join(stages["out"], "base", "ckpt.pt"),
         "cmp": os.path.join(stages["out"], "rm", "comparisons.jsonl"), "file": str(d / "a_file.txt")}
    open(p["file"], "w").write("not a folder\n")
    shutil.copy(sft, d / "flipped.pt")                               # 256 flipped bytes, its hash file beside it
    shutil.copy(sft + ".sha256", d / "flipped.pt.sha256")
    raw = bytearray(open(d / "flipped.pt", "rb").read())
    raw[len(raw) // 2:len(raw) // 2 + 256] = bytes(b ^ 0xFF for b in raw[len(raw) // 2:len(raw) // 2 + 256])
    open(d / "flipped.pt", "wb").write(raw)
    ck = torch.load(sft, weights_only=True)
    open(d / "junk.tiktoken", "wb").write(os.urandom(2048))
    open(d / "junk.tiktoken.json", "w").write("{}")
    first = next(iter(ck["model"]))
    with_config = lambda **kw: {**ck, "extra": {**ck["extra"], "model_config": {**ck["extra"]["model_config"], **kw}}}
    variants = {"nomodel": {k: v for k, v in ck.items() if k != "model"}, "tensor": torch.zeros(3),
                "badkey": with_config(n_expert=2), "badcfg": with_config(n_head=3),
                "badtok": {**ck, "extra": {**ck["extra"], "tokenizer": str(d / "junk.tiktoken")}},
                "lacks": {**ck, "model": {k: v for k, v in ck["model"].items() if k != first}},
                "shape": {**ck, "model": {**ck["model"], first: torch.zeros(3, 3)}}}
    for name, obj in variants.items():
        torch.save(obj, d / f"{name}.pt")
        p[name] = str(d / f"{name}.pt")
    p["flipped"] = str(d / "flipped.pt")
    session = {"id": "e1", "type": "session", "time": 1.0, "labeler": "r1", "mode": "rank", "instructions": "train"}
    item = {"id": "e2", "type": "item", "time": 1.0, "labeler": "r1",
            "item": {"id": "i1", "prompt_id": "p1", "prompt": "Hi?", "completions": ["a", "b", "c"]}}
    labeled = {"id": "e3", "type": "label", "time": 2.0, "labeler": "r1", "item_id": "i1", "ranking": [[0], [1], [2]]}
    for name, events in (("nolabels", [session, item]), ("log", [session, item, labeled])):
        p[name] = str(d / f"{name}.jsonl")
        open(p[name], "w").write("".join(json.dumps(e) + "\n" for e in events))
    p["empty"] = str(d / "empty.jsonl")
    open(p["empty"], "w").close()
    p["exported"] = str(d / "exported")                               # a folder holding an earlier export
    os.makedirs(p["exported"])
    open(os.path.join(p["exported"], "comparisons.jsonl"), "w").write("{}\n")
    p["completions"] = str(d / "completions.jsonl")
    open(p["completions"], "w").write(json.dumps({"id": "c1", "prompt": "Hi?", "completions": ["a", "b"]}) + "\n")
    for name, meta in (("seed7", {"scale": "tiny", "seed": 7}), ("nometa", None)):
        p[name] = str(d / name / "tiny")                               # a user's world, and one without its meta
        shutil.copytree(stages["data"], p[name], ignore=shutil.ignore_patterns("meta.json", "tokenizer*"))
        if meta:
            open(os.path.join(p[name], "meta.json"), "w").write(json.dumps(meta))
    return p


def input_cases(f: dict) -> list[tuple]:
    new = os.path.join(f["dir"], "new")
    sft = TINY + [f"--base={f['base']}", f"--data_dir={f['data']}", f"--out_dir={new}"]
    rm = TINY + [f"--sft={f['sft']}", f"--data_dir={f['data']}", f"--out_dir={new}"]
    ppo = TINY + [f"--sft={f['sft']}", f"--rm={f['rm']}", f"--data_dir={f['data']}", f"--out_dir={new}"]
    dpo = TINY + [f"--sft={f['sft']}", f"--comparisons={f['cmp']}", "--val_comparisons=", f"--out_dir={new}"]
    ev = TINY + [f"--data_dir={f['data']}", f"--out_dir={new}", f"--policies=sft={f['sft']}", "--reference=sft",
                 "--rm="]
    lab = ["--labeler=r1", f"--completions={f['completions']}", f"--log={new}/r1.jsonl"]
    with_base = lambda ck: [sft[0], f"--base={ck}", *sft[2:]]
    return [
        # checkpoints: damaged, malformed, of the wrong kind
        ("sft", sft + [f"--select_by_rm={f['sft']}"], "where a reward model is needed"),
        ("sft", with_base(f["rm"]), "where a language model is needed"),
        ("sft", with_base(f["flipped"]), "flipped.pt is damaged"),
        ("sft", with_base(f["nomodel"]), "nomodel.pt is not a stage checkpoint: it has no 'model'"),
        ("sft", with_base(f["tensor"]), "it holds a Tensor, not a dict"),
        ("sft", with_base(f["badkey"]), "unknown key 'n_expert'"),
        ("sft", with_base(f["badcfg"]), "badcfg.pt: its model config is not valid"),
        ("sft", with_base(f["badtok"]), "junk.tiktoken is not a tokenizer file"),
        ("sft", with_base(f["lacks"]), "lacks.pt lacks: "),
        ("sft", with_base(f["shape"]), "has weights of the wrong shape"),
        ("sft", sft + ["--resume=true"], "no checkpoint at"),
        ("rm", [*rm[:1], f"--sft={f['flipped']}", *rm[2:]], "flipped.pt is damaged"),
        ("rm", rm + [f"--init={f['tensor']}"], "tensor.pt is not a stage checkpoint"),
        ("rm", rm + ["--resume=true"], "--resume=true: no unfinished RM fit"),
        ("ppo", [*ppo[:1], f"--sft={f['flipped']}", *ppo[2:]], "flipped.pt is damaged"),
        ("ppo", [*ppo[:2], f"--rm={f['nomodel']}", *ppo[3:]], "nomodel.pt is not a stage checkpoint"),
        ("ppo", [*ppo[:1], f"--sft={f['badkey']}", *ppo[2:]], "unknown key 'n_expert'"),
        ("ppo", ppo + ["--resume=true"], "no checkpoint at"),
        ("dpo", [dpo[0], f"--sft={f['tensor']}", *dpo[2:]], "it holds a Tensor"),
        ("eval", [*ev[:3], f"--policies=sft={f['rm']}", *ev[4:]], "where a language model is needed"),
        ("eval", ev[:4] + ["--reference=sft", f"--rm={f['flipped']}"], "flipped.pt is damaged"),
        # responses that leave no room for a prompt in the model's context, or prompts that fit none
        ("rm", rm + ["--max_new_tokens=100000"], "--max_new_tokens=100000 leaves no room for a prompt"),
        ("rm", rm + ["--max_new_tokens=125"], "at most 120"),
        ("ppo", ppo + ["--max_new_tokens=100000"], "--max_new_tokens=100000 leaves no room"),
        ("eval", ev + ["--max_new_tokens=500"], "--max_new_tokens=500 leaves no room"),
        ("ppo", ppo + ["--max_new_tokens=119"], "ppo_prompts.jsonl: no prompt fits"),
        # mistyped or empty inputs, once read as nothing
        ("rm", rm + [f"--human_labels={f['dir']}/typo.jsonl"], "no such labeling log"),
        ("rm", rm + [f"--human_labels={f['nolabels']}"], "no usable human label"),
        ("dpo", dpo[:-2] + [f"--val_comparisons={f['dir']}/typo.jsonl", f"--out_dir={new}"], "typo.jsonl"),
        ("dpo", dpo + [f"--pairs={f['dir']}/typo_pairs.jsonl"], "typo_pairs.jsonl"),
        ("label", [f"--report={f['empty']}"], "empty.jsonl is empty"),
        ("label", [f"--report={f['log']}", f"--export={f['log']}"], "is a file; give a folder"),
        ("label", [f"--report={f['log']}", f"--export={f['exported']}"], "already holds comparisons.jsonl; --force"),
        # paths of the wrong kind, and the OS saying no
        ("pretrain", TINY + [f"--out_dir={f['file']}"], "a_file.txt (or a folder above it) is a file"),
        ("pretrain", TINY + [f"--out_dir={f['file']}/sub"], "is a file, where a folder is needed"),
        ("world", ["--scale=tiny", f"--out={f['file']}"], "a_file.txt (or a folder above it) is a file"),
        ("label", lab + ["--host=999.1.1.1"], "cannot listen on 999.1.1.1:0"),
        # folders holding what a run must not write over
        ("world", ["--scale=tiny", f"--out={f['seed7']}"], "holds a world of scale tiny, seed 7"),
        ("world", ["--scale=tiny", f"--out={f['nometa']}"], "no meta.json"),
        ("pipeline", TINY + [f"--data_root={os.path.dirname(f['seed7'])}", f"--out_root={new}"],
         "holds a world of scale tiny, seed 7"),
    ]


def test_bad_inputs_are_refused_before_any_work(bad, capsys, tmp_path, monkeypatch):
    """Damaged or malformed checkpoints, responses longer than the context, mistyped inputs, folders of the wrong
    kind or holding another world or export: one line naming the culprit, every file as it was."""
    monkeypatch.chdir(tmp_path)
    cases = input_cases(bad)
    for script, argv, culprit in cases:
        refused(script, argv, culprit, capsys, str(tmp_path), bad["dir"], os.path.dirname(bad["data"]))
        assert not os.path.exists(os.path.join(bad["dir"], "new")), (script, argv)
    assert len(cases) + len(FLAGS) >= 120


def test_a_port_in_use_is_one_line_and_writes_no_log(bad, capsys, tmp_path):
    """label.py on a port another program listens on: one line naming host and port; no log, nothing sampled."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        refused("label", ["--labeler=r1", f"--completions={bad['completions']}", f"--log={tmp_path}/r1.jsonl",
                          f"--port={port}"], f"cannot listen on 127.0.0.1:{port}", capsys, str(tmp_path))
    assert not (tmp_path / "r1.jsonl").exists()
