"""Lanes (nanorlhf/infra/lanes.py): stages side by side in their own processes, each lane in order, logs joined."""
import io
import json
import os
from dataclasses import dataclass
from functools import partial

import pytest
import torch

from nanorlhf.checkpoint import MissingCheckpoint, load_model
from nanorlhf.infra.lanes import Prefixed, check_lanes, run_lanes, side_by_side, split_cpus, usable_cpus
from nanorlhf.infra.stages import Stages


@dataclass
class FakeConfig:
    out_dir: str = ""
    needs: str = ""  # a file an earlier stage of the same lane must have written
    fail: bool = False


def fake_main(cfg: FakeConfig) -> dict:
    """A stage that records where it ran; it fails when its lane's earlier stage has not written `needs`."""
    if cfg.fail:
        raise ValueError("a stage failed")
    if cfg.needs and not os.path.exists(cfg.needs):
        raise FileNotFoundError(cfg.needs)
    os.makedirs(cfg.out_dir, exist_ok=True)
    print(f"ran in {os.getpid()}")
    res = {"pid": os.getpid(), "threads": torch.get_num_threads(), "cpus": sorted(os.sched_getaffinity(0))}
    with open(os.path.join(cfg.out_dir, "ckpt.pt"), "w") as f:
        json.dump(res, f)
    return res


def spec(out, name, needs="", fail=False):
    """A stage spec as pipeline.py builds them; its inputs are what it reads."""
    return (name, fake_main, FakeConfig(os.path.join(out, name), needs, fail), [needs] if needs else [],
            os.path.join(out, name, "ckpt.pt"))


def test_split_cpus_gives_disjoint_equal_slices_and_refuses_too_many_lanes():
    """Each lane gets its own cores, as many as every other lane; more lanes than cores is an error."""
    parts = split_cpus([0, 1, 2, 3, 4], 2)
    assert parts == [[0, 1], [2, 3]]
    assert split_cpus([3], 1) == [[3]]
    with pytest.raises(ValueError):
        split_cpus([0, 1], 3)


def test_prefixed_stream_tags_whole_lines_only():
    """A lane's output lines carry its stage's name; a partial line waits for its end."""
    buf = io.StringIO()
    out = Prefixed(buf)
    out.prefix = "ppo_1m"
    out.write("it 1\nit ")
    assert buf.getvalue() == "[ppo_1m] it 1\n"
    out.write("2\n")
    assert buf.getvalue() == "[ppo_1m] it 1\n[ppo_1m] it 2\n"


@pytest.mark.skipif(len(usable_cpus()) < 2, reason="lanes need two cores")
def test_lanes_run_in_their_own_pinned_processes_in_order_and_join_the_log(tmp_path):
    """Two lanes run in two other processes, one thread on its own core each; a lane's second stage sees its
    first stage's output; every stage's entry reaches the caller's log; a rerun reuses them all."""
    out = str(tmp_path)
    a1 = os.path.join(out, "a1", "ckpt.pt")
    lanes = [[spec(out, "a1"), spec(out, "a2", needs=a1)], [spec(out, "b1")]]
    st = Stages(out, fresh=False)
    run_lanes(st, lanes, 2)
    assert set(st.log) == {"a1", "a2", "b1"}
    res = {k: v["result"] for k, v in st.log.items()}
    assert res["a1"]["pid"] == res["a2"]["pid"] != res["b1"]["pid"]
    assert os.getpid() not in {r["pid"] for r in res.values()}
    assert all(r["threads"] == len(r["cpus"]) for r in res.values())
    assert not set(res["a1"]["cpus"]) & set(res["b1"]["cpus"])
    again = Stages(out, fresh=False)
    run_lanes(again, lanes, 2)
    assert {k: v["key"] for k, v in again.log.items()} == {k: v["key"] for k, v in st.log.items()}
    assert all(json.load(open(os.path.join(out, k, "ckpt.pt")))["pid"] == r["pid"] for k, r in res.items())


@pytest.mark.skipif(len(usable_cpus()) < 2, reason="lanes need two cores")
def test_a_failing_lane_raises_its_own_error_after_the_other_lane_ends(tmp_path):
    """A stage's error in one lane reaches the caller as that error, its message intact (the one line the
    command prints); the other lane still finishes."""
    out = str(tmp_path)
    with pytest.raises(ValueError, match="a stage failed"):
        run_lanes(Stages(out, fresh=False), [[spec(out, "bad", fail=True)], [spec(out, "good")]], 2)
    assert os.path.exists(os.path.join(out, "good", "ckpt.pt"))
    missing = os.path.join(out, "nowhere", "ckpt.pt")
    with pytest.raises(MissingCheckpoint) as err:
        side_by_side([("lost", partial(load_model, missing, "cpu")), ("good", os.getpid)], 2)
    assert str(err.value) == f"no checkpoint at {missing}" and err.value.path == missing


def test_a_plan_that_reads_another_lanes_checkpoint_is_refused(tmp_path):
    """A stage may not read what another lane, or a later stage of its own lane, writes: that read would race
    the write (the checkpoint may exist from an earlier run and be rewritten meanwhile)."""
    out = str(tmp_path)
    b1 = os.path.join(out, "b1", "ckpt.pt")
    with pytest.raises(ValueError, match="another lane"):
        check_lanes([[spec(out, "a1", needs=b1)], [spec(out, "b1")]])
    with pytest.raises(ValueError, match="later stage"):
        check_lanes([[spec(out, "a1", needs=b1), spec(out, "b1")]])
    check_lanes([[spec(out, "b1"), spec(out, "a1", needs=b1)], [spec(out, "c1")]])


def test_side_by_side_returns_each_jobs_result_in_order():
    """The evaluation's halves come back in the order given, from two processes where two cores exist."""
    res = side_by_side([("one", partial(pow, 2, 3)), ("two", os.getpid)], 2)
    assert res[0] == 8
    assert (res[1] != os.getpid()) == (len(usable_cpus()) >= 2)


@pytest.mark.skipif(len(usable_cpus()) < 2, reason="lanes need two cores")
def test_a_lane_process_that_dies_is_named_with_the_way_out():
    """A lane's process killed outright (no Python error to send back) ends in one error that says what can
    cause it and how to run without lanes."""
    with pytest.raises(RuntimeError, match="--lanes=1"):
        side_by_side([("dies", partial(os._exit, 3)), ("lives", os.getpid)], 2)


def test_one_lane_runs_every_stage_here_lane_after_lane(tmp_path):
    """n_lanes 1 (and CUDA) runs the stages in this process, in the lanes' order."""
    out = str(tmp_path)
    st = Stages(out, fresh=False)
    run_lanes(st, [[spec(out, "a1"), spec(out, "a2", needs=os.path.join(out, "a1", "ckpt.pt"))], [spec(out, "b1")]], 1)
    assert list(st.log) == ["a1", "a2", "b1"]
    assert {v["result"]["pid"] for v in st.log.values()} == {os.getpid()}
