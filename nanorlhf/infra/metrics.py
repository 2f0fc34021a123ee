"""Logging a small fixed set of metrics: a JSONL file, progress lines with ETA, curves, and how every figure is saved.

Example:
    log = MetricsLog("out/run/metrics.jsonl")
    log.write(step=10, **{"train/loss": 2.3})
    bar = Progress(total=100, what="pretrain")
    if bar.due(10):                 # about ten lines a loop, whatever its length
        print(bar.line(10, loss=2.3))   # pretrain   10/100 ( 10%) loss 2.3000 | 1.2s elapsed, ETA 10.8s
"""
from __future__ import annotations

import json
import math
import os
import time

import torch


class MetricsLog:
    """Append one JSON object per logged step to out_dir/metrics.jsonl."""

    def __init__(self, path, fresh: bool = False, keep_until: int | None = None):
        """fresh: start empty; keep_until: a resumed run drops the rows logged after its checkpoint's step, so
        the steps it redoes are not logged twice."""
        self.path = os.fspath(path)
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        if fresh and os.path.exists(self.path):
            os.remove(self.path)
        elif keep_until is not None and os.path.exists(self.path):
            from nanorlhf.infra.fileio import write_text
            kept = [r for r in self.read() if r["step"] <= keep_until]
            write_text(self.path, "".join(json.dumps(r) + "\n" for r in kept))

    def write(self, step: int, **values) -> None:
        row = {"step": step}
        for k, v in values.items():
            v = float(v) if isinstance(v, (int, float, torch.Tensor)) else v
            row[k] = None if isinstance(v, float) and not math.isfinite(v) else v
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")

    def read(self) -> list[dict]:
        """Every row logged; a torn last line (a kill mid-write) is dropped with a warning, a broken line before it
        is a DataError naming the line."""
        if not os.path.exists(self.path):
            return []
        from nanorlhf.infra.jsonl import Field, read_jsonl
        return read_jsonl(self.path, (Field("step", int),), unique_key=None, allow_torn_tail=True)


def fmt_seconds(s: float) -> str:
    if s < 60:
        return f"{s:.1f}s"
    if s < 3600:
        return f"{int(s // 60)}m{int(s % 60):02d}s"
    return f"{int(s // 3600)}h{int(s % 3600 // 60):02d}m"


class Progress:
    """A progress line with elapsed time and ETA for long loops."""

    def __init__(self, total: int, what: str = "", start_step: int = 0):
        self.total, self.what, self.start_step = total, what, start_step
        self.t0, self.shown, self.printed = time.time(), None, 0

    def due(self, step: int, lines: int = 10) -> bool:
        """Whether to print at this step: the first step past each further 1/lines of the loop, and the last, so
        a loop prints about `lines` lines however often it asks (`printed` counts them)."""
        part = lines * step // max(self.total, 1)
        if self.shown is None:
            self.shown = lines * self.start_step // max(self.total, 1)
        if part > self.shown or step >= self.total:
            self.shown, self.printed = max(part, self.shown), self.printed + 1
            return True
        return False

    def line(self, step: int, **values) -> str:
        elapsed = time.time() - self.t0
        done = max(step - self.start_step, 1e-9)
        eta = elapsed / done * max(self.total - step, 0)
        pct = 100.0 * step / max(self.total, 1)
        vals = " ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in values.items())
        return (f"{self.what} {step:>6}/{self.total} ({pct:3.0f}%) {vals} | "
                f"{fmt_seconds(elapsed)} elapsed, ETA {fmt_seconds(eta)}")


def measure_matmul_peak(device: str = "cpu", n: int = 1024, reps: int = 10, dtype: str = "float32") -> float:
    """Measured matmul FLOP/s of this device in `dtype` (float32 or bfloat16): the denominator of MFU.

    A run under bfloat16 autocast is measured against the bfloat16 peak, one in float32 against
    the float32 one; on a CPU without fast bfloat16 the two peaks come out close.
    """
    g = torch.Generator().manual_seed(0)  # its own RNG: measuring must not shift a run's random stream
    dt = {"float32": torch.float32, "bfloat16": torch.bfloat16}[dtype]
    a = torch.randn(n, n, generator=g).to(device=device, dtype=dt)
    b = torch.randn(n, n, generator=g).to(device=device, dtype=dt)
    for _ in range(3):
        a @ b
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)
    t = time.perf_counter()
    for _ in range(reps):
        a @ b
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)
    return 2 * n ** 3 * reps / (time.perf_counter() - t)


