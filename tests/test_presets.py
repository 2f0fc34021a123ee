"""The stage scripts run the recipe: each script's --preset is the pipeline's stage (same flags), after the tiny
pipeline each stage's --preset=tiny finds its inputs and trains the pipeline's model again, a config.json replays
its run to the same checkpoint, the recipe's settings have one default each, and a run folder moved with its data
still samples and evaluates from a third folder."""
import json
import os
import re
import shutil
from dataclasses import replace

import pytest
import torch

import evaluate
import pipeline
import pretrain
import sample
import train_grpo
import train_ppo
import train_rm
import train_sft
from nanorlhf.checkpoint import load_checkpoint, weights_hash
from nanorlhf.infra.config import ConfigError, config_dict, parse_config
from nanorlhf.infra.precision import resolve_dtype
from nanorlhf.pg import PGConfig
from nanorlhf.ppo import PPOConfig
from nanorlhf.recipe import Recipe
from nanorlhf.reward import RewardConfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# what the pipeline sets for its own reasons, beside the recipe: the RM's held-out test is a stage of its own, and
# the RM's sampling runs in --lanes processes
PIPELINE_ONLY = {"rm": {"heldout_folds", "procs"}}


def resolved(d: dict) -> dict:
    return {**d, "dtype": resolve_dtype(d["dtype"], "cpu")} if "dtype" in d else d


@pytest.mark.parametrize("preset", ["tiny", "small"])
@pytest.mark.parametrize("script,job", [(pretrain, "base"), (train_sft, "sft"), (train_rm, "rm"),
                                        (train_ppo, "ppo")])
def test_a_stage_scripts_preset_is_the_pipelines_stage_of_its_largest_model(preset, script, job):
    """`python train_ppo.py --preset=small` is the pipeline's ppo_1m: every flag equal, paths included (the
    pipeline's own folders), the dtype as the pipeline resolves it; only the RM's lanes and held-out folds differ."""
    cfg = parse_config(pipeline.Config, [f"--preset={preset}"])
    cfg = replace(cfg, recipe=cfg.recipe.resolved("cpu"))
    big = cfg.recipe.names()[0]
    out, data = pipeline.folders(cfg)
    name = job if job == "rm" else f"{job}_{big}"
    theirs = config_dict(pipeline.stage_jobs(cfg, out, data)[name][2])
    mine = resolved(config_dict(parse_config(script.Config, [f"--preset={preset}"])))
    if job == "base":  # the pipeline names the corpus; the script finds it in data/<scale>
        assert theirs.pop("corpus") == os.path.join(data, "corpus.jsonl") and mine.pop("corpus") == ""
        assert pretrain.corpus_path(parse_config(pretrain.Config, [f"--preset={preset}"])) == \
            os.path.join(data, "corpus.jsonl") or not os.path.exists(os.path.join(data, "corpus.jsonl"))
    differ = {k for k in theirs if theirs[k] != mine.get(k)}
    assert differ == PIPELINE_ONLY.get(job, set()), {k: (theirs[k], mine.get(k)) for k in differ}


def test_the_recipes_hyperparameters_have_one_default_each():
    """The KL coefficient, PPO's batch and lr and the RM's lr and epochs are written once, in the library's
    dataclasses; the recipe, GRPO and the stage presets read them there (no second literal default anywhere)."""
    r = Recipe()
    assert (r.ppo_beta, r.ppo_batch, r.ppo_lr) == (PPOConfig.beta, PPOConfig.batch_size, PPOConfig.lr)
    assert (r.rm_lr, r.rm_epochs) == (RewardConfig.lr, RewardConfig.epochs)
    assert (PGConfig.beta, PGConfig.lr) == (PPOConfig.beta, PPOConfig.lr)
    literal = re.compile(r"^\s+(ppo_beta|beta|kl_coef): float = \d")
    found = []
    for folder in ("", "nanorlhf", "experiments"):
        for name in sorted(os.listdir(os.path.join(ROOT, folder))):
            if name.endswith(".py") and name not in ("train_dpo.py", "dpo.py"):  # DPO's beta is not a KL penalty
                with open(os.path.join(ROOT, folder, name)) as f:
                    found += [f"{folder}/{name}" for line in f if literal.match(line)]
    assert found == ["nanorlhf/ppo.py"]


