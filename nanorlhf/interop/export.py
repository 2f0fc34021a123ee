"""A checkpoint as a Hugging Face model folder, and such a folder back as a checkpoint: the standard library and
torch alone.

    python -m nanorlhf.interop.export --ckpt=out/small/ppo_ptx_1m/ckpt.pt --out=hf/ppo_ptx_1m
    python -m nanorlhf.interop.export --ckpt=out/small/rm/ckpt.pt --out=hf/rm      # the RM: sequence classification
    python -m nanorlhf.interop.export --from_hf=hf/trained_elsewhere --out=out/elsewhere/ckpt.pt   # and back

writes, loadable with `AutoModelForCausalLM` / `AutoModelForSequenceClassification` and `AutoTokenizer`:

  config.json              GPT-2's config (model_type gpt2, activation "gelu": the exact GELU this model uses)
  model.safetensors        the weights under GPT-2's names: an 8-byte little-endian header length, a JSON
                           header {name: {dtype, shape, data_offsets}}, then the raw bytes; the unembedding
                           is tied to wte, so it is not stored (safetensors refuses shared tensors)
  tokenizer.json           the byte-level BPE: vocab, merges derived from tiktoken's ranks, the split pattern,
                           and the four special tokens as added tokens (interop/hf_tokenizer.py)
  tokenizer_config.json    input_ids and attention_mask only, the context as model_max_length (truncation from
                           the left), and a chat template that writes the chat format (a system message folded
                           into the next user turn)
  generation_config.json   eos = <|endoftext|>, pad = <|pad|>, 48 new tokens at temperature 1 (language models)
  README.md                a model card with a usage snippet (interop/card.py; tests/test_hf.py runs it)

The RM's head has a bias that GPT-2's `score` layer lacks. The offset PPO's reward adds (the head's bias minus
the demonstrations' mean) is folded into ln_f's bias along the head's direction, w . (beta + c w / |w|^2) =
w . beta + c, so the exported logit is r(x, y) itself; problem_type "regression" makes the text-classification
pipeline return it without a sigmoid. The way back (interop/hf_import.py) keeps the folded form: the same scores.
One difference to know: this project's `encode` never makes special tokens out of text, while a
Hugging Face tokenizer turns a literal "<|user|>" in a prompt into the special token.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import ClassVar

import torch

from nanorlhf.chat import is_base
from nanorlhf.infra.fileio import atomic_write, write_text
from nanorlhf.interop.card import model_card
from nanorlhf.interop.hf_tokenizer import tokenizer_config, tokenizer_json
from nanorlhf.interop.safetensors_io import safetensors_bytes
from nanorlhf.model import conv1d_layout, count_params, export_gpt2_state_dict

MAX_NEW_TOKENS = 48  # generation_config's default, as sample.py's
EXPORT_FILES = ("model.safetensors", "config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json",
                "README.md")


# -----------------------------------------------------------------------------
# the model


def hf_config(cfg, tok, reward_model: bool, about: dict) -> dict:
    """GPT-2's config.json for a GPTConfig (dropout 0: an exported model is for inference); `about` is kept
    under "nanorlhf" (the stage, the tokenizer's name), which libraries keep when they save the model again."""
    arch = "GPT2ForSequenceClassification" if reward_model else "GPT2LMHeadModel"
    c = {"model_type": "gpt2", "architectures": [arch],
         "vocab_size": cfg.vocab_size, "n_positions": cfg.block_size, "n_embd": cfg.n_embd, "n_layer": cfg.n_layer,
         "n_head": cfg.n_head, "n_inner": 4 * cfg.n_embd, "activation_function": "gelu", "layer_norm_epsilon": 1e-5,
         "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0, "initializer_range": 0.02,
         "scale_attn_weights": True, "tie_word_embeddings": True, "torch_dtype": "float32",
         "bos_token_id": tok.eot_id, "eos_token_id": tok.eot_id, "pad_token_id": tok.pad_id, "nanorlhf": about}
    if reward_model:
        c.update(num_labels=1, id2label={"0": "reward"}, label2id={"reward": 0}, problem_type="regression")
    return c


def hf_state_dict(model, reward_model: bool, offset: float = 0.0) -> dict[str, torch.Tensor]:
    """GPT-2's names and Conv1D layout; the tied unembedding left out; the RM's head as `score`, its offset folded
    into ln_f's bias (module docstring)."""
    if not reward_model:
        sd = export_gpt2_state_dict(model)
        sd.pop("lm_head.weight")  # tied to transformer.wte.weight
        return sd
    sd = conv1d_layout({f"transformer.{k}": v for k, v in model.transformer.state_dict().items()})
    w = model.head.weight.detach()[0].double()                                   # (C,)
    beta = sd["transformer.ln_f.bias"].double() + offset * w / w.dot(w)          # w . beta' = w . beta + offset
    return {**sd, "transformer.ln_f.bias": beta.float(), "score.weight": model.head.weight.detach().clone()}


@dataclass
class ExportConfig:
    ckpt: str = ""
    """a stage checkpoint to export: a language model (base, SFT, PPO, DPO) or the reward model"""
    out: str = ""
    """the folder to write the model into (or, with --from_hf, the checkpoint file to write)"""
    from_hf: str = ""
    """the other way: a Hugging Face GPT-2 folder (one this command wrote, trained further elsewhere) to a checkpoint"""
    format: str = "hf"
    """hf: a Hugging Face GPT-2 folder"""
    CHOICES: ClassVar[dict] = {"format": ("hf",)}


def export(cfg: ExportConfig) -> dict:
    from nanorlhf.checkpoint import load_checkpoint, load_model
    from nanorlhf.infra.cli import UsageError
    if cfg.from_hf:
        from nanorlhf.interop.hf_import import import_hf
        if cfg.ckpt or not cfg.out:
            raise UsageError("give --from_hf=DIR and --out=CKPT (the checkpoint to write), without --ckpt")
        return import_hf(cfg.from_hf, cfg.out)
    if not cfg.ckpt or not cfg.out:
        raise UsageError("give --ckpt=FILE and --out=DIR (or --from_hf=DIR and --out=CKPT)")
    # an earlier export's files are replaced (and the stale ones removed); any other file means another folder
    others = sorted(set(os.listdir(cfg.out)) - set(EXPORT_FILES)) if os.path.isdir(cfg.out) else []
    if others:
        raise UsageError(f"--out={cfg.out} holds files an export does not write ({', '.join(others[:3])}): "
                         "give a new or empty folder, or one an earlier export wrote")
    reward_model = "head.weight" in load_checkpoint(cfg.ckpt)["model"]
    model, tok, ck = load_model(cfg.ckpt, kind="scalar" if reward_model else "gpt", dropout=0.0)
    offset = model.head.bias.item() - float(ck["extra"].get("bias", 0.0)) if reward_model else 0.0
    stage = "reward model" if reward_model else "base model" if is_base(ck) else "chat policy"
    name = os.path.basename(os.path.dirname(os.path.abspath(cfg.ckpt)))
    about = {"stage": stage, "name": name, "tokenizer_name": tok.enc.name, "folded_offset": offset}
    os.makedirs(cfg.out, exist_ok=True)
    blob = safetensors_bytes(hf_state_dict(model, reward_model, offset), {"format": "pt"})
    atomic_write(os.path.join(cfg.out, "model.safetensors"), lambda f: f.write(blob))
    files = {"config.json": hf_config(model.cfg, tok, reward_model, about), "tokenizer.json": tokenizer_json(tok),
             "tokenizer_config.json": tokenizer_config(tok, model.cfg.block_size, "right" if reward_model else "left")}
    if not reward_model:
        files["generation_config.json"] = {"bos_token_id": tok.eot_id, "eos_token_id": tok.eot_id,
                                           "pad_token_id": tok.pad_id, "do_sample": True, "temperature": 1.0,
                                           "max_new_tokens": MAX_NEW_TOKENS}
    for stale in set(EXPORT_FILES) - set(files) - {"model.safetensors", "README.md"}:
        if os.path.exists(os.path.join(cfg.out, stale)):
            os.remove(os.path.join(cfg.out, stale))
    for fname, obj in files.items():
        write_text(os.path.join(cfg.out, fname), json.dumps(obj, indent=1, ensure_ascii=False) + "\n")
    write_text(os.path.join(cfg.out, "README.md"), model_card(about, model.cfg, count_params(model)["total"],
                                                             cfg.out, MAX_NEW_TOKENS))
    names = ["model.safetensors", *files, "README.md"]
    kind = "GPT2ForSequenceClassification" if reward_model else "GPT2LMHeadModel"
    print(f"{cfg.ckpt} -> {cfg.out}: {stage} ({kind}), {len(blob) / 1e6:.1f} MB, files {', '.join(names)}")
    return {"out": cfg.out, "reward_model": reward_model, "files": names}


if __name__ == "__main__":
    from nanorlhf.infra.cli import run
    run(export, ExportConfig, __doc__)
