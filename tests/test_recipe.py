"""One source for every setting: each driver that starts from a pipeline run trains with the pipeline's recipe.

The ablations' baseline row is the pipeline's PPO stage, field by field; their SFT and RM rows are the pipeline's
SFT and RM stages but for the one flag a row switches; iterated RLHF, the lineage and the sycophancy study run
the recipe's PPO; the bench's PPO iteration has the recipe's batch. A default changed in any driver (or in the
recipe for the pipeline alone) fails here.
"""
import dataclasses

import pytest

import pipeline
from experiments import ablate, iterated, sycophancy
from experiments.bench import BenchConfig
from nanorlhf.infra.config import config_dict, parse_config
from nanorlhf.infra.device import resolve_device
from nanorlhf.recipe import Recipe

PATHS = {"out_dir", "sft", "rm", "base", "data_dir", "comparisons"}


def pipeline_jobs(preset: str) -> dict:
    cfg = parse_config(pipeline.Config, [f"--preset={preset}"])
    cfg = dataclasses.replace(cfg, recipe=cfg.recipe.resolved(resolve_device(cfg.device)))
    return pipeline.stage_jobs(cfg, "out/x", f"data/{preset}")


def differ(a, b, ignore=PATHS) -> list[str]:
    a, b = config_dict(a), config_dict(b)
    keys = sorted((set(a) | set(b)) - set(ignore))
    return [f"{k}: {a.get(k)!r} != {b.get(k)!r}" for k in keys if a.get(k) != b.get(k)]


@pytest.mark.parametrize("preset", ["tiny", "small"])
def test_ablation_baseline_is_the_pipelines_ppo_stage(preset):
    """The ablation's baseline row trains the pipeline's PPO at its largest size: every flag equal (paths aside),
    and its sft and rm paths the pipeline run's own checkpoints."""
    jobs, cfg = pipeline_jobs(preset), parse_config(ablate.Config, [f"--preset={preset}"])
    big = cfg.recipe.names()[0]
    assert cfg.size == big
    want = jobs[f"ppo_{big}"][2]
    _, _, stage, flags = next(row for row in ablate.ABLATIONS if row[0] == "baseline")
    got = ablate.row_config(cfg, "baseline", stage, flags)
    assert differ(got, want) == []
    assert (got.sft, got.rm) == (f"{cfg.run_dir}/sft_{big}/ckpt.pt", f"{cfg.run_dir}/rm/ckpt.pt")


@pytest.mark.parametrize("preset", ["tiny", "small"])
def test_ablation_rows_change_only_their_own_flags(preset):
    """Each ablation row's stage equals the pipeline's stage but for the flags the row names."""
    jobs, cfg = pipeline_jobs(preset), parse_config(ablate.Config, [f"--preset={preset}"])
    big = cfg.recipe.names()[0]
    stage_of = {"ppo": f"ppo_{big}", "sft": f"sft_{big}", "rm": "rm"}
    for name, _, stage, flags in ablate.ABLATIONS:
        own = {f[2:].split("=")[0] for f in flags}
        # the RM row reuses the pipeline's comparisons, so the label budget and sampling settings do not apply
        skip = PATHS | own | ({"max_prompts", "heldout_folds", "procs"} if stage == "rm" else set())
        assert differ(ablate.row_config(cfg, name, stage, flags), jobs[stage_of[stage]][2], skip) == [], name


@pytest.mark.parametrize("preset", ["tiny", "small"])
def test_iterated_rlhf_runs_the_recipes_ppo(preset):
    """Iterated RLHF's PPO, standalone at its defaults, has the pipeline's PPO hyperparameters and dtype, and its
    rounds together run the pipeline's iterations."""
    jobs, cfg = pipeline_jobs(preset), parse_config(iterated.Config, [f"--preset={preset}"])
    big = cfg.recipe.names()[0]
    want = jobs[f"ppo_{big}"][2]
    got = iterated.ppo_config(cfg, "pm.pt", 0)
    assert dataclasses.asdict(got.ppo) == dataclasses.asdict(want.ppo)
    assert (got.dtype, got.seed) == (want.dtype, want.seed)
    assert cfg.rounds * cfg.round_iterations == want.iterations


def test_lineage_hands_its_drivers_the_pipelines_recipe(monkeypatch):
    """pipeline --lineage=true trains RLAIF and iterated RLHF with the pipeline's own recipe, flag overrides included:
    their configs carry the pipeline's recipe field by field and its PPO hyperparameters."""
    seen = []

    class FakeStages:
        log = {"rm": {"result": {"report": {"n_train_comparisons": 30}}}}

        def run(self, name, main, c, inputs, ckpt):
            seen.append((name, c))

    cfg = parse_config(pipeline.Config, ["--preset=small", "--ppo_beta=0.05", "--rm_lr=1e-4"])
    cfg = dataclasses.replace(cfg, recipe=cfg.recipe.resolved("cpu"))
    iterated.train_lineage(FakeStages(), cfg, ["--preset=small"], "out/x", "data/small", "1m", 60)
    drivers = {name: c for name, c in seen if isinstance(c, iterated.Config)}
    assert set(drivers) == {"rlaif_1m", "iterated_1m"}
    want = pipeline_jobs("small")["ppo_1m"][2]
    for c in drivers.values():
        assert c.recipe == cfg.recipe
        hp = iterated.ppo_config(c, "pm.pt", 0).ppo
        assert dataclasses.asdict(hp) == dataclasses.asdict(dataclasses.replace(want.ppo, beta=0.05))


@pytest.mark.parametrize("preset", ["tiny", "small"])
def test_sycophancy_study_trains_the_recipes_sft_rm_and_ppo(preset):
    """The sycophancy study's SFT, RM fit and PPO are the pipeline's (data, label budget and paths aside; its RMs
    learn the belief prompts' labels without the pipeline's fact checks), its SFT from the pipeline run's base model
    and its RM and PPO from that SFT model."""
    jobs, cfg = pipeline_jobs(preset), parse_config(sycophancy.Config, [f"--preset={preset}"])
    sft = sycophancy.sft_config(cfg, "data/x")
    rm, ppo = sycophancy.share_configs(cfg, 0.25, "data/x", "out/x")
    assert differ(sft, jobs[f"sft_{cfg.size}"][2]) == []
    assert differ(ppo, jobs[f"ppo_{cfg.size}"][2]) == []
    assert differ(rm, jobs["rm"][2], PATHS | {"max_prompts", "procs", "fact_checks"}) == []
    assert sft.base == f"{cfg.run_dir}/base_{cfg.size}/ckpt.pt"
    assert rm.sft == ppo.sft == f"{sft.out_dir}/ckpt.pt" and ppo.rm == f"{rm.out_dir}/ckpt.pt"


def test_bench_ppo_iteration_has_the_recipes_batch():
    """The bench times PPO iterations of the pipeline's batch size."""
    assert BenchConfig().ppo_batch == Recipe().ppo_batch


def test_a_departing_default_is_caught():
    """The comparison the tests above rely on sees a one-field change (here beta) in a PPO stage's config."""
    want = pipeline_jobs("small")["ppo_1m"][2]
    assert differ(dataclasses.replace(want, ppo=dataclasses.replace(want.ppo, beta=0.02)), want) == [
        "beta: 0.02 != 0.1"]
