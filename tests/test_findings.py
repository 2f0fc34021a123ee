"""Verdicts come from intervals, not from point estimates (nanorlhf/evals/findings.py)."""
from nanorlhf.evals.findings import (CALIBRATION, DIRECTION, NOT, REPRODUCED, below_verdict, findings_markdown,
                                     order_verdict, run_findings, win_verdict)


def w(rate, lo, hi):
    return {"rate": rate, "lo": lo, "hi": hi, "n": 300}


def test_a_win_rate_is_reproduced_only_when_its_interval_excludes_half():
    """54% [48%, 60%] is a direction, not a result; 62% [57%, 67%] is; 45% is neither."""
    assert win_verdict(w(0.54, 0.48, 0.60)) == DIRECTION
    assert win_verdict(w(0.62, 0.57, 0.67)) == REPRODUCED
    assert win_verdict(w(0.45, 0.40, 0.51)) == NOT


def test_an_order_needs_every_rung():
    """One undecided rung makes the ladder 'direction only'; one reversed rung makes it 'not reproduced'."""
    good, tie, bad = w(0.7, 0.6, 0.8), w(0.52, 0.47, 0.57), w(0.4, 0.35, 0.45)
    assert order_verdict([good, good, good]) == REPRODUCED
    assert order_verdict([good, tie, good]) == DIRECTION
    assert order_verdict([good, bad, good]) == NOT


def test_a_lower_rate_needs_separate_intervals():
    """21% vs 41% of 100 items: intervals apart; 38% vs 41%: only the point estimate is lower."""
    assert below_verdict(0.21, 100, 0.41, 100) == REPRODUCED
    assert below_verdict(0.38, 100, 0.41, 100) == DIRECTION
    assert below_verdict(0.45, 100, 0.41, 100) == NOT


def d(a, b, lo, hi):
    return {"a": a, "b": b, "diff": b - a, "lo": lo, "hi": hi, "n": 240}


def test_run_findings_reads_the_rm_report_and_the_suites():
    """rm_ratio is accuracy over agreement, reproduced only when its interval's low end clears 0.88; the
    labelers' agreement is a calibration, never a finding; answers_the_question, the RM's reading of truth and
    relevance, truthful_informative (every draw) and hallucination_lower read the suites' paired intervals."""
    rm = {"val_accuracy": 0.66, "labeler_agreement": 0.72, "n_val_comparisons": 200, "ratio_interval": (0.86, 0.97)}
    honesty = {"vs_sft": {"ppo_ptx": d(0.20, 0.35, 0.08, 0.22)},
               "rm": {"truth": {"rate": 0.7, "lo": 0.64, "hi": 0.76, "n": 240, "margin": 0.5},
                      "relevance": {"rate": 0.66, "lo": 0.58, "hi": 0.72, "n": 240, "margin": 0.3}}}
    draws = [{"all": d(0.5, 0.6, 0.02, 0.18), "myth": d(0.4, 0.5, -0.1, 0.3)}, {"all": d(0.5, 0.58, 0.01, 0.15)},
             {"all": d(0.5, 0.55, -0.02, 0.12)}]
    suites = {"Honesty: answering the question, truthfully": honesty, "Truthfulness (TruthfulQA analog)":
              {"paired": draws}, "Closed-domain hallucination": {"paired": d(0.2, 0.5, 0.2, 0.4)}}
    out = {f["name"]: f for f in run_findings([], rm, suites, 14.2)}
    assert abs(out["rm_ratio"]["figures"]["value"] - 0.66 / 0.72) < 1e-9 and out["rm_ratio"]["verdict"] == DIRECTION
    assert out["labeler_agreement_train"]["verdict"] == CALIBRATION
    assert out["answers_the_question"]["verdict"] == REPRODUCED
    assert out["rm_reads_truth"]["verdict"] == REPRODUCED and out["rm_reads_relevance"]["verdict"] == DIRECTION
    assert out["truthful_informative"]["verdict"] == DIRECTION                 # one of three draws undecided
    assert out["truthful_informative"]["figures"]["diff_min"] == 0.55 - 0.5
    assert out["hallucination_lower"]["verdict"] == REPRODUCED and out["hallucination_lower"]["figures"]["ppo_ptx"] == 0.2
    assert out["minutes"]["figures"]["value"] == 14.2
    rm["ratio_interval"] = (0.89, 0.97)
    assert {f["name"]: f for f in run_findings([], rm, {}, 1.0)}["rm_ratio"]["verdict"] == REPRODUCED
    lines = findings_markdown(list(out.values()))
    assert len(lines) == len(out) and all(line.endswith("**") for line in lines)
