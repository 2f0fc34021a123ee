"""The Hugging Face export (nanorlhf/interop/export.py): files whose structure round-trips without transformers, and, when
transformers is installed, the same logits and token ids through AutoModel / AutoTokenizer."""
import json
import os
import struct

import pytest
import torch

from nanorlhf.checkpoint import load_model
from nanorlhf.infra.jsonl import PROMPT, read_jsonl
from nanorlhf.interop.export import (ExportConfig, bytes_to_unicode, export, read_safetensors, safetensors_bytes,
                             vocab_and_merges)
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
    specials are added tokens with the project's ids; the chat template writes the SFT format."""
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
    tc = json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert tc["chat_template"].startswith("{% for m in messages %}") and "<|assistant|>" in tc["chat_template"]


def test_vocab_and_merges_by_hand():
    """Bytes map to GPT-2's printable characters; a merged token yields one merge per split into two tokens."""
    ranks = {bytes([b]): b for b in range(256)} | {b"ab": 256, b"abc": 257}
    vocab, merges = vocab_and_merges(ranks)
    assert vocab[bytes_to_unicode()[ord(" ")]] == 32 and bytes_to_unicode()[ord(" ")] == "Ġ"
    assert merges == ["a b", "ab c"]


def test_exported_reward_model(stages, tmp_path):
    """The RM exports as a sequence classifier: trunk + `score` without bias, the offset recorded."""
    ckpt = os.path.join(stages["out"], "rm", "ckpt.pt")
    res = export(ExportConfig(ckpt=ckpt, out=str(tmp_path)))
    rm, _, ck = load_model(ckpt, kind="scalar")
    sd = read_safetensors(tmp_path / "model.safetensors")
    cfg = json.loads((tmp_path / "config.json").read_text())
    assert res["reward_model"] and cfg["architectures"] == ["GPT2ForSequenceClassification"]
    assert torch.equal(sd["score.weight"], rm.head.weight.detach()) and "score.bias" not in sd
    assert cfg["nanorlhf_score_offset"] == pytest.approx(rm.head.bias.item() - ck["extra"]["bias"])


def test_transformers_loads_the_export(stages, tmp_path):
    """With transformers installed: AutoModelForCausalLM reproduces the logits (1e-4), AutoTokenizer the ids."""
    transformers = pytest.importorskip("transformers")
    ckpt = os.path.join(stages["out"], "sft", "ckpt.pt")
    export(ExportConfig(ckpt=ckpt, out=str(tmp_path)))
    model, tok, _ = load_model(ckpt, dropout=0.0)
    hf = transformers.AutoModelForCausalLM.from_pretrained(str(tmp_path)).eval()
    hf_tok = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    prompts = [r["prompt"] for r in read_jsonl(os.path.join(stages["data"], "test_prompts.jsonl"), PROMPT)]
    for p in prompts:
        assert hf_tok(p)["input_ids"] == tok.encode(p)
        chat = hf_tok.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True)
        chat = chat["input_ids"] if hasattr(chat, "keys") else chat  # transformers 5 returns a dict
        assert list(chat) == [tok.user_id, *tok.encode(p), tok.assistant_id]
        x = torch.tensor([[tok.user_id, *tok.encode(p), tok.assistant_id]])
        with torch.no_grad():
            assert (hf(x).logits - model.eval()(x)).abs().max() < 1e-4
