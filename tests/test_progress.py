"""What a run prints while it runs: about ten progress lines a loop however often it asks, and "stage k of N" with
an overall ETA that follows the run's pace, lanes side by side sharing one stretch of the timeline."""
import pytest

from nanorlhf.infra import stages
from nanorlhf.infra.metrics import Progress
from nanorlhf.infra.stages import Plan


@pytest.mark.parametrize("total, every", [(1000, 1), (1500, 50), (60, 5), (7, 1), (3, 1)])
def test_progress_prints_about_ten_lines_and_the_last(total, every):
    """Asked every `every` steps, a loop of `total` prints at most 11 lines, the last step among them, and never
    two lines within one tenth of the loop."""
    bar = Progress(total)
    shown = [s for s in range(every, total + 1, every) if bar.due(s)] + [total] * (total % every != 0)
    assert shown[-1] == total and len(shown) <= 11 and bar.printed == len(shown) - (total % every != 0)
    assert len({10 * s // total for s in shown}) == len(shown)


def test_a_resumed_loop_counts_its_tenths_from_where_it_resumed():
    bar = Progress(100, start_step=55)
    assert not bar.due(58) and bar.due(60) and bar.due(100)


def test_plan_numbers_stages_and_lanes_share_a_stretch(monkeypatch):
    """Stages are numbered in plan order; two lanes side by side take as long as the longer; a stage's ETA is the
    time left on the timeline at this run's pace (elapsed per expected second of the stages that ran), reused
    stages leaving the pace out of it."""
    plan = Plan().then("a", 10).then("b", 30).side_by_side([[("c", 20)], [("d", 10), ("e", 10)]]).then("f", 40)
    assert plan.number == {"a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "f": 6} and plan.total == 100
    assert (plan.start["c"], plan.start["d"], plan.start["e"], plan.start["f"]) == (40, 40, 50, 60)
    plan.t0 = 1000.0
    monkeypatch.setattr(stages.time, "time", lambda: 1005.0)  # 5 s for the 10 expected seconds of stage a: x0.5
    assert plan.line("b") == "stage 2 of 6: b | 5.0s elapsed, ETA 45.0s"
    assert plan.line("a").endswith("ETA after this stage")
    plan.reused = 10.0  # stage a was reused: nothing has run yet to set the pace
    assert plan.line("b").endswith("ETA after this stage")
    assert plan.line("e") == "stage 5 of 6: e | 5.0s elapsed, ETA 6.2s"  # 5 s for 40 expected, 50 left
