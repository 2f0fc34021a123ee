"""Across worlds: the pooling of intervals (random effects) against its closed form, each finding's own rule on
the pooled interval, the replication table's counts, and the pipeline's world seed (its own folders, named in
the report, another world's data refused)."""
import math

import pytest

import pipeline
from experiments import replicate
from nanorlhf.evals.findings import DIRECTION, NOT, REPRODUCED, Z95, combined_verdict, pooled
from nanorlhf.infra.config import ConfigError, parse_config
from nanorlhf.world import WorldMismatch, ensure_world


def test_pooling_is_dersimonian_laird_on_the_worlds_standard_errors():
    """Equal worlds pool to their centre with the interval shrunk by sqrt(k); worlds that disagree get the
    between-world variance of the closed form (two estimates, equal se s: tau^2 = max(0, d^2/2 - s^2))."""
    p = pooled([(0.6, 0.6 - Z95 * 0.05, 0.6 + Z95 * 0.05)] * 4)
    assert p["value"] == pytest.approx(0.6) and p["hi"] - p["lo"] == pytest.approx(2 * Z95 * 0.05 / 2)
    assert p["tau"] == 0
    s, a, b = 0.02, 0.4, 0.8
    q = pooled([(a, a - Z95 * s, a + Z95 * s), (b, b - Z95 * s, b + Z95 * s)])
    tau2 = (b - a) ** 2 / 2 - s ** 2
    assert q["tau"] == pytest.approx(math.sqrt(tau2))
    assert q["hi"] - q["lo"] == pytest.approx(2 * Z95 * math.sqrt((s ** 2 + tau2) / 2))
    # unequal precision: the tighter world weighs more (fixed effect when they agree within their errors)
    r = pooled([(0.50, 0.40, 0.60), (0.52, 0.51, 0.53)])
    assert r["tau"] == 0 and 0.515 < r["value"] < 0.52


def rate(x, lo, hi, **more):
    return {"value": x, "rate": x, "lo": lo, "hi": hi, **more}


def test_the_combined_verdict_applies_each_findings_own_rule_to_the_pooled_interval():
    """A win rate needs the pooled low end above 50%; FLAN's below-SFT needs the high end below 50%; a paired
    difference needs it above 0; the RM's reading needs it above 60%; worlds far apart widen the interval until it
    decides nothing."""
    assert combined_verdict("ppo_vs_sft_big", [rate(0.56, 0.51, 0.61)] * 3)[0] == REPRODUCED
    assert combined_verdict("ppo_vs_sft_big", [rate(0.56, 0.51, 0.61), rate(0.44, 0.39, 0.49)])[0] != REPRODUCED
    assert combined_verdict("flan_below_sft_big", [rate(0.45, 0.41, 0.49)] * 2)[0] == REPRODUCED
    assert combined_verdict("flan_below_sft_big", [rate(0.55, 0.51, 0.59)] * 2)[0] == NOT
    assert combined_verdict("rm_reads_truth", [rate(0.64, 0.59, 0.69)] * 3)[0] == REPRODUCED
    assert combined_verdict("rm_reads_truth", [rate(0.62, 0.55, 0.69)])[0] == DIRECTION
    d = {"value": 0.3, "diff": 0.05, "lo": 0.01, "hi": 0.09}
    assert combined_verdict("answers_the_question", [d, d])[0] == REPRODUCED
    assert combined_verdict("answers_the_question", [{**d, "diff": -0.05, "lo": -0.09, "hi": -0.01}] * 2)[0] == NOT
    ladder = {"value": 0.6, "rungs": [rate(0.6, 0.55, 0.65), rate(0.52, 0.47, 0.57)]}
    verdict, p = combined_verdict("ladder_big", [ladder] * 2)
    assert verdict == DIRECTION and len(p["rungs"]) == 2


def test_the_table_counts_worlds_and_skips_the_minutes():
    """Each finding of the first world a row, its verdict per world, "k of N" reproduced; the minutes left out."""
    f = lambda verdict, x: [{"name": "ppo_vs_sft_big", "verdict": verdict, "claim": "c",
                             "figures": rate(x, x - 0.03, x + 0.03)},
                            {"name": "minutes", "verdict": "measured", "figures": {"value": 3.0}}]
    rows, md = replicate.replication_table({0: f(REPRODUCED, 0.6), 1: f(DIRECTION, 0.52), 2: f(REPRODUCED, 0.58)})
    assert [r["name"] for r in rows] == ["ppo_vs_sft_big"] and rows[0]["reproduced_on"] == 2
    assert rows[0]["verdicts"] == [REPRODUCED, DIRECTION, REPRODUCED] and "2 of 3" in md[-1]


def test_world_seeds_are_checked_before_any_run():
    """--worlds takes distinct seeds in range; anything else is one line before a pipeline starts."""
    assert replicate.world_seeds("0,1,2") == [0, 1, 2]
    for bad in ("0,0", "a", "-1", "", str(2 ** 32)):
        with pytest.raises(ConfigError):
            parse_config(replicate.Config, [f"--worlds={bad}"])


def test_a_world_seed_has_its_own_folders_and_another_worlds_data_is_refused(tmp_path):
    """--world_seed=k runs in out/<preset>_world<k> on data/<preset>_world<k>; a data folder holding another
    seed's world is refused, not rebuilt."""
    cfg = parse_config(pipeline.Config, ["--preset=tiny", "--world_seed=7", f"--out_root={tmp_path}/o",
                                         f"--data_root={tmp_path}/d"])
    assert pipeline.folders(cfg) == (f"{tmp_path}/o/tiny_world7", f"{tmp_path}/d/tiny_world7")
    assert pipeline.folders(parse_config(pipeline.Config, ["--preset=tiny"])) == ("out/tiny", "data/tiny")
    ensure_world(str(tmp_path / "w"), "tiny", 0, seed=7)
    with pytest.raises(WorldMismatch, match="seed 7"):
        ensure_world(str(tmp_path / "w"), "tiny", 0, seed=0)
    for bad in ("-1", str(2 ** 32)):
        with pytest.raises(ConfigError):
            parse_config(pipeline.Config, [f"--world_seed={bad}"])


def test_the_pipeline_builds_the_world_of_its_world_seed(tmp_path, monkeypatch):
    """pipeline.main hands --world_seed to the world's build (into its own data folder), before any stage."""
    seen = {}

    def fake(out, scale, rm_prompts, fresh=False, seed=0):
        seen.update(out=out, seed=seed)
        raise KeyboardInterrupt  # stop before any training

    monkeypatch.setattr(pipeline, "ensure_world", fake)
    with pytest.raises(KeyboardInterrupt):
        pipeline.main(parse_config(pipeline.Config, ["--preset=tiny", "--world_seed=5", f"--out_root={tmp_path}/o",
                                                     f"--data_root={tmp_path}/d"]))
    assert seen == {"out": f"{tmp_path}/d/tiny_world5", "seed": 5}
