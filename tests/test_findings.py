"""Verdicts come from intervals, not from point estimates (nanorlhf/evals/findings.py)."""
from nanorlhf.evals.findings import (DIRECTION, NOT, REPRODUCED, below_verdict, order_verdict, run_findings,
                                     win_verdict)


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


def test_run_findings_reads_the_rm_report_and_truthfulness():
    """rm_ratio is accuracy over agreement; an agreement 6 points off the paper's 72.6% is not reproduced;
    truthful_informative compares PPO-ptx with GPT prompted (the paper's QA-prompt baseline) on the same items."""
    rm = {"val_accuracy": 0.60, "labeler_agreement": 0.786, "n_val_comparisons": 200}
    truth = {"ppo_ptx / QA prompt": {"truthful_informative": 0.5}, "gpt prompted / QA prompt": {"truthful_informative": 0.2},
             "gpt / QA prompt": {"truthful_informative": 0.0}, "sft / QA prompt": {"truthful_informative": 0.4},
             "n_items": 120}
    out = {f["name"]: f for f in run_findings([], rm, truth, 14.2)}
    assert abs(out["rm_ratio"]["figures"]["value"] - 0.60 / 0.786) < 1e-9 and out["rm_ratio"]["verdict"] == NOT
    assert out["labeler_agreement_train"]["verdict"] == NOT
    assert out["truthful_informative"]["verdict"] == REPRODUCED and out["truthful_informative"]["figures"]["ratio"] == 2.5
    assert out["minutes"]["figures"]["value"] == 14.2
