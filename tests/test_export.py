"""The Hugging Face export (nanorlhf/interop/export.py) and the way back (interop/hf_import.py), without transformers:
files whose structure round-trips, a tokenizer whose reference BPE gives tiktoken's ids, a chat template that folds
a system message in, the RM's offset folded into ln_f, and project -> folder -> project with the same weights.
tests/test_hf.py runs the same folders through transformers where it is installed."""
import json
import os
import struct

import pytest
import torch

from nanorlhf.checkpoint import load_model
from nanorlhf.infra.jsonl import PROMPT, read_jsonl
from nanorlhf.checkpoint import CheckpointError, load_checkpoint
from nanorlhf.interop.export import ExportConfig, export
from nanorlhf.interop.hf_tokenizer import bytes_to_unicode, tokenizer_from_json, vocab_and_merges
from nanorlhf.interop.safetensors_io import read_safetensors, safetensors_bytes
from nanorlhf.reward import score_texts
from nanorlhf.model import import_gpt2_state_dict
from nanorlhf.tokenizer import gpt2_pretokenizer


def bpe_encode(text: str, vocab: dict, merges: list[str]) -> list[int]:
    """A reference byte-level BPE on the exported vocab and merges: split, take whole tokens as they are
    (ignore_merges), else merge the adjacent pair of lowest merge rank until none is left."""
    b2u, rank = bytes_to_unicode(), {tuple(m.split(" ")): i for i, m in enumerate(merges)}
    ids = []
    for piece in gpt2_pretokenizer().findall(text):
        word = "".join(b2u[b] for b in piece.encode())
        if word in vocab:
            ids.append(vocab[word])
            continue
        parts = list(word)
        while True:
            pairs = [(rank.get((a, b), len(rank)), i) for i, (a, b) in enumerate(zip(parts, parts[1:]))]
            best, i = min(pairs, default=(len(rank), 0))
            if best == len(rank):
                break
            parts[i:i + 2] = [parts[i] + parts[i + 1]]
        ids += [vocab[p] for p in parts]
    return ids


def test_safetensors_layout_by_hand():
    """Header length as u64 little-endian, a JSON header padded to 8 bytes, then each tensor's raw bytes."""
    blob = safetensors_bytes({"a": torch.tensor([1.0, 2.0]), "b": torch.zeros(2, 3)}, {"format": "pt"})
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    assert n % 8 == 0 and header["__metadata__"] == {"format": "pt"}
    assert header["a"] == {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}
    assert header["b"]["data_offsets"] == [8, 32] and len(blob) == 8 + n + 32
    assert blob[8 + n:8 + n + 8] == struct.pack("<2f", 1.0, 2.0)


def test_exported_policy_round_trips(stages, tmp_path):
    """The exported weights rebuild the same model (logits equal), the tied unembedding is not stored, and the
    config names the exact GELU and the special tokens."""
    ckpt = os.path.join(stages["out"], "sft", "ckpt.pt")
    res = export(ExportConfig(ckpt=ckpt, out=str(tmp_path)))
    assert sorted(res["files"]) == sorted(os.listdir(tmp_path))
    model, tok, _ = load_model(ckpt, dropout=0.0)
    sd = read_safetensors(tmp_path / "model.safetensors")
    assert "lm_head.weight" not in sd
    cfg = json.loads((tmp_path / "config.json").read_text())
    assert cfg["activation_function"] == "gelu" and cfg["eos_token_id"] == tok.eot_id
    assert cfg["n_positions"] == model.cfg.block_size and cfg["tie_word_embeddings"]
    again = import_gpt2_state_dict(sd, model.cfg).eval()
    x = torch.randint(0, model.cfg.vocab_size - 4, (2, 12))
    with torch.no_grad():
        assert torch.equal(model.eval()(x), again(x))


