"""A Hugging Face GPT-2 folder back as a project checkpoint, so evaluate.py and sample.py judge a model trained
elsewhere (TRL's DPOTrainer on the exported pairs, say): `python -m nanorlhf.interop.export --from_hf=DIR --out=CKPT`.

The folder needs GPT-2's architecture with the exact GELU ("gelu"), a tied unembedding, and a byte-level BPE with
the four special tokens: what interop/export.py writes, as libraries save it again (float32, bfloat16 or
float16 safetensors, one file or shards). A language model comes back as a chat policy, or as a base model when
its config says it was one; the reward model comes back with its offset still folded into ln_f's bias, its head
bias and the checkpoint's `bias` 0, so it scores exactly as the folder does. A checkpoint exported and imported
again has the same weights (tests/test_hf.py).

Example:
    import_hf("hf/dpo_from_trl", "out/trl/dpo/ckpt.pt")
    model, tok, ck = load_model("out/trl/dpo/ckpt.pt")
"""
from __future__ import annotations

import dataclasses
import json
import os

import torch

from nanorlhf.checkpoint import CheckpointError, save_checkpoint
from nanorlhf.interop.hf_tokenizer import tokenizer_from_json
from nanorlhf.interop.safetensors_io import read_safetensors
from nanorlhf.model import GPTConfig, ScalarHeadModel, import_gpt2_state_dict


def read_weights(folder: str) -> dict[str, torch.Tensor]:
    """The folder's tensors in float32: model.safetensors, or the shards its index names."""
    index = os.path.join(folder, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index, encoding="utf-8") as f:
            shards = sorted(set(json.load(f)["weight_map"].values()))
    else:
        shards = ["model.safetensors"]
    sd = {}
    for name in shards:
        if not os.path.exists(os.path.join(folder, name)):
            raise CheckpointError(f"{folder} has no {name} (this import reads safetensors weights)")
        sd.update(read_safetensors(os.path.join(folder, name)))
    return {k: v.float() if v.is_floating_point() else v for k, v in sd.items()}


def gpt_config(c: dict, folder: str) -> GPTConfig:
    """The GPTConfig of a GPT-2 config.json; anything this project's model cannot be is refused in one line."""
    bad = [f"{k}={c.get(k)!r}" for k, want in (("model_type", "gpt2"), ("activation_function", "gelu"))
           if c.get(k) != want]
    if not c.get("tie_word_embeddings", True):
        bad.append("an untied unembedding")
    if bad:
        raise CheckpointError(f"{folder}: not a model this project can run ({', '.join(bad)}; it needs GPT-2 with the "
                              "exact GELU and a tied unembedding, as interop/export.py writes)")
    return GPTConfig(vocab_size=c["vocab_size"], block_size=c["n_positions"], n_layer=c["n_layer"],
                     n_head=c["n_head"], n_embd=c["n_embd"], dropout=0.0)


def import_hf(folder: str, out: str) -> dict:
    """Write the checkpoint `out` from the Hugging Face folder; returns what was written."""
    if os.path.exists(out):
        raise CheckpointError(f"{out} exists: give a new path (an import never overwrites a checkpoint)")
    with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
        c = json.load(f)
    with open(os.path.join(folder, "tokenizer.json"), encoding="utf-8") as f:
        tj = json.load(f)
    about = c.get("nanorlhf", {})
    cfg = gpt_config(c, folder)
    try:
        tok = tokenizer_from_json(tj, about.get("tokenizer_name", "imported"))
    except ValueError as e:
        raise CheckpointError(f"{folder}: {e}") from None
    sd = read_weights(folder)
    reward_model = "score.weight" in sd
    if "lm_head.weight" in sd and not torch.equal(sd["lm_head.weight"], sd["transformer.wte.weight"]):
        raise CheckpointError(f"{folder}: its lm_head differs from wte (an untied unembedding this model cannot run)")
    try:
        if reward_model:
            net = ScalarHeadModel(cfg)
            trunk = import_gpt2_state_dict({k: v for k, v in sd.items() if k != "score.weight"}, cfg).transformer
            net.transformer.load_state_dict(trunk.state_dict())
            net.head.load_state_dict({"weight": sd["score.weight"], "bias": torch.zeros(1)})
        else:
            net = import_gpt2_state_dict({k: v for k, v in sd.items() if k != "lm_head.weight"}, cfg)
    except (RuntimeError, KeyError) as e:
        raise CheckpointError(f"{folder}: its weights do not fit its config ({str(e).splitlines()[0]})") from None
    config = {"from_hf": folder}
    if about.get("stage") == "base model":
        config["corpus"] = ""  # chat.is_base: a base model, which gets raw text
    extra = {"model_config": dataclasses.asdict(cfg), "tokenizer": tok.to_dict(), "imported": about}
    if reward_model:
        extra["bias"] = 0.0  # the offset is inside ln_f's bias
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    save_checkpoint(out, model=net.state_dict(), config=config, extra=extra, with_rng=False)
    kind = "reward model" if reward_model else about.get("stage", "chat policy")
    print(f"{folder} -> {out}: a {kind} of {sum(p.numel() for p in net.parameters()):,} parameters")
    return {"out": out, "reward_model": reward_model}
