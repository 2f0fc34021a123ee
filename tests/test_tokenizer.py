"""Tests for nanorlhf/tokenizer.py: BPE training, tiktoken serving, file format."""
import random
import time

import pytest
import tiktoken
import tiktoken.load
import tiktoken.registry
import torch

from nanorlhf.tokenizer import GPT2_PAT, SPECIAL_TOKENS, Tokenizer, _merge_word, gpt2_pretokenizer, train_bpe

ENGLISH = """\
The quick brown fox jumps over the lazy dog. She said: "It's not what you think,
it's what you'll do next." We've seen 1,234 birds and 56 cats in 2023 -- they're
everywhere!   Reinforcement learning from human feedback trains a reward model on
comparisons, then fine-tunes the policy with PPO while a KL penalty keeps it close
to the supervised model.\tTabs, newlines,

and   runs of spaces should all survive. I'd say the labelers' preferences matter most.
""" * 8


@pytest.fixture(scope="module")
def tok():
    return Tokenizer.train(ENGLISH, vocab_size=400)


def ranked(ranks):
    return [t for t, _ in sorted(ranks.items(), key=lambda kv: kv[1])]


# -----------------------------------------------------------------------------
# training


def test_merge_word_by_hand():
    """One merge step: each non-overlapping occurrence of the pair, scanned left to right, becomes new_id."""
    assert _merge_word([1, 2, 3, 1, 2], (1, 2), 256) == [256, 3, 256]
    assert _merge_word([5, 5, 5], (5, 5), 256) == [256, 5]          # left to right, no overlap
    assert _merge_word([5, 5, 5, 5], (5, 5), 256) == [256, 256]
    assert _merge_word([2, 1, 2, 1], (1, 2), 300) == [2, 300, 1]    # order matters: (2, 1) is not (1, 2)
    assert _merge_word([7], (7, 7), 256) == [7] and _merge_word([], (7, 7), 256) == []
    word = [1, 2, 3]
    _merge_word(word, (1, 2), 256)
    assert word == [1, 2, 3]                                          # a new list; the input is unchanged


def test_merges_match_hand_computation():
    """First merges on "aaabdaaabac": aa (x4), then ab (tie with aa+a, smaller ids), then aaab."""
    ranks = train_bpe("aaabdaaabac", 3)
    assert ranked(ranks)[:256] == [bytes([b]) for b in range(256)]
    assert ranked(ranks)[256:] == [b"aa", b"ab", b"aaab"]


def test_merges_never_cross_pretokens():
    """Merges stay inside GPT-2 words: "ab ab ab" -> ab, " ab"; never the cross-word b"b ".
    """
    ranks = train_bpe("ab ab ab", 10)
    assert ranked(ranks)[256:] == [b"ab", b" ab"]


def test_training_is_deterministic(tmp_path):
    """Same corpus -> same merges -> byte-identical saved files."""
    a, b = Tokenizer.train(ENGLISH, 350), Tokenizer.train(ENGLISH, 350)
    a.save(tmp_path / "a.tiktoken")
    b.save(tmp_path / "b.tiktoken")
    assert (tmp_path / "a.tiktoken").read_bytes() == (tmp_path / "b.tiktoken").read_bytes()
    assert (tmp_path / "a.tiktoken.json").read_bytes() == (tmp_path / "b.tiktoken.json").read_bytes()


def test_vocab_layout(tok):
    """vocab_size = 256 bytes + merges + 4 specials; ranks contiguous; specials follow the merges."""
    ranks = tok.enc._mergeable_ranks
    assert tok.vocab_size == 400
    assert sorted(ranks.values()) == list(range(len(ranks))) == list(range(396))
    assert [tok.eot_id, tok.user_id, tok.assistant_id, tok.pad_id] == [396, 397, 398, 399]
    with pytest.raises(ValueError):
        Tokenizer.train(ENGLISH, 259)


def test_tiny_corpus_gives_smaller_vocab():
    """A corpus that runs out of pairs stops early instead of looping or padding ranks."""
    t = Tokenizer.train("ab", vocab_size=1000)
    assert t.vocab_size == 256 + 1 + 4
    assert t.decode(t.encode("ab")) == "ab"


