"""Next-token-prediction data: documents -> one token stream -> (B, T) batches.

Each document is encoded and closed with <|endoftext|>, as GPT-2 did. Batches
are non-overlapping windows of the stream, visited in a seeded random order per
epoch; the position in that order (epoch, index) is the "data position" a
checkpoint stores, so a resumed run sees exactly the batches it would have seen.

Example:
    stream = encode_docs(tok, ["Encyclopedia: Pip is a fox.", "Story: ..."])
    batches = LMBatches(stream, block_size=128, batch_size=16, seed=0)
    x, y = batches.next()        # (16, 128) each; y is x shifted left by one
"""
from __future__ import annotations

import os

import torch

from nanorlhf.infra.schemas import DataError


def read_corpus(path) -> list[str]:
    """Documents of a corpus: a .jsonl of {"text": ...} rows, or a .txt split at blank lines."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"corpus not found: {path}")
    if path.endswith(".jsonl"):
        from nanorlhf.infra.jsonl import CORPUS, read_jsonl
        return [row["text"] for row in read_jsonl(path, CORPUS)]
    with open(path, encoding="utf-8") as f:
        docs = [d.strip() for d in f.read().split("\n\n")]
    docs = [d for d in docs if d]
    if not docs:
        raise ValueError(f"corpus {path} holds no text")
    return docs


def split_docs(docs: list[str], val_every: int = 20) -> tuple[list[str], list[str]]:
    """Every val_every-th document goes to validation (deterministic, no RNG)."""
    train = [d for i, d in enumerate(docs) if i % val_every != val_every - 1]
    val = [d for i, d in enumerate(docs) if i % val_every == val_every - 1]
    return train, val or docs[-1:]


def encode_docs(tok, docs: list[str]) -> torch.Tensor:
    """(N,) long: the documents' tokens, each followed by <|endoftext|>."""
    ids: list[int] = []
    for d in tok.encode_batch(docs):
        ids.extend(d)
        ids.append(tok.eot_id)
    return torch.tensor(ids, dtype=torch.long)


class LMBatches:
    """Seeded, resumable iterator of (x, y) batches over a token stream."""

    def __init__(self, stream: torch.Tensor, block_size: int, batch_size: int, seed: int = 0):
        if len(stream) < 2 * block_size + 2:  # every epoch's random shift must leave a whole block
            raise DataError(f"a token stream of {len(stream)} tokens is shorter than two blocks "
                            f"({2 * block_size + 2}); use a smaller --block_size or more text")
        self.stream, self.T, self.B, self.seed = stream, block_size, batch_size, seed
        self.epoch, self.index = 0, 0
        self._order = self._make_order()

    def _make_order(self) -> torch.Tensor:
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
        shift = int(torch.randint(0, self.T, (1,), generator=g))  # new window edges each epoch
        starts = torch.arange(shift, len(self.stream) - self.T - 1, self.T)
        return starts[torch.randperm(len(starts), generator=g)]

    def next(self) -> tuple[torch.Tensor, torch.Tensor]:
        rows = []
        for _ in range(self.B):
            if self.index >= len(self._order):
                self.epoch, self.index = self.epoch + 1, 0
                self._order = self._make_order()
            s = int(self._order[self.index])
            self.index += 1
            rows.append(self.stream[s:s + self.T + 1])
        chunk = torch.stack(rows)                   # (B, T+1)
        return chunk[:, :-1], chunk[:, 1:]          # (B, T), (B, T)

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "index": self.index}

    def load_state_dict(self, s: dict) -> None:
        self.epoch, self.index = int(s["epoch"]), int(s["index"])
        self._order = self._make_order()

    @property
    def tokens_per_epoch(self) -> int:
        return len(self._order) * self.T


def eval_batches(stream: torch.Tensor, block_size: int, batch_size: int, max_batches: int):
    """Fixed, ordered validation batches (the same every call)."""
    starts = torch.arange(0, len(stream) - block_size - 1, block_size)[: batch_size * max_batches]
    for i in range(0, len(starts), batch_size):
        rows = torch.stack([stream[s:s + block_size + 1] for s in starts[i:i + batch_size]])
        yield rows[:, :-1], rows[:, 1:]
