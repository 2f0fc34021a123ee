"""The pipeline's stage cache: a stage reruns when its config, its inputs or its own checkpoint changed."""
from dataclasses import dataclass

from nanorlhf.infra.stages import Stages


@dataclass
class Cfg:
    lr: float = 1.0


def test_stage_reused_only_while_config_inputs_and_checkpoint_are_unchanged(tmp_path):
    """Same config and inputs -> reused; a changed config, input or a checkpoint overwritten by hand -> rerun."""
    runs = []
    inp, ckpt = tmp_path / "in.txt", tmp_path / "s" / "ckpt.pt"
    inp.write_text("data")

    def main(cfg):
        runs.append(cfg.lr)
        ckpt.parent.mkdir(exist_ok=True)
        ckpt.write_text(f"weights {cfg.lr}")
        return {"lr": cfg.lr}

    def run(cfg):
        return Stages(str(tmp_path), fresh=False).run("s", main, cfg, [str(inp)], str(ckpt))

    run(Cfg())
    assert run(Cfg()) == {"lr": 1.0} and runs == [1.0]          # cached
    run(Cfg(lr=2.0))
    assert runs == [1.0, 2.0]                                    # config changed
    inp.write_text("other data")
    run(Cfg(lr=2.0))
    assert runs == [1.0, 2.0, 2.0]                               # input changed
    ckpt.write_text("a hand-trained model")
    run(Cfg(lr=2.0))
    assert runs == [1.0, 2.0, 2.0, 2.0]                          # checkpoint replaced behind its back
    run(Cfg(lr=2.0))
    assert len(runs) == 4
    Stages(str(tmp_path), fresh=True).run("s", main, Cfg(lr=2.0), [str(inp)], str(ckpt))
    assert len(runs) == 5                                        # --fresh
