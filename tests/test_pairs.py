"""Preference pairs both ways (nanorlhf/interop/pairs.py): TRL, TRL conversational and HH rows out of K-way comparisons and
back in (implicit prompts and multi-turn rows read as far as they go, unusable rows skipped and reported), and
train_rm.py / train_dpo.py training on --pairs."""
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


BAD_ROWS = [
    ({"prompt": "Q", "chosen": "a"}, "needs prompt, chosen and rejected"),
    ({"prompt": "Q", "chosen": "a", "rejected": None}, "expected a string"),
    ({"prompt": [{"role": "user", "content": "Q"}], "chosen": [{"role": "user", "content": "a"}],
      "rejected": [{"role": "assistant", "content": "b"}]}, "must end with an assistant message"),
    ({"chosen": "\n\nHuman: a\n\nAssistant: b", "rejected": "\n\nHuman: z\n\nAssistant: b"}, "different prompts"),
    ({"text": "hello"}, "needs prompt, chosen and rejected"),
]


@pytest.mark.parametrize("row, problem", BAD_ROWS)
def test_a_row_that_cannot_be_used_is_skipped_and_reported(tmp_path, capsys, row, problem):
    """A bad row among good ones is skipped, and the summary counts it and names its line, its format and the
    problem; the good rows are kept."""
    path = tmp_path / "mixed.jsonl"
    good = pairs.to_rows([comparison()], "trl")[0]
    path.write_text(json.dumps(good) + "\n" + json.dumps(row) + "\n" + json.dumps(good) + "\n")
    assert len(pairs.read_pairs(str(path))) == 2
    out = capsys.readouterr().out
    assert "1 rows skipped" in out and "mixed.jsonl:2:" in out and problem in out
    assert f"({pairs.detect(row)} row)" in out


def test_a_file_with_no_usable_row_is_refused_naming_the_format(tmp_path):
    """Only when no row can be used does reading fail: a DataError with the first row's line, format and problem."""
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r, _ in BAD_ROWS[1:3]))
    with pytest.raises(DataError, match=r"none of its 2 rows is usable.*bad.jsonl:1:.*expected a string.*\(trl row\)"):
        pairs.read_pairs(str(path))


def test_implicit_prompt_and_multi_turn_rows_keep_what_they_can(tmp_path, capsys):
    """TRL's implicit-prompt rows (chat-format strings, a plain shared prefix, message lists) are read; multi-turn
    rows (HH, messages, several <|user|> turns) are reduced to their last turn and counted; a system message is
    folded into the user turn as the exported chat template does."""
    msgs = lambda *turns: [{"role": r, "content": c} for r, c in turns]
    rows = [
        {"chosen": "<|user|>Name a fox.<|assistant|>Pip.<|endoftext|>",
         "rejected": "<|user|>Name a fox.<|assistant|>No."},
        {"chosen": "The sky is blue.", "rejected": "The sky is green."},
        {"chosen": msgs(("user", "Why?"), ("assistant", "Because.")),
         "rejected": msgs(("user", "Why?"), ("assistant", "No."))},
        {"chosen": "\n\nHuman: Hi\n\nAssistant: Hello\n\nHuman: Name a fox.\n\nAssistant: Pip.",
         "rejected": "\n\nHuman: Hi\n\nAssistant: Hello\n\nHuman: Name a fox.\n\nAssistant: No."},
        {"prompt": msgs(("system", "Be brief."), ("user", "Hi"), ("assistant", "Hello"), ("user", "Why?")),
         "chosen": msgs(("assistant", "Because.")), "rejected": msgs(("assistant", "No."))},
        {"prompt": "<|user|>Hi<|assistant|>Hello<|endoftext|><|user|>Why?<|assistant|>", "chosen": "A.",
         "rejected": "B."},
    ]
    path = tmp_path / "mixed.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    got = [(c["prompt"], *c["completions"]) for c in pairs.read_pairs(str(path))]
    assert got == [("Name a fox.", "Pip.", "No."), ("The sky is", " blue.", " green."), ("Why?", "Because.", "No."),
                   ("Name a fox.", "Pip.", "No."), ("Be brief.\n\nWhy?", "Because.", "No."), ("Why?", "A.", "B.")]
    out = capsys.readouterr().out
    assert "6 pairs (2 trl implicit, 1 conversational implicit, 1 hh, 1 conversational, 1 trl)" in out
    assert "3 multi-turn rows reduced to their last turn" in out and "skipped" not in out


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
