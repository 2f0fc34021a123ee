"""Fixtures shared by the test modules that need trained tiny-world models."""
import pytest

import pretrain
import train_rm
import train_sft
from nanorlhf.infra.config import parse_config
from nanorlhf.world import build_world, write_world


@pytest.fixture(scope="session")
def stages(tmp_path_factory):
    """Tiny world -> base (40 steps) -> SFT (1 epoch) -> RM, under one temp folder, built once per session.

    Tests read these and write their own runs to new subfolders of `out`; none overwrites base/, sft/ or rm/.
    """
    root = tmp_path_factory.mktemp("tiny")
    data, out = str(root / "data"), str(root / "out")
    write_world(build_world("tiny", 0), data)
    pretrain.main(parse_config(pretrain.Config, ["--preset=tiny", f"--corpus={data}/corpus.jsonl",
                                                 f"--out_dir={out}/base", "--max_steps=40"]))
    sft = train_sft.main(parse_config(train_sft.Config, ["--preset=tiny", f"--base={out}/base/ckpt.pt",
                                                         f"--data_dir={data}", f"--out_dir={out}/sft", "--epochs=1"]))
    rm = train_rm.main(parse_config(train_rm.Config, ["--preset=tiny", f"--sft={out}/sft/ckpt.pt",
                                                      f"--data_dir={data}", f"--out_dir={out}/rm"]))
    return {"data": data, "out": out, "sft": sft, "rm": rm}
