"""Where the tensors live: the one place that turns --device into a torch device name.

Example:
    device = resolve_device("auto")   # "cuda" when torch sees a GPU, else "cpu"
"""
import torch


def resolve_device(name: str) -> str:
    """cpu, cuda[:N], or auto; asking for cuda without a GPU stops with a plain message."""
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("--device=cuda asked for, but torch sees no GPU")
    return name
