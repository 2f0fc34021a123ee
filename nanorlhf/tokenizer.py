"""Byte-level BPE tokenizer: trained here in Python, served by tiktoken.

GPT-2 (Radford et al. 2019, §2.2) splits text with a regex into "words", then
learns byte-pair merges inside each word. We do the same, at toy scale:

    train_bpe(text, n_merges)  -> {token_bytes: rank}   (the pure algorithm)
    Tokenizer.train(text, vocab_size)                   (ranks + special tokens)

and hand the ranks to `tiktoken.Encoding`, whose Rust core encodes fast.
Ranks 0..255 are the single bytes, merges get 256.. in the order learned, and
the four special tokens come right after the merges.

Example:
    >>> tok = Tokenizer.train("low lower lowest " * 50, vocab_size=270)
    >>> ids = tok.encode("lowest <|user|>")
    >>> tok.decode(ids)
    'lowest <|user|>'
    >>> tok.user_id in ids                 # ordinary text never yields specials
    False
    >>> tok.decode([tok.user_id])
    '<|user|>'
"""
from __future__ import annotations

import base64
import functools
import heapq
import json
import re
import sys
import time
import unicodedata
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import tiktoken
import tiktoken.load

from nanorlhf.infra.fileio import atomic_write, write_text
from nanorlhf.infra.schemas import DataError

# GPT-2's pre-tokeniser, in the Rust (fancy-regex) syntax tiktoken compiles.
GPT2_PAT = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
SPECIAL_TOKENS = ("<|endoftext|>", "<|user|>", "<|assistant|>", "<|pad|>")

# Unicode White_Space, which is what Rust's \s means. Python's \s differs: it
# also matches U+001C..U+001F, so we spell the class out.
_WHITESPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"


def _char_class(pred) -> str:
    """A regex class body listing every code point whose category passes pred."""
    parts, start = [], None
    for cp in range(sys.maxunicode + 2):
        ok = cp <= sys.maxunicode and pred(unicodedata.category(chr(cp)))
        if ok and start is None:
            start = cp
        elif not ok and start is not None:
            parts.append(f"\\U{start:08x}" + (f"-\\U{cp - 1:08x}" if cp - 1 > start else ""))
            start = None
    return "".join(parts)


@functools.lru_cache(maxsize=1)
def gpt2_pretokenizer() -> re.Pattern:
    """GPT2_PAT rebuilt for Python's `re` (which has no \\p{L}); same splits.

    \\p{L} and \\p{N} are Unicode general categories L* and N*, enumerated from
    `unicodedata` (built once, ~0.5 s). `(?!\\S)` becomes `(?![^<white>])`.

    Example:
        >>> gpt2_pretokenizer().findall("Hello world's 42  x\\n")
        ['Hello', ' world', "'s", ' 42', ' ', ' x', '\\n']
    """
    L = _char_class(lambda c: c[0] == "L")
    N = _char_class(lambda c: c[0] == "N")
    S = _WHITESPACE
    return re.compile(
        rf"'s|'t|'re|'ve|'m|'ll|'d| ?[{L}]+| ?[{N}]+| ?[^{S}{L}{N}]+|[{S}]+(?![^{S}])|[{S}]+"
    )


# -----------------------------------------------------------------------------
# training: incremental pair counts + a lazy max-heap


def _pairs(word: list[int]) -> Counter:
    return Counter(zip(word, word[1:]))


