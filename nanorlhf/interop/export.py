"""A checkpoint as a Hugging Face model folder, written with the standard library and torch alone.

    python -m nanorlhf.interop.export --ckpt=out/small/ppo_ptx_1m/ckpt.pt --out=hf/ppo_ptx_1m
    python -m nanorlhf.interop.export --ckpt=out/small/rm/ckpt.pt --out=hf/rm      # the RM: sequence classification

writes, loadable with `AutoModelForCausalLM` / `AutoModelForSequenceClassification` and `AutoTokenizer`:

  config.json              GPT-2's config (model_type gpt2, activation "gelu": the exact GELU this model uses)
  model.safetensors        the weights under GPT-2's names: an 8-byte little-endian header length, a JSON
                           header {name: {dtype, shape, data_offsets}}, then the raw bytes; the unembedding
                           is tied to wte, so it is not stored (safetensors refuses shared tensors)
  tokenizer.json           the byte-level BPE: vocab, merges derived from tiktoken's ranks, the split pattern,
                           and the four special tokens as added tokens
  tokenizer_config.json    the special tokens' roles and a chat template that writes the project's chat
                           format, <|user|>{prompt}<|assistant|>{response}<|endoftext|>
  generation_config.json   eos = <|endoftext|>, pad = <|pad|>, sampling at temperature 1 (chat models)

The RM's head has a bias that GPT-2's `score` layer lacks: its logit plus config.json's
`nanorlhf_score_offset` is the reward PPO optimised (the head bias minus the demonstrations' mean).
One difference to know: this project's `encode` never makes special tokens out of text, while a
Hugging Face tokenizer turns a literal "<|user|>" in a prompt into the special token.
"""
from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass
from typing import ClassVar

import torch

from nanorlhf.infra.fileio import atomic_write, write_text
from nanorlhf.model import conv1d_layout, export_gpt2_state_dict

SAFETENSORS_DTYPES = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16", torch.int64: "I64"}
CHAT_TEMPLATE = ("{% for m in messages %}{% if m['role'] == 'user' %}<|user|>{{ m['content'] }}"
                 "{% elif m['role'] == 'assistant' %}<|assistant|>{{ m['content'] }}<|endoftext|>{% endif %}"
                 "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}")


# -----------------------------------------------------------------------------
# safetensors