AXIS_LABELS = {
    "train/loss": "training loss (nats/token)", "val/loss": "validation loss (nats/token)",
    "time/mfu": "MFU (share of the dtype's matmul peak)", "rm/loss": "ranking loss (eq. 1)",
    "rm/accuracy": "pairwise accuracy (batch)", "objective/score": "RM score r(x, y)",
    "objective/kl": "KL to the SFT model (nats)", "ppo/clipfrac": "clipped share of ratios",
    "ppo/approx_kl": "approx. KL per step (nats)", "val/explained_var": "value: explained variance",
    "response/length": "response length (tokens)", "ptx/loss": "pretraining loss (nats/token)",
    "dpo/loss": "DPO loss", "dpo/margin": "implicit reward margin", "dpo/accuracy": "implicit reward accuracy",
    "val/accuracy": "pairwise accuracy (validation)",
}


SHORT = 20
"""a series of fewer points than this gets markers (one point alone would not show)"""


def has_data(ax) -> bool:
    """Whether a panel shows data: a line with a point, a filled collection, a bar or an image, drawn in data
    coordinates (a reference line such as axhline does not count)."""
    data = ax.transData
    return (any(len(line.get_xdata()) and line.get_transform() is data for line in ax.lines)
            or any((c.get_transform() is data or c.get_offset_transform() is data)
                   and (len(c.get_offsets()) or len(c.get_paths())) for c in ax.collections)
            or any(p.get_data_transform() is data for p in ax.patches) or bool(ax.images))


def save_figure(fig, path, title: str | None = None) -> list[str]:
    """Save a figure the way every PNG of the project is saved: a panel without data is removed, a short series
    gets markers, each legend moves below its panel (off the data), then tight layout. Returns the titles of
    the panels removed."""
    import matplotlib.pyplot as plt
    removed = []
    for ax in list(fig.axes):
        if not has_data(ax):
            removed.append(ax.get_title())
            fig.delaxes(ax)
            continue
        for line in ax.lines:
            if line.get_transform() is ax.transData and len(line.get_xdata()) < SHORT and line.get_marker() in (
                    "None", None, "", " "):
                line.set_marker("o")
                line.set_markersize(4)
    legends = [(ax, ax.get_legend_handles_labels()) for ax in fig.axes if ax.get_legend() is not None]
    for ax, _ in legends:
        ax.get_legend().remove()
    if title is not None:
        fig.suptitle(title)
    fig.tight_layout()
    renderer = fig.canvas.get_renderer()
    for ax, (handles, labels) in legends:      # just below the panel's x axis and its label, whatever the height
        below = ax.transAxes.inverted().transform((0, ax.xaxis.get_tightbbox(renderer).y0))[1]
        ax.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, below), ncol=min(3, len(labels)),
                  fontsize=7, frameon=False)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return removed


def stage_title(kind: str, out_dir: str, n_params: int) -> str:
    """A training stage's figure title: what it trains, its folder (the pipeline names it by size) and its size."""
    return f"{kind}: {os.path.basename(os.path.normpath(out_dir))}, {n_params:,} parameters"


def plot_curves(rows: list[dict], keys: list[str], path, title: str = "", xlabel: str = "step") -> None:
    """One PNG with a panel per metric name against step, three panels a row, each y axis labelled (save_figure:
    metrics never logged leave no panel, short series get markers)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    keys = [k for k in keys if any(r.get(k) is not None for r in rows)]
    if not keys:
        return
    ncols = min(3, len(keys))
    nrows = (len(keys) + ncols - 1) // ncols
    fig, axes = plt.subplots(nrows, ncols, figsize=(4 * ncols, 3 * nrows), squeeze=False)
    for ax, k in zip(axes.flat, keys):
        pts = [(r["step"], r[k]) for r in rows if r.get(k) is not None]
        ax.plot([p[0] for p in pts], [p[1] for p in pts])
        ax.set_title(k)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(AXIS_LABELS.get(k, k))
    save_figure(fig, path, title)