# -----------------------------------------------------------------------------
# pre-tokenisation


def test_pretokenizer_handcrafted_splits():
    """Python regex reproduces GPT-2's split on contractions, numbers, punctuation, space runs."""
    f = gpt2_pretokenizer().findall
    assert f("Hello world's") == ["Hello", " world", "'s"]
    assert f("I'll don't we've") == ["I", "'ll", " don", "'t", " we", "'ve"]
    assert f("x=12345+6.7") == ["x", "=", "12345", "+", "6", ".", "7"]
    assert f("a   b\n\n c  ") == ["a", "  ", " b", "\n\n", " c", "  "]
    assert f("  \tz") == ["  ", "\t", "z"]
    assert f("e\u0301t\u00e9 \u00b2\u2167") == ["e", "\u0301", "t\u00e9", " \u00b2\u2167"]  # marks: not \p{L}


SPLIT_SAMPLES = [
    ENGLISH,
    "  \tz\u3000\u3000x\x1c\x1dy\u200bq",  # ideographic space, U+001C (Python \s, not Unicode), ZWSP
    "日本語のテキスト、句読点。中文123４５６ 한국어 텍스트",
    "emoji 👍🏽 family 👨‍👩‍👧 flags 🇫🇷 ✨!!",
    "Ünïcödé cafe\u0301 naïve ²³ Ⅻ ½ ٣٤ H₂O x²y Ⅻv 5½ — “quotes” 'n' ’s",
    "code: def f(x):\n    return x**2  # note\r\n\r\n\n",
]


@pytest.mark.parametrize("text", SPLIT_SAMPLES)
def test_pretokenizer_matches_tiktoken(text):
    """Our `re` pattern splits exactly where tiktoken's Rust GPT2_PAT splits.

    Trick: tiktoken maps a regex piece found whole in the vocab straight to
    its id. Put each of our pieces, and each run of 2-4 adjacent pieces, in
    the vocab. If tiktoken cuts inside one of our pieces, that piece cannot
    come out as one token; if it merges 2-4 of our pieces, the run comes out
    as one token. Either way the token list differs from our piece list.
    """
    pieces = gpt2_pretokenizer().findall(text)
    assert "".join(pieces) == text
    runs = {"".join(pieces[i:i + k]).encode() for k in range(1, 5) for i in range(len(pieces))}
    vocab = [bytes([b]) for b in range(256)]
    vocab += sorted(runs - set(vocab))
    enc = tiktoken.Encoding(name="split_probe", pat_str=GPT2_PAT,
                            mergeable_ranks={t: i for i, t in enumerate(vocab)}, special_tokens={})
    got = [enc.decode_single_token_bytes(t) for t in enc.encode_ordinary(text)]
    assert got == [p.encode() for p in pieces]


# -----------------------------------------------------------------------------
# encode / decode


def random_unicode(rng, n):
    pools = [(0x20, 0x7E), (0xA0, 0x24F), (0x300, 0x36F), (0x370, 0x3FF), (0x400, 0x4FF),
             (0x600, 0x6FF), (0x900, 0x97F), (0x3040, 0x30FF), (0x4E00, 0x9FFF),
             (0xAC00, 0xD7A3), (0x1F300, 0x1F6FF), (0x1F900, 0x1F9FF)]
    out = []
    for _ in range(n):
        r = rng.random()
        if r < 0.1:
            out.append(rng.choice([" " * rng.randint(1, 5), "\n" * rng.randint(1, 3), "\t", "\r\n",
                                   "\u200d", "\ufe0f", "<|user|>", "'s"]))
        else:
            lo, hi = rng.choice(pools)
            out.append(chr(rng.randint(lo, hi)))
    return "".join(out)


def test_roundtrip_random_unicode(tok):
    """decode(encode(s)) == s for random strings: emoji, CJK, combining marks, whitespace runs."""
    rng = random.Random(0)
    for _ in range(300):
        s = random_unicode(rng, rng.randint(0, 60))
        assert tok.decode(tok.encode(s)) == s
    assert tok.decode(tok.encode(ENGLISH)) == ENGLISH


