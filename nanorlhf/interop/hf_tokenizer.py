"""The project's tokenizer as Hugging Face's tokenizer.json and tokenizer_config.json, and back.

tiktoken merges, inside each piece the split pattern makes, the adjacent pair whose concatenation has the
lowest rank; a byte-level BPE with `ignore_merges` does the same given one merge per split of a token into two
tokens, ranked by the merged token (vocab_and_merges). Bytes are stored as GPT-2's printable stand-ins
(bytes_to_unicode). tokenizer_from_json inverts tokenizer_json exactly, for folders this project wrote or that a
library (TRL, transformers' Trainer) saved again.

The chat template writes the format every post-pretraining stage trained on,
<|user|>{prompt}<|assistant|>{response}<|endoftext|>; the model never saw a system role, so a system message is
folded into the next user turn as "{system}\\n\\n{user}" (any other role is refused).

Example:
    files = {"tokenizer.json": tokenizer_json(tok), "tokenizer_config.json": tokenizer_config(tok, 128, "left")}
    tok_again = tokenizer_from_json(files["tokenizer.json"])          # the same ids for every text
"""
from __future__ import annotations

from nanorlhf.tokenizer import SPECIAL_TOKENS, Tokenizer

CHAT_TEMPLATE = (
    "{% set ns = namespace(system='') %}{% for m in messages %}"
    "{% if m['role'] == 'system' %}{% set ns.system = ns.system + m['content'] + '\\n\\n' %}"
    "{% elif m['role'] == 'user' %}<|user|>{{ ns.system + m['content'] }}{% set ns.system = '' %}"
    "{% elif m['role'] == 'assistant' %}<|assistant|>{{ m['content'] }}<|endoftext|>"
    "{% else %}{{ raise_exception('this model knows the roles system, user and assistant, not ' + m['role']) }}"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}")


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


def tokenizer_json(tok: Tokenizer) -> dict:
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


def tokenizer_config(tok: Tokenizer, block_size: int, padding_side: str) -> dict:
    """The special tokens' roles; input_ids and attention_mask only (GPT-2 adds token_type_ids to the embeddings,
    so a tokenizer returning them shifts every logit); the context as model_max_length, truncated from the left
    (a long prompt keeps its end, where the question and <|assistant|> are); the chat template."""
    return {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": block_size,
            "model_input_names": ["input_ids", "attention_mask"], "truncation_side": "left",
            "padding_side": padding_side, "bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>",
            "pad_token": "<|pad|>", "additional_special_tokens": ["<|user|>", "<|assistant|>"],
            "clean_up_tokenization_spaces": False, "chat_template": CHAT_TEMPLATE}


def tokenizer_from_json(tj: dict, name: str = "imported") -> Tokenizer:
    """The project's tokenizer from a tokenizer.json of this kind (byte-level BPE, one split pattern, the four
    special tokens); ValueError says what else it is."""
    model, pre = tj.get("model", {}), tj.get("pre_tokenizer") or {}
    split = [p for p in pre.get("pretokenizers", [pre]) if p.get("type") == "Split"]
    if model.get("type") != "BPE" or len(split) != 1 or "Regex" not in split[0].get("pattern", {}):
        raise ValueError("its tokenizer.json is not a byte-level BPE with one split pattern (as this project writes)")
    u2b = {c: b for b, c in bytes_to_unicode().items()}
    try:
        ranks = {bytes(u2b[c] for c in token): rank for token, rank in model["vocab"].items()}
    except KeyError:
        raise ValueError("its vocabulary holds characters that are not GPT-2's byte stand-ins") from None
    specials = {t["content"]: t["id"] for t in tj.get("added_tokens", [])}
    missing = [s for s in SPECIAL_TOKENS if s not in specials]
    if missing:
        raise ValueError(f"its tokenizer lacks the special tokens {', '.join(missing)}")
    return Tokenizer._build(name, split[0]["pattern"]["Regex"], ranks, {s: specials[s] for s in SPECIAL_TOKENS})