def test_exported_tokenizer_encodes_as_tiktoken(stages, tmp_path):
    """tokenizer.json's vocab and merges, applied by a reference BPE, give tiktoken's ids on every test prompt; the
    specials are added tokens with the project's ids; read back (tokenizer_from_json), it encodes alike."""
    ckpt = os.path.join(stages["out"], "sft", "ckpt.pt")
    export(ExportConfig(ckpt=ckpt, out=str(tmp_path)))
    _, tok, _ = load_model(ckpt)
    tj = json.loads((tmp_path / "tokenizer.json").read_text())
    vocab, merges = tj["model"]["vocab"], tj["model"]["merges"]
    assert len(vocab) + len(tj["added_tokens"]) == tok.vocab_size
    assert {t["content"]: t["id"] for t in tj["added_tokens"]}["<|user|>"] == tok.user_id
    prompts = [r["prompt"] for r in read_jsonl(os.path.join(stages["data"], "test_prompts.jsonl"), PROMPT)]
    prompts += ["naïve café — 3.14 x\n\n  y", "Hattie's  dog\tran"]
    assert all(bpe_encode(p, vocab, merges) == tok.encode(p) for p in prompts)
    back = tokenizer_from_json(tj)
    assert all(back.encode(p) == tok.encode(p) for p in prompts) and back.enc._special_tokens == tok.enc._special_tokens


def test_vocab_and_merges_by_hand():
    """Bytes map to GPT-2's printable characters; a merged token yields one merge per split into two tokens."""
    ranks = {bytes([b]): b for b in range(256)} | {b"ab": 256, b"abc": 257}
    vocab, merges = vocab_and_merges(ranks)
    assert vocab[bytes_to_unicode()[ord(" ")]] == 32 and bytes_to_unicode()[ord(" ")] == "Ġ"
    assert merges == ["a b", "ab c"]


def test_exported_reward_model_folds_its_offset_into_ln_f(stages, tmp_path):
    """The RM exports as a sequence classifier (trunk + `score` without bias, problem_type regression), and w . ln_f(h)
    with the folded ln_f bias equals the project's reward r(x, y) = head(h) + head.bias - b on every position."""
    ckpt = os.path.join(stages["out"], "rm", "ckpt.pt")
    res = export(ExportConfig(ckpt=ckpt, out=str(tmp_path)))
    rm, _, ck = load_model(ckpt, kind="scalar")
    sd = read_safetensors(tmp_path / "model.safetensors")
    cfg = json.loads((tmp_path / "config.json").read_text())
    assert res["reward_model"] and cfg["architectures"] == ["GPT2ForSequenceClassification"]
    assert cfg["problem_type"] == "regression" and "generation_config.json" not in res["files"]
    assert torch.equal(sd["score.weight"], rm.head.weight.detach()) and "score.bias" not in sd
    trunk = rm.transformer
    h = torch.randn(3, rm.cfg.n_embd)
    ln = torch.nn.functional.layer_norm(h, (rm.cfg.n_embd,), trunk.ln_f.weight, sd["transformer.ln_f.bias"], 1e-5)
    with torch.no_grad():
        want = rm.head(torch.nn.functional.layer_norm(h, (rm.cfg.n_embd,), trunk.ln_f.weight, trunk.ln_f.bias,
                                                      1e-5)).squeeze(-1) - ck["extra"]["bias"]
    assert torch.allclose(ln @ sd["score.weight"][0], want, atol=1e-5)


def test_tokenizer_config_and_chat_template(stages, tmp_path):
    """tokenizer_config returns input_ids and attention_mask only (GPT-2 would add token_type_ids to the embeddings),
    names the context and truncates from the left; the chat template (rendered with jinja2, as transformers does)
    writes the SFT format, folds a system message into the next user turn, and refuses an unknown role."""
    jinja2 = pytest.importorskip("jinja2")
    export(ExportConfig(ckpt=os.path.join(stages["out"], "sft", "ckpt.pt"), out=str(tmp_path)))
    tc = json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert tc["model_input_names"] == ["input_ids", "attention_mask"] and tc["truncation_side"] == "left"
    assert tc["model_max_length"] == 128 and tc["padding_side"] == "left"

    def fail(message):
        raise ValueError(message)
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    render = lambda msgs, gen: env.from_string(tc["chat_template"]).render(messages=msgs, add_generation_prompt=gen,
                                                                          raise_exception=fail)
    user, sys_ = {"role": "user", "content": "Hi?"}, {"role": "system", "content": "Be brief."}
    assert render([user], True) == "<|user|>Hi?<|assistant|>"
    turn = render([user, {"role": "assistant", "content": "Hello."}], False)
    assert turn == "<|user|>Hi?<|assistant|>Hello.<|endoftext|>"
    assert render([sys_, user], True) == "<|user|>Be brief.\n\nHi?<|assistant|>"
    with pytest.raises(ValueError, match="not tool"):
        render([{"role": "tool", "content": "x"}, user], True)