def test_ordinary_text_never_yields_special_tokens(tok):
    """Literal "<|user|>" etc. in text encode to several ordinary tokens and decode back exactly."""
    specials = {tok.eot_id, tok.user_id, tok.assistant_id, tok.pad_id}
    for s in SPECIAL_TOKENS:
        ids = tok.encode(f"hi {s} there")
        assert not specials & set(ids)
        assert tok.decode(ids) == f"hi {s} there"
        assert len(tok.encode(s)) > 1
    assert not specials & {i for ids in tok.encode_batch(list(SPECIAL_TOKENS)) for i in ids}


def test_special_ids_decode_to_their_names(tok):
    """Special ids decode to their literal names, inside ordinary text too."""
    ids = [tok.user_id] + tok.encode("hello") + [tok.assistant_id, tok.eot_id, tok.pad_id]
    assert tok.decode(ids) == "<|user|>hello<|assistant|><|endoftext|><|pad|>"


def test_decode_accepts_tensor_and_batch_matches_single(tok):
    """decode takes a 1-D tensor; encode_batch equals encode applied one by one."""
    texts = ["the fox", "", "  spaces\n", "naïve café 日本"]
    assert tok.encode_batch(texts) == [tok.encode(t) for t in texts]
    ids = tok.encode(texts[3])
    assert tok.decode(torch.tensor(ids, dtype=torch.long)) == texts[3]


# -----------------------------------------------------------------------------
# save / load


def test_save_load_roundtrip(tok, tmp_path, monkeypatch):
    """load(save(t)) encodes identically; re-save is byte-identical; the file is tiktoken's format."""
    p = tmp_path / "tok.tiktoken"
    tok.save(p)
    t2 = Tokenizer.load(p)
    assert t2.encode(ENGLISH) == tok.encode(ENGLISH)
    assert (t2.vocab_size, t2.eot_id, t2.user_id, t2.assistant_id, t2.pad_id) == \
        (tok.vocab_size, tok.eot_id, tok.user_id, tok.assistant_id, tok.pad_id)
    t2.save(tmp_path / "again.tiktoken")
    assert (tmp_path / "again.tiktoken").read_bytes() == p.read_bytes()
    assert (tmp_path / "again.tiktoken.json").read_bytes() == (tmp_path / "tok.tiktoken.json").read_bytes()
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")  # "" = no caching of our local file
    assert tiktoken.load.load_tiktoken_bpe(str(p)) == tok.enc._mergeable_ranks


# -----------------------------------------------------------------------------
# from_tiktoken


def test_from_tiktoken_fails_fast_and_clearly_without_cache(tmp_path, monkeypatch):
    """No cached gpt2 files -> RuntimeError naming gpt2 and Tokenizer.train, no network wait."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))  # empty cache
    monkeypatch.delitem(tiktoken.registry.ENCODINGS, "gpt2", raising=False)
    t0 = time.time()
    with pytest.raises(RuntimeError, match=r"(?s)'gpt2'.*could not be fetched.*Tokenizer\.train"):
        Tokenizer.from_tiktoken("gpt2")
    assert time.time() - t0 < 5


def test_from_tiktoken_wraps_available_encoding(tok, monkeypatch):
    """A loaded tiktoken encoding is wrapped as-is, with the missing specials appended after it."""
    base = tiktoken.Encoding(name="toy_base", pat_str=GPT2_PAT,
                             mergeable_ranks=tok.enc._mergeable_ranks,
                             special_tokens={"<|endoftext|>": 396})
    monkeypatch.setitem(tiktoken.registry.ENCODINGS, "toy_base", base)
    t = Tokenizer.from_tiktoken("toy_base")
    assert t.eot_id == 396 and [t.user_id, t.assistant_id, t.pad_id] == [397, 398, 399]
    assert t.encode(ENGLISH) == base.encode_ordinary(ENGLISH)
