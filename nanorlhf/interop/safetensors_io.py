"""safetensors, the format Hugging Face loads weights from, written and read with the standard library and torch.

A file is an 8-byte little-endian header length, a JSON header {name: {dtype, shape, data_offsets}} (and
"__metadata__"), padded with spaces to 8 bytes, then each tensor's raw bytes in order.

Example:
    blob = safetensors_bytes({"w": torch.ones(2, 3)}, {"format": "pt"})
    open("model.safetensors", "wb").write(blob); read_safetensors("model.safetensors")["w"].shape   # (2, 3)
"""
from __future__ import annotations

import json
import struct

import torch

SAFETENSORS_DTYPES = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16", torch.float64: "F64",
                      torch.int64: "I64", torch.int32: "I32", torch.bool: "BOOL"}


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
