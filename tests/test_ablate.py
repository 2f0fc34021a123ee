"""experiments/ablate.py on the tiny world: every kind of row (PPO flag, SFT flag, RM flag) trains, is measured, and the
generated block of the doc is replaced while the hand-written text around it is kept."""
import os

from experiments import ablate
import pipeline
from nanorlhf.infra.config import parse_config


def test_tiny_ablation_table_and_doc_block(tmp_path):
    """Rows of each stage kind get a gold score, a KL and a table line; text outside the doc's block survives."""
    pipeline.main(parse_config(pipeline.Config, ["--preset=tiny", f"--out_root={tmp_path}/out",
                                                 f"--data_root={tmp_path}/data", "--n_eval=8"]))
    doc = tmp_path / "details.md"
    doc.write_text("# intro kept\n<!-- BEGIN GENERATED: python -m experiments.ablate --preset=small -->\nold table\n"
                   "<!-- END GENERATED -->\ntail kept\n")
    rows = "baseline,sft_prompt_loss,rm_pairs,kl_in_loss,temp_mismatch,value_from_sft,eos_penalty"
    points = ablate.main(parse_config(ablate.Config, [
        "--preset=tiny", f"--run_dir={tmp_path}/out/tiny", f"--data_dir={tmp_path}/data/tiny",
        f"--out_dir={tmp_path}/ablate", f"--only={rows}", f"--doc={doc}", "--n_eval=8"]))
    assert {p["name"] for p in points} == {"sft", *rows.split(",")}
    assert all(p["kl"] == p["kl"] and p["gold"] == p["gold"] for p in points)   # not NaN
    rm_row = next(p for p in points if p["name"] == "rm_pairs")
    assert 0 <= rm_row["rm_acc"] <= 1
    text = doc.read_text()
    assert text.startswith("# intro kept") and text.endswith("tail kept\n") and "old table" not in text
    assert "| kl_in_loss |" in text and os.path.exists(tmp_path / "details_ablation.png")
