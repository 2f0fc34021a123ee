"""Every PNG of the project goes through infra/metrics.py save_figure, which leaves no panel without data, marks
short series, and puts legends below their panels; the stages' curves are titled by stage and size, and the RM's
include its validation accuracy."""
import os
import re

import matplotlib
import matplotlib.figure as mf

from nanorlhf.infra.metrics import MetricsLog, has_data, plot_curves, save_figure

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_has_data_tells_data_from_decoration():
    """Lines, bars, error bars, scatter points and images are data; a reference line or a text alone is not."""
    fig, axes = plt.subplots(1, 7)
    axes[0].axhline(0.5)
    axes[1].text(0.5, 0.5, "no data")
    axes[2].plot([1], [2])
    axes[3].bar(["a"], [1])
    axes[4].errorbar([1], [1], yerr=[0.1])
    axes[5].scatter([1], [1])
    axes[6].imshow([[0, 1]])
    assert [has_data(ax) for ax in axes] == [False, False, True, True, True, True, True]
    plt.close(fig)


def test_save_figure_removes_empty_panels_marks_short_series_and_moves_legends(tmp_path):
    """An empty panel is removed (its title returned), a one-point series gets a marker, a long one none, and a
    legend ends up below its panel and its x label, clear of the data and of the label, in a short figure too."""
    fig, (empty, short, long) = plt.subplots(1, 3, figsize=(9, 2.5))
    empty.set_title("nothing")
    empty.axhline(0.5)
    short.plot([3], [1.0], label="one point")
    short.set_xlabel("KL from SFT (nats)")
    short.legend()
    long.plot(range(50), range(50))
    assert save_figure(fig, tmp_path / "f.png", "title") == ["nothing"]
    assert fig.axes == [short, long] and os.path.getsize(tmp_path / "f.png") > 0
    assert short.lines[0].get_marker() == "o" and long.lines[0].get_marker() in ("None", None, "")
    fig.canvas.draw()
    legend, panel = short.get_legend().get_window_extent(), short.get_window_extent()
    assert legend.y1 < panel.y0  # below the panel: it covers no data
    assert legend.y1 <= short.xaxis.get_label().get_window_extent().y0 + 1  # and below the axis label


def test_every_png_is_saved_by_save_figure():
    """No code outside infra/metrics.py calls savefig, so every figure goes through save_figure."""
    callers = []
    for d, dirs, files in os.walk(ROOT):
        dirs[:] = [x for x in dirs if not x.startswith(".") and x not in ("tests", "out", "data", "__pycache__")]
        for f in files:
            path = os.path.join(d, f)
            if f.endswith(".py") and re.search(r"\.savefig\(", open(path, encoding="utf-8").read()):
                callers.append(os.path.relpath(path, ROOT))
    assert callers == [os.path.join("nanorlhf", "infra", "metrics.py")]


def test_stage_curves_have_data_in_every_panel_and_name_their_stage(stages, tmp_path, monkeypatch):
    """The tiny base, SFT and RM stages' curves, drawn again: every panel saved has data, every series under 20
    points is marked, the title names the stage's folder and size, and the RM's has a validation-accuracy panel."""
    saved = []
    real = mf.Figure.savefig

    def record(fig, *a, **kw):
        saved.append((fig._suptitle.get_text() if fig._suptitle else "", [ax.get_title() for ax in fig.axes],
                      all(has_data(ax) for ax in fig.axes),
                      all(line.get_marker() not in ("None", None, "") for ax in fig.axes for line in ax.lines
                          if len(line.get_xdata()) < 20)))
        return real(fig, *a, **kw)
    monkeypatch.setattr(mf.Figure, "savefig", record)
    for stage, keys in (("base", ["train/loss", "val/loss", "time/mfu"]), ("sft", ["train/loss", "val/loss"]),
                        ("rm", ["rm/loss", "rm/accuracy", "val/accuracy", "never/logged"])):
        rows = MetricsLog(os.path.join(stages["out"], stage, "metrics.jsonl")).read()
        plot_curves(rows, keys, tmp_path / f"{stage}.png", title=f"{stage}: {stage}, 1 parameters")
    assert all(ok and marked for _, _, ok, marked in saved) and len(saved) == 3
    assert saved[2][1] == ["rm/loss", "rm/accuracy", "val/accuracy"]
    rm = MetricsLog(os.path.join(stages["out"], "rm", "metrics.jsonl")).read()
    assert len([r for r in rm if "val/accuracy" in r]) == 6 and len([r for r in rm if "rm/loss" in r]) >= 10
    assert os.path.exists(os.path.join(stages["out"], "rm", "curves.png"))