def _merge_word(word: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    """Replace each non-overlapping occurrence of pair, left to right.

    Example:
        >>> _merge_word([1, 2, 3, 1, 2], (1, 2), 256)
        [256, 3, 256]
        >>> _merge_word([5, 5, 5], (5, 5), 256)      # left to right: no overlap
        [256, 5]
    """
    # BEGIN ASSIGNMENT bpe_merge
    out, i = [], 0
    while i < len(word):
        if i + 1 < len(word) and word[i] == pair[0] and word[i + 1] == pair[1]:
            out.append(new_id)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return out
    # END ASSIGNMENT bpe_merge


def train_bpe(text: str, n_merges: int, verbose: bool = False) -> dict[bytes, int]:
    """Learn up to n_merges byte-pair merges; return tiktoken's {bytes: rank}.

    Each step merges the most frequent adjacent pair (ties: smallest
    (left_id, right_id)), counted over unique pre-tokenised words x frequency.
    Only words holding the chosen pair are touched: a pair->count dict, a
    pair->word-ids index, and a max-heap whose stale entries are fixed when
    popped (lazy deletion). If a merge yields bytes already in the vocab, the
    existing id is reused, so every rank has distinct bytes (tiktoken needs it).
    Stops early if the corpus runs out of pairs.

    Example:
        >>> r = train_bpe("aaabdaaabac", 3)
        >>> [t for t, i in sorted(r.items(), key=lambda kv: kv[1])][256:]
        [b'aa', b'ab', b'aaab']
    """
    t0 = time.time()
    freqs = Counter(gpt2_pretokenizer().findall(text))
    words = [list(w.encode("utf-8")) for w in freqs]
    counts = list(freqs.values())
    vocab = [bytes([b]) for b in range(256)]  # id -> bytes
    ids = {b: i for i, b in enumerate(vocab)}  # bytes -> id
    pair_count: dict[tuple[int, int], int] = {}
    where: dict[tuple[int, int], set[int]] = {}
    for wi, (w, f) in enumerate(zip(words, counts)):
        for p, n in _pairs(w).items():
            pair_count[p] = pair_count.get(p, 0) + n * f
            where.setdefault(p, set()).add(wi)
    heap = [(-c, p) for p, c in pair_count.items()]
    heapq.heapify(heap)
    if verbose:
        print(f"bpe: {len(words):,} unique words, {len(pair_count):,} pairs ({time.time() - t0:.1f}s)")

    n_done, every = 0, max(1, n_merges // 10)
    while n_done < n_merges and heap:
        neg, pair = heapq.heappop(heap)
        count = pair_count.get(pair, 0)
        if count < 1:
            continue  # merged away or gone
        if count != -neg:  # stale: counts only drop, so re-file it lower
            heapq.heappush(heap, (-count, pair))
            continue
        merged = vocab[pair[0]] + vocab[pair[1]]
        new_id = ids.get(merged)
        if new_id is None:
            new_id, n_done = len(vocab), n_done + 1
            ids[merged] = new_id
            vocab.append(merged)
        grown = set()
        for wi in sorted(where.pop(pair)):  # sorted: deterministic order
            old = words[wi]
            new = _merge_word(old, pair, new_id)
            words[wi] = new
            before, after = _pairs(old), _pairs(new)
            for p, n in before.items():
                pair_count[p] -= n * counts[wi]
                if p not in after and p != pair:
                    where[p].discard(wi)
            for p, n in after.items():
                pair_count[p] = pair_count.get(p, 0) + n * counts[wi]
                where.setdefault(p, set()).add(wi)
                if n > before.get(p, 0):
                    grown.add(p)
        pair_count.pop(pair, None)
        for p in sorted(grown):
            heapq.heappush(heap, (-pair_count[p], p))
        if verbose and n_done % every == 0 and new_id == len(vocab) - 1:
            print(f"bpe: merge {n_done}/{n_merges} {merged!r} x{count} ({time.time() - t0:.1f}s)")
    if verbose:
        print(f"bpe: done, {n_done} merges ({time.time() - t0:.1f}s)")
    return ids


# -----------------------------------------------------------------------------
# the tokenizer: tiktoken.Encoding + our special tokens


class Tokenizer:
    """A tiktoken.Encoding with <|endoftext|>, <|user|>, <|assistant|>, <|pad|>.

    Example:
        >>> tok = Tokenizer.train("hello hello world", vocab_size=262)
        >>> tok.vocab_size, tok.eot_id, tok.pad_id
        (262, 258, 261)
    """

    def __init__(self, enc: tiktoken.Encoding):
        missing = [s for s in SPECIAL_TOKENS if s not in enc._special_tokens]
        assert not missing, f"encoding {enc.name} lacks special tokens {missing}"
        self.enc = enc
        self.eot_id, self.user_id, self.assistant_id, self.pad_id = (
            enc._special_tokens[s] for s in SPECIAL_TOKENS
        )

    @classmethod
    def _build(cls, name: str, pat_str: str, ranks: dict[bytes, int], specials: dict[str, int]):
        return cls(tiktoken.Encoding(name=name, pat_str=pat_str, mergeable_ranks=ranks,
                                     special_tokens=specials))

    @classmethod
    def train(cls, text: str, vocab_size: int, verbose: bool = False) -> "Tokenizer":
        """Train BPE so that 256 bytes + merges + 4 specials = vocab_size.

        A corpus too small to supply the merges gives a smaller vocab.
        """
        n_merges = vocab_size - 256 - len(SPECIAL_TOKENS)
        if n_merges < 0:
            raise ValueError(f"vocab_size must be >= {256 + len(SPECIAL_TOKENS)}, got {vocab_size}")
        ranks = train_bpe(text, n_merges, verbose=verbose)
        specials = {s: len(ranks) + i for i, s in enumerate(SPECIAL_TOKENS)}
        return cls._build(f"nanorlhf_bpe{len(ranks) + len(specials)}", GPT2_PAT, ranks, specials)

    @classmethod
    def from_tiktoken(cls, name: str) -> "Tokenizer":
        """Wrap a named tiktoken encoding (e.g. "gpt2") if its files are cached.

        Missing specials are appended after its largest id. We never go to the
        network: tiktoken's downloader is swapped for one that fails at once,
        so a machine without the cache gets a RuntimeError, not a long hang.
        """
        def offline(blobpath: str) -> bytes:
            if "://" in blobpath:
                raise ConnectionError(f"not fetching {blobpath} (offline)")
            return _real_read_file(blobpath)

        _real_read_file = tiktoken.load.read_file
        try:
            with mock.patch.object(tiktoken.load, "read_file", offline):
                base = tiktoken.get_encoding(name)
        except ConnectionError as e:
            raise RuntimeError(
                f"tiktoken encoding {name!r} is not in the local cache and its files could not be "
                f"fetched ({e}). Set TIKTOKEN_CACHE_DIR to a cache that has them, or train a BPE "
                f"on your corpus with Tokenizer.train(text, vocab_size)."
            ) from None
        specials = dict(base._special_tokens)
        for s in SPECIAL_TOKENS:
            specials.setdefault(s, max([base.max_token_value, *specials.values()]) + 1)
        return cls._build(f"{base.name}_nanorlhf", base._pat_str, base._mergeable_ranks, specials)

    # -- file format: <path> is a .tiktoken file (one `base64(bytes) rank` per
    # line, readable by tiktoken.load.load_tiktoken_bpe); <path>.json holds
    # the name, pat_str and special tokens, which that format has no room for.
    # Checkpoints hold the same as one dict (to_dict), so they travel without the file.

    def to_dict(self) -> dict:
        """The whole tokenizer as strings and ints: name, pat_str, special_tokens, and ranks in the .tiktoken text."""
        ranks = sorted(self.enc._mergeable_ranks.items(), key=lambda kv: kv[1])
        return {"name": self.enc.name, "pat_str": self.enc._pat_str,
                "special_tokens": dict(sorted(self.enc._special_tokens.items(), key=lambda kv: kv[1])),
                "ranks": "".join(f"{base64.b64encode(t).decode()} {r}\n" for t, r in ranks)}

    @classmethod
    def from_dict(cls, d: dict) -> "Tokenizer":
        ranks = {}
        for line in d["ranks"].splitlines():
            if line:
                token, rank = line.split()
                ranks[base64.b64decode(token, validate=True)] = int(rank)
        return cls._build(d["name"], d["pat_str"], ranks, d["special_tokens"])

    def save(self, path) -> None:
        d = self.to_dict()
        atomic_write(path, lambda f: f.write(d.pop("ranks").encode()))
        write_text(str(path) + ".json", json.dumps(d, indent=1) + "\n")

    @classmethod
    def load(cls, path) -> "Tokenizer":
        # Parsed here, not with load_tiktoken_bpe: that caches local files too,
        # keyed by path, and would hand back stale ranks after a re-save.
        path = Path(path)
        try:
            meta = json.loads(Path(str(path) + ".json").read_text(encoding="utf-8"))
            return cls.from_dict({**meta, "ranks": path.read_text(encoding="ascii")})
        except (ValueError, KeyError, TypeError) as e:  # a damaged or foreign file: say which, in one line
            raise DataError(f"{path} is not a tokenizer file of this project ({type(e).__name__}: {e})") from None

    # -- encode / decode

    @property
    def vocab_size(self) -> int:
        return self.enc.n_vocab

    def encode(self, text: str) -> list[int]:
        """Ordinary text only: "<|user|>" in text becomes ordinary tokens."""
        return self.enc.encode_ordinary(text)

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return self.enc.encode_ordinary_batch(texts)

    def decode(self, ids) -> str:
        """list[int] or 1-D tensor -> str; special ids decode to their names."""
        if hasattr(ids, "tolist"):
            ids = ids.tolist()
        return self.enc.decode(list(ids))


# -----------------------------------------------------------------------------
# benchmark: python -m nanorlhf.tokenizer --bench


def make_corpus(n_bytes: int = 5_000_000, n_made_up: int = 20_000, seed: int = 0) -> str:
    """English-like text: real words + made-up words drawn Zipf-style."""
    import random

    rng = random.Random(seed)
    real = ("the of and to in is was he for it with as his on be at by had are but from or "
            "she an they which you one were her all their there been has when who will more "
            "no if out so said what up its about into than them can only other new some could "
            "time these two may then do first any my now such like our over man me even most "
            "made after also did many before must through back years where much your way well").split()
    syl = [c + v for c in "bcdfghjklmnprstvwyz" for v in "aeiou"] + ["str", "ght", "ing", "qu"]
    made = ["".join(rng.choice(syl) for _ in range(rng.randint(1, 4))) for _ in range(n_made_up)]
    vocab = real + made
    cum, acc = [], 0.0
    for r in range(len(vocab)):  # Zipf-ish: p(rank r) ~ 1 / (r + 10)
        acc += 1.0 / (r + 10)
        cum.append(acc)
    out, size = [], 0
    while size < n_bytes:
        words = rng.choices(vocab, cum_weights=cum, k=rng.randint(5, 20))
        words[0] = words[0].capitalize()
        if rng.random() < 0.2:
            words.insert(rng.randrange(len(words)), str(rng.randint(0, 2024)))
        s = " ".join(words) + rng.choice([".", ".", "?", "!", ",", ";"]) + rng.choice([" ", " ", "\n"])
        out.append(s)
        size += len(s)
    return "".join(out)[:n_bytes]


def bench(vocab_size: int = 2048) -> None:
    """Time Tokenizer.train on 5 MB of make_corpus() text (pre-tokenising included)."""
    text = make_corpus()
    n_unique = len(set(gpt2_pretokenizer().findall(text)))
    print(f"corpus: {len(text.encode()) / 1e6:.1f} MB, {n_unique:,} unique words")
    t0 = time.time()
    tok = Tokenizer.train(text, vocab_size, verbose=True)
    dt = time.time() - t0
    ids = tok.encode(text[:100_000])
    print(f"trained {tok.vocab_size} tokens in {dt:.1f}s; {100_000 / len(ids):.2f} chars/token")


@dataclass
class BenchConfig:
    bench: bool = False
    """time the BPE training on 5 MB of English-like text (python -m nanorlhf.tokenizer --bench)"""
    vocab_size: int = 2048
    """the vocabulary size to train"""


def main(cfg: BenchConfig) -> None:
    if not cfg.bench:
        raise SystemExit("nothing to do: --bench times the BPE training (--help lists the flags)")
    bench(cfg.vocab_size)


if __name__ == "__main__":
    from nanorlhf.infra.cli import run
    run(main, BenchConfig, __doc__)