def safetensors_bytes(tensors: dict[str, torch.Tensor], metadata: dict[str, str] | None = None) -> bytes:
    """The safetensors encoding of named tensors: header length (u64 LE), JSON header padded to 8 bytes, data."""
    header, chunks, offset = {}, [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous().cpu()
        raw = t.view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": SAFETENSORS_DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = metadata
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    return struct.pack("<Q", len(head)) + head + b"".join(chunks)


def read_safetensors(path) -> dict[str, torch.Tensor]:
    """The tensors of a safetensors file (the inverse of safetensors_bytes)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    types = {v: k for k, v in SAFETENSORS_DTYPES.items()}
    out = {}
    for name, h in header.items():
        start, end = (8 + n + x for x in h["data_offsets"])
        buf = bytearray(data[start:end])
        out[name] = torch.frombuffer(buf, dtype=types[h["dtype"]]).reshape(h["shape"]) if buf else \
            torch.zeros(h["shape"], dtype=types[h["dtype"]])
    return out


# -----------------------------------------------------------------------------
# the tokenizer


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's printable stand-in character for each byte (byte-level BPE stores tokens as such strings)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = {b: chr(b) for b in keep}, 0
    for b in range(256):
        if b not in chars:
            chars[b], extra = chr(256 + extra), extra + 1
    return dict(sorted(chars.items()))


def vocab_and_merges(ranks: dict[bytes, int]) -> tuple[dict[str, int], list[str]]:
    """tiktoken's ranks as BPE vocab and merges: every split of a token into two tokens is a merge, ranked by
    the merged token (tiktoken merges the adjacent pair whose concatenation has the lowest rank)."""
    b2u = bytes_to_unicode()
    text = lambda b: "".join(b2u[x] for x in b)
    merges = []
    for token, rank in ranks.items():
        splits = [(token[:i], token[i:]) for i in range(1, len(token)) if token[:i] in ranks and token[i:] in ranks]
        merges += [(rank, ranks[a], ranks[b], a, b) for a, b in splits]
    merges.sort()
    return {text(t): r for t, r in ranks.items()}, [f"{text(a)} {text(b)}" for *_, a, b in merges]


def tokenizer_json(tok) -> dict:
    """tokenizer.json for the `tokenizers` library: split pattern, byte-level BPE, specials as added tokens."""
    vocab, merges = vocab_and_merges(tok.enc._mergeable_ranks)
    specials = sorted(tok.enc._special_tokens.items(), key=lambda kv: kv[1])
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for s, i in specials],
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": tok.enc._pat_str}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
        # ignore_merges: a piece that is itself a token is taken whole, as tiktoken does
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": True,
                  "vocab": vocab, "merges": merges},
    }


def tokenizer_config(tok, block_size: int) -> dict:
    return {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": block_size,
            "bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "pad_token": "<|pad|>",
            "additional_special_tokens": ["<|user|>", "<|assistant|>"], "clean_up_tokenization_spaces": False,
            "chat_template": CHAT_TEMPLATE}

# -----------------------------------------------------------------------------
# the model


def hf_config(cfg, tok, reward_model: bool, score_offset: float = 0.0) -> dict:
    """GPT-2's config.json for a GPTConfig (dropout 0: an exported model is for inference)."""
    arch = "GPT2ForSequenceClassification" if reward_model else "GPT2LMHeadModel"
    c = {"model_type": "gpt2", "architectures": [arch],
         "vocab_size": cfg.vocab_size, "n_positions": cfg.block_size, "n_embd": cfg.n_embd, "n_layer": cfg.n_layer,
         "n_head": cfg.n_head, "n_inner": 4 * cfg.n_embd, "activation_function": "gelu", "layer_norm_epsilon": 1e-5,
         "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0, "initializer_range": 0.02,
         "scale_attn_weights": True, "tie_word_embeddings": True, "torch_dtype": "float32",
         "bos_token_id": tok.eot_id, "eos_token_id": tok.eot_id, "pad_token_id": tok.pad_id}
    if reward_model:
        c.update(num_labels=1, id2label={"0": "reward"}, label2id={"reward": 0}, nanorlhf_score_offset=score_offset)
    return c


def hf_state_dict(model, reward_model: bool) -> dict[str, torch.Tensor]:
    """GPT-2's names and Conv1D layout; the tied unembedding left out; the RM's head as `score` (no bias)."""
    if not reward_model:
        sd = export_gpt2_state_dict(model)
        sd.pop("lm_head.weight")  # tied to transformer.wte.weight
        return sd
    trunk = conv1d_layout({f"transformer.{k}": v for k, v in model.transformer.state_dict().items()})
    return {**trunk, "score.weight": model.head.weight.detach().clone()}


@dataclass
class ExportConfig:
    ckpt: str = ""
    """a stage checkpoint: a language model (base, SFT, PPO, DPO) or the reward model"""
    out: str = ""
    """folder to write the model into"""
    format: str = "hf"
    """hf: a Hugging Face GPT-2 folder"""
    CHOICES: ClassVar[dict] = {"format": ("hf",)}


def export(cfg: ExportConfig) -> dict:
    from nanorlhf.checkpoint import load_checkpoint, load_model
    from nanorlhf.infra.cli import UsageError
    if not cfg.ckpt or not cfg.out:
        raise UsageError("give --ckpt=FILE and --out=DIR")
    reward_model = "head.weight" in load_checkpoint(cfg.ckpt)["model"]
    model, tok, ck = load_model(cfg.ckpt, kind="scalar" if reward_model else "gpt", dropout=0.0)
    offset = model.head.bias.item() - float(ck["extra"].get("bias", 0.0)) if reward_model else 0.0
    os.makedirs(cfg.out, exist_ok=True)
    blob = safetensors_bytes(hf_state_dict(model, reward_model), {"format": "pt"})
    atomic_write(os.path.join(cfg.out, "model.safetensors"), lambda f: f.write(blob))
    files = {"config.json": hf_config(model.cfg, tok, reward_model, offset),
             "tokenizer.json": tokenizer_json(tok),
             "tokenizer_config.json": tokenizer_config(tok, model.cfg.block_size),
             "generation_config.json": {"bos_token_id": tok.eot_id, "eos_token_id": tok.eot_id,
                                        "pad_token_id": tok.pad_id, "do_sample": True, "temperature": 1.0,
                                        "max_new_tokens": 48}}
    for name, obj in files.items():
        write_text(os.path.join(cfg.out, name), json.dumps(obj, indent=1, ensure_ascii=False) + "\n")
    kind = "reward model (GPT2ForSequenceClassification)" if reward_model else "language model (GPT2LMHeadModel)"
    names = ["model.safetensors", *files]
    print(f"{cfg.ckpt} -> {cfg.out}: {kind}, {len(blob) / 1e6:.1f} MB, files {', '.join(names)}")
    return {"out": cfg.out, "reward_model": reward_model, "files": ["model.safetensors", *files]}


if __name__ == "__main__":
    from nanorlhf.infra.cli import run
    run(export, ExportConfig, __doc__)