def test_project_to_folder_to_project_keeps_the_weights(stages, tmp_path):
    """Export then `--from_hf` import gives the policy's every weight back exactly, the same tokenizer, and a chat
    policy sample.py can load; the RM comes back scoring as before (its offset stays folded into ln_f)."""
    sft = os.path.join(stages["out"], "sft", "ckpt.pt")
    export(ExportConfig(ckpt=sft, out=str(tmp_path / "hf")))
    export(ExportConfig(from_hf=str(tmp_path / "hf"), out=str(tmp_path / "back" / "ckpt.pt")))
    a, b = load_checkpoint(sft)["model"], load_checkpoint(tmp_path / "back" / "ckpt.pt")["model"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    (_, tok, _), (_, tok2, ck2) = load_model(sft), load_model(tmp_path / "back" / "ckpt.pt")
    assert tok.enc._mergeable_ranks == tok2.enc._mergeable_ranks and tok.enc._special_tokens == tok2.enc._special_tokens
    assert tok2.enc.name == tok.enc.name and "corpus" not in ck2["config"]  # a chat policy
    rm_ckpt = os.path.join(stages["out"], "rm", "ckpt.pt")
    export(ExportConfig(ckpt=rm_ckpt, out=str(tmp_path / "hf_rm")))
    export(ExportConfig(from_hf=str(tmp_path / "hf_rm"), out=str(tmp_path / "rm" / "ckpt.pt")))
    prompts, texts = ["Name a fox.", "Why?", "Tell me about Mira."], ["Pip.", "Because.", "Mira is a crow."]
    scores = []
    for path in (rm_ckpt, tmp_path / "rm" / "ckpt.pt"):
        rm, t, ck = load_model(path, kind="scalar")
        with torch.no_grad():
            scores.append(score_texts(rm.eval(), t, prompts, texts, "cpu", ck["extra"]["bias"]))
    assert torch.allclose(scores[0], scores[1], atol=1e-5)


def test_a_folder_this_project_cannot_run_is_refused_in_one_line(stages, tmp_path):
    """An approximate GELU or a tokenizer without the chat tokens is named, not loaded into a wrong model."""
    export(ExportConfig(ckpt=os.path.join(stages["out"], "sft", "ckpt.pt"), out=str(tmp_path)))
    cfg = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "activation_function": "gelu_new"}))
    with pytest.raises(CheckpointError, match="activation_function='gelu_new'"):
        export(ExportConfig(from_hf=str(tmp_path), out=str(tmp_path / "c.pt")))
    tj = json.loads((tmp_path / "tokenizer.json").read_text())
    with pytest.raises(ValueError, match="<\\|user\\|>"):
        tokenizer_from_json({**tj, "added_tokens": [t for t in tj["added_tokens"] if t["content"] != "<|user|>"]})


def test_export_replaces_an_earlier_export_and_refuses_other_folders(stages, tmp_path):
    """Exporting the RM over an earlier policy export replaces its files and drops the stale generation_config;
    a folder holding other files, and an import onto an existing checkpoint, are refused and left as they were."""
    from nanorlhf.infra.cli import UsageError
    out = tmp_path / "hf"
    export(ExportConfig(ckpt=os.path.join(stages["out"], "sft", "ckpt.pt"), out=str(out)))
    export(ExportConfig(ckpt=os.path.join(stages["out"], "rm", "ckpt.pt"), out=str(out)))
    assert not (out / "generation_config.json").exists()
    assert "score.weight" in read_safetensors(out / "model.safetensors")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    with pytest.raises(UsageError, match="notes.txt"):
        export(ExportConfig(ckpt=os.path.join(stages["out"], "sft", "ckpt.pt"), out=str(tmp_path / "mine")))
    assert os.listdir(tmp_path / "mine") == ["notes.txt"]
    (tmp_path / "c.pt").write_bytes(b"old")
    with pytest.raises(CheckpointError, match="never overwrites"):
        export(ExportConfig(from_hf=str(out), out=str(tmp_path / "c.pt")))
    assert (tmp_path / "c.pt").read_bytes() == b"old"
