"""experiments/first_rung.py: the counterfactual utility that credits form only in an answer that attempts the
task, its wiring into the paired win rate, and the experiment end to end on the tiny world."""
import os

from experiments.first_rung import GATED, Config, GatedJudge, attempt_gated, main, rung
from nanorlhf.world.labelers import Labeler


def test_attempt_gated_zeroes_form_exactly_where_the_answer_does_not_attempt_the_task():
    """length_score and constraints become 0 when attempted is 0 and stay as they were when it is 1; every
    other feature is untouched either way."""
    feats = {"attempted": 0.0, "length_score": 0.9, "constraints": 1.0, "true_facts": 2.0, "repetition": 0.1}
    off = attempt_gated(feats)
    assert all(off[k] == 0.0 for k in GATED)
    assert {k: v for k, v in off.items() if k not in GATED} == {k: v for k, v in feats.items() if k not in GATED}
    assert attempt_gated({**feats, "attempted": 1.0}) == {**feats, "attempted": 1.0}


class _StubJudge:
    """Two off-task answers: 'long' of the right length, 'short' of the wrong one; one near-noiseless labeler."""
    FEATS = {"long": {"attempted": 0.0, "length_score": 1.0, "constraints": 1.0},
             "short": {"attempted": 0.0, "length_score": 0.1, "constraints": 1.0}}

    def __init__(self):
        lab = Labeler("L0", {"attempted": 3.0, "length_score": 1.0, "constraints": 1.5}, tau=1e-3)
        self.pool = type("Pool", (), {"heldout": [lab], "gold": lambda self, f: lab.utility(f)})()

    def features(self, row, text):
        return dict(self.FEATS[text])


def test_the_gated_judge_is_what_the_paired_win_rate_reads():
    """Through rung() (the ladder's paired win rate), the world's labelers prefer the off-task answer of the
    right length every time; the gated judge leaves the two equal, so its labeler's noise decides (about half).
    A GatedJudge that did not gate, or a rung() that read the ungated features, would give 1.0 both times."""
    judge, rows = _StubJudge(), [{"category": "generation"}] * 400
    upper, lower = [["long"] * 400], [["short"] * 400]
    assert rung(judge, rows, upper, lower, 0)["rate"] == 1.0
    gated = rung(GatedJudge(judge), rows, upper, lower, 0)["rate"]
    assert 0.4 < gated < 0.6
    assert GatedJudge(judge).gold(rows[0], "long") == GatedJudge(judge).gold(rows[0], "short") == 0.0


def test_first_rung_runs_end_to_end_on_a_tiny_base_model(stages, tmp_path):
    """The experiment on the tiny world's base model: both utilities give a rate in [0, 1] inside its interval,
    gold and attempt shares for both sides, and categories that the prompts have."""
    run_dir = tmp_path / "run"
    os.makedirs(run_dir / "base_tiny")
    os.symlink(os.path.join(stages["out"], "base", "ckpt.pt"), run_dir / "base_tiny" / "ckpt.pt")
    res = main(Config(run_dir=str(run_dir), data_dir=stages["data"], size="tiny", n=8, samples=2,
                      max_new_tokens=16))
    assert len(res) == 2
    for r in res.values():
        w = r["rung"]
        assert 0.0 <= w["lo"] <= w["rate"] <= w["hi"] <= 1.0 and w["n"] == 8 and w["samples"] == 2
        assert set(r) == {"rung", "gpt", "prompted"}
        assert all(0.0 <= r[s]["attempted"] <= 1.0 for s in ("gpt", "prompted"))
