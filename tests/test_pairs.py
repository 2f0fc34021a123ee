"""Preference pairs both ways (nanorlhf/interop/pairs.py): TRL, TRL conversational and HH rows out of K-way comparisons and
back in, rows that cannot be used refused with their line, and train_rm.py / train_dpo.py training on --pairs."""
import json
import os

import pytest

import train_dpo
import train_rm
from nanorlhf.infra.config import parse_config
from nanorlhf.infra.jsonl import write_jsonl
from nanorlhf.infra.schemas import DataError
from nanorlhf.interop import pairs


def comparison(**kw):
    c = {"id": "c1", "prompt_id": "p1", "prompt": "Name a fox.", "completions": ["Pip.", "Mira.", "Pip.", "A fox."],
         "ranking": [[0], [1, 3], [2]], "labeler": "L1", "source": "sim"}
    return {**c, **kw}


def as_set(rows):
    return {(r["prompt"], r["chosen"], r["rejected"]) for r in rows}


def test_trl_rows_carry_the_chat_format_and_the_prompt_id():
    """Untied pairs best first, none between tied texts or identical texts; the prompt in the SFT chat format."""
    rows = pairs.to_rows([comparison()], "trl")
    assert [(r["chosen"], r["rejected"]) for r in rows] == [("Pip.", "Mira."), ("Pip.", "A fox."),
                                                            ("Mira.", "Pip."), ("A fox.", "Pip.")]
    assert all(r["prompt"] == "<|user|>Name a fox.<|assistant|>" and r["prompt_id"] == "p1"
               and r["comparison_id"] == "c1" for r in rows)
    identical = comparison(completions=["Pip.", "Pip.", "Mira.", "A fox."])  # ranked 0 > 1: the same text
    assert ("Pip.", "Pip.") not in {(r["chosen"], r["rejected"]) for r in pairs.to_rows([identical])}


def test_below_cutoff_labelers_are_left_out_unless_asked():
    low = comparison(below_cutoff=True)
    assert pairs.to_rows([low]) == [] and len(pairs.to_rows([low], keep_below_cutoff=True)) == 4


@pytest.mark.parametrize("fmt", pairs.FORMATS)
def test_every_format_round_trips(tmp_path, fmt):
    """Written in any format and read back, the pairs are the same (plain-text prompt), with their prompt_id."""
    rows = pairs.to_rows([comparison(), comparison(id="c2", prompt_id="p2", prompt="Why?")], fmt)
    path = tmp_path / "pairs.jsonl"
    write_jsonl(path, rows)
    back = pairs.read_pairs(str(path))
    plain = pairs.to_rows([comparison(), comparison(id="c2", prompt_id="p2", prompt="Why?")], "trl")
    expect = {(r["prompt"][len("<|user|>"):-len("<|assistant|>")], r["chosen"], r["rejected"]) for r in plain}
    got = {(c["prompt"], *c["completions"]) for c in back}
    assert got == expect and all(c["ranking"] == [[0], [1]] for c in back)
    if fmt != "hh":  # HH strings carry no ids
        assert {c["prompt_id"] for c in back} == {"p1", "p2"}


def test_hh_rows_follow_the_convention():
    """'\\n\\nHuman: Q\\n\\nAssistant: A', parsed back by splitting at the assistant turn."""
    row = pairs.to_rows([comparison()], "hh")[0]
    assert row["chosen"] == "\n\nHuman: Name a fox.\n\nAssistant: Pip."
    assert row["rejected"].rsplit("\n\nAssistant: ", 1) == ["\n\nHuman: Name a fox.", "Mira."]


@pytest.mark.parametrize("row, problem", [
    ({"chosen": "\n\nHuman: a\n\nAssistant: b\n\nHuman: c\n\nAssistant: d", "rejected": "x"}, "one HH turn"),
    ({"prompt": "Q", "chosen": "a"}, "expected a string"),
    ({"prompt": [{"role": "user", "content": "Q"}], "chosen": [{"role": "user", "content": "a"}],
      "rejected": [{"role": "assistant", "content": "b"}]}, "one assistant message"),
    ({"chosen": "\n\nHuman: a\n\nAssistant: b", "rejected": "\n\nHuman: z\n\nAssistant: b"}, "different prompts"),
    ({"text": "hello"}, "needs prompt, chosen and rejected"),
])
def test_rows_that_cannot_be_used_are_refused_with_their_line(tmp_path, row, problem):
    path = tmp_path / "bad.jsonl"
    good = pairs.to_rows([comparison()], "trl")[0]
    path.write_text(json.dumps(good) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(DataError, match=problem) as e:
        pairs.read_pairs(str(path))
    assert ":2" in str(e.value)


def test_train_rm_and_dpo_train_on_trl_pairs(stages, tmp_path):
    """The RM stage's comparisons out as TRL pairs (the command line), then train_rm.py --pairs and
    train_dpo.py --pairs train on them: one K = 2 comparison a pair."""
    out = str(tmp_path / "pairs.jsonl")
    rows = pairs.main(parse_config(pairs.PairsConfig, [f"--comparisons={stages['out']}/rm/comparisons.jsonl",
                                                       f"--out={out}"]))
    assert rows and all(r["prompt"].startswith("<|user|>") for r in rows)
    rm = train_rm.main(parse_config(train_rm.Config, ["--preset=tiny", f"--sft={stages['out']}/sft/ckpt.pt",
                                                      f"--data_dir={stages['data']}", f"--pairs={out}",
                                                      f"--out_dir={tmp_path}/rm"]))
    assert rm["report"]["n_train_comparisons"] == len(rows) and 0 <= rm["report"]["val_accuracy"] <= 1
    dpo = train_dpo.main(parse_config(train_dpo.Config, ["--preset=tiny", f"--sft={stages['out']}/sft/ckpt.pt",
                                                         f"--pairs={out}", f"--out_dir={tmp_path}/dpo",
                                                         f"--val_comparisons={stages['out']}/rm/val_comparisons.jsonl",
                                                         "--max_steps=2"]))
    assert os.path.exists(dpo["ckpt"]) and len(dpo["metrics"]) > 0


def test_comparisons_and_pairs_together_are_refused(stages, tmp_path):
    from nanorlhf.infra.config import ConfigError
    with pytest.raises(ConfigError, match="not both"):  # while the flags are read
        train_rm.main(parse_config(train_rm.Config, ["--preset=tiny", f"--sft={stages['out']}/sft/ckpt.pt",
                                                     f"--data_dir={stages['data']}", "--pairs=a.jsonl",
                                                     "--comparisons=b.jsonl", f"--out_dir={tmp_path}/rm"]))
