"""The one command at the tiny scale: every stage runs, the report and its figures exist, its numbers parse."""
import json
import os
import re

import pipeline
from nanorlhf.config import parse_config


def test_tiny_pipeline_end_to_end_and_cached_rerun(tmp_path):
    """pipeline --preset=tiny writes report.md with every figure; a rerun reuses every stage."""
    flags = ["--preset=tiny", f"--out_root={tmp_path}/out", f"--data_root={tmp_path}/data"]
    res = pipeline.main(parse_config(pipeline.Config, flags))
    out = os.path.join(tmp_path, "out", "tiny")
    text = open(res["report"]).read()
    for fig in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text):
        assert os.path.exists(os.path.join(out, fig)), fig
    assert "ladder.png" in text and "head_to_head.png" in text
    rates = [float(x) for x in re.findall(r"\| (\d+)% \[", text)]
    assert rates and all(0 <= r <= 100 for r in rates)
    data = json.load(open(os.path.join(out, "report.json")))
    assert set(data["stages"]) >= {"base_a", "sft_a", "flan_a", "rm", "ppo_a", "ppo_ptx_a", "evaluate"}
    again = pipeline.main(parse_config(pipeline.Config, flags))  # every stage is up to date now
    assert os.path.exists(again["report"])
    # evaluate.py on the same outputs: the preference table, the knowledge probe and the ladder again
    import evaluate
    run = os.path.join(tmp_path, "out", "tiny")
    common = ["--preset=tiny", f"--out_dir={run}", f"--data_dir={tmp_path}/data/tiny", f"--rm={run}/rm/ckpt.pt",
              f"--policies=gpt={run}/base_a/ckpt.pt,sft={run}/sft_a/ckpt.pt,ppo={run}/ppo_a/ckpt.pt"]
    pref = evaluate.main(parse_config(evaluate.Config, common + ["--suite=preference"]))
    assert 0 <= pref["ppo"]["win"]["rate"] <= 1 and "gold" in pref["sft"]
    know = evaluate.main(parse_config(evaluate.Config, common + ["--suite=knowledge"]))
    assert 0 <= know["gpt"]["attempt_rate"]["all"] <= 1
    lad = evaluate.main(parse_config(evaluate.Config, common + ["--suite=ladder", "--sizes=a,b", "--seed=1"]))
    assert "sft_a" in lad["table"]