def test_a_config_file_sets_every_flag_and_later_flags_override(tmp_path):
    """--config=FILE reads config_dict's names and typed values; flags after it win; a file with a name the
    script does not know, or that is not JSON, is refused naming the file."""
    c = parse_config(train_ppo.Config, ["--preset=tiny", "--beta=0.3", "--minibatch_size=2"])
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config_dict(c)))
    again = parse_config(train_ppo.Config, [f"--config={path}"])
    assert config_dict(again) == config_dict(c)
    assert parse_config(train_ppo.Config, [f"--config={path}", "--beta=0.05"]).ppo.beta == 0.05
    path.write_text(json.dumps({**config_dict(c), "n_embd": 8}))
    with pytest.raises(ConfigError, match="config.json.*no flag --n_embd"):
        parse_config(train_ppo.Config, [f"--config={path}"])
    path.write_text("{not json")
    with pytest.raises(ConfigError, match="not a JSON config"):
        parse_config(train_ppo.Config, [f"--config={path}"])


def test_a_stage_replayed_from_its_config_json_writes_the_same_checkpoint(stages, tmp_path):
    """A stage's config.json (written when it finishes) reruns it exactly: the same weights byte for byte (their
    hash) and the same config in the checkpoint. (The file's own hash differs: torch writes a new serialization id
    into every save.)"""
    out = str(tmp_path / "sft")
    flags = ["--preset=tiny", f"--base={stages['out']}/base/ckpt.pt", f"--data_dir={stages['data']}",
             f"--out_dir={out}", "--epochs=1"]
    train_sft.main(parse_config(train_sft.Config, flags))
    first = load_checkpoint(f"{out}/ckpt.pt")
    shutil.move(out, str(tmp_path / "first"))
    train_sft.main(parse_config(train_sft.Config, [f"--config={tmp_path}/first/config.json"]))
    again = load_checkpoint(f"{out}/ckpt.pt")
    assert weights_hash(again["model"]) == weights_hash(first["model"]) and again["config"] == first["config"]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """`python pipeline.py --preset=tiny --suites=none` run in a folder of its own (its data/ and out/ inside)."""
    root = tmp_path_factory.mktemp("pipeline_cwd")
    here = os.getcwd()
    os.chdir(root)
    try:
        pipeline.main(parse_config(pipeline.Config, ["--preset=tiny", "--suites=none"]))
    finally:
        os.chdir(here)
    return root


def test_after_the_tiny_pipeline_each_stage_script_finds_its_inputs_and_trains_the_pipelines_model(
        tiny_run, monkeypatch):
    """After `python pipeline.py --preset=tiny`, `train_ppo.py --preset=tiny` (and GRPO's) runs with no path given,
    and PPO at the pipeline's flags, on its inputs, with its thread count, gives its ppo_a's weights."""
    monkeypatch.chdir(tiny_run)
    threads = torch.get_num_threads()
    stage = json.load(open("out/tiny/ppo_a/stage.json"))
    torch.set_num_threads(stage["threads"])
    try:
        res = train_ppo.main(parse_config(train_ppo.Config, ["--preset=tiny", "--out_dir=out/tiny/ppo_again"]))
    finally:
        torch.set_num_threads(threads)
    theirs = load_checkpoint("out/tiny/ppo_a/ckpt.pt")["model"]
    mine = res["policy"].state_dict()
    assert set(theirs) == set(mine) and all(torch.equal(theirs[k], mine[k]) for k in theirs)
    train_grpo.main(parse_config(train_grpo.Config, ["--preset=tiny", "--out_dir=out/tiny/grpo_check"]))


def test_a_run_folder_moved_with_its_data_samples_and_evaluates_from_a_third_folder(tiny_run, tmp_path,
                                                                                    monkeypatch, capsys):
    """Copy out/tiny and data/tiny elsewhere, delete the originals' reach (another working folder): sample.py finds
    the world through the checkpoint (gold scores shown), --compare reads the moved run, evaluate runs on it."""
    moved = tmp_path / "moved"
    shutil.copytree(tiny_run / "out" / "tiny", moved / "out" / "tiny")
    shutil.copytree(tiny_run / "data" / "tiny", moved / "data" / "tiny")
    (tmp_path / "third").mkdir()
    monkeypatch.chdir(tmp_path / "third")
    run = "../moved/out/tiny"
    one = sample.main(parse_config(sample.Config, [f"--ckpt={run}/sft_a/ckpt.pt", "--prompt=test:0",
                                                   "--max_new_tokens=8"]))
    assert "gold" in one[0][0]
    both = sample.main(parse_config(sample.Config, ["--compare=sft,ppo", f"--run={run}", "--size=a",
                                                    "--prompt=test:1", "--max_new_tokens=8"]))
    assert len(both[0]) == 2 and all("gold" in a and "rm" in a for a in both[0])
    evaluate.main(parse_config(evaluate.Config, [
        "--preset=tiny", f"--policies=sft={run}/sft_a/ckpt.pt,ppo={run}/ppo_a/ckpt.pt", f"--rm={run}/rm/ckpt.pt",
        "--data_dir=../moved/data/tiny", "--out_dir=ev", "--n_prompts=4", "--samples=1"]))
    assert os.listdir("ev")
