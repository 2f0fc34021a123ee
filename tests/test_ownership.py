"""No run clobbers another's files or the user's: a folder has one live owner (nanorlhf/infra/fileio.py hold), the
start-up cleaner removes only dead writers' temp files, and the pipeline keeps a world it did not build."""
import json
import os
import subprocess
import sys
import time

import pytest

import pipeline
import train_dpo
import train_ppo
from nanorlhf.infra import cli
from nanorlhf.infra.config import parse_config
from nanorlhf.infra.fileio import LOCK, FolderBusy, hold
from nanorlhf.world import __main__ as world_main
from nanorlhf.world import ensure_world

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_entry(mod, argv, capsys) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of `python <mod>.py argv`, in this process."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        cli.run(mod.main, mod.Config, mod.__doc__, argv)
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


def test_a_second_run_on_a_live_runs_out_dir_is_refused(stages, tmp_path, capsys):
    """Two train_ppo.py runs on one out_dir: while the first lives, the second exits 2 naming the first's pid before
    it reads a flag's file; once the first is killed, its lock is taken over with a message."""
    out = tmp_path / "ppo"
    argv = ["--preset=tiny", f"--sft={stages['out']}/sft/ckpt.pt", f"--rm={stages['out']}/rm/ckpt.pt",
            f"--data_dir={stages['data']}", f"--out_dir={out}", "--iterations=100000"]
    first = subprocess.Popen([sys.executable, "train_ppo.py", *argv], cwd=ROOT, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        deadline = time.monotonic() + 60
        while not ((out / LOCK).exists() and (out / LOCK).read_text().strip() == str(first.pid)):
            assert first.poll() is None and time.monotonic() < deadline, "the first run never took its folder"
            time.sleep(0.05)
        code, stdout, err = run_entry(train_ppo, argv, capsys)
        assert code == 2 and len(err.strip().splitlines()) == 1
        assert err.strip().endswith(f"{out} is in use by process {first.pid} (its {LOCK}); wait for that run to end, "
                                    "or give another folder")
        assert "Config:" not in stdout                        # refused before its main printed a line
    finally:
        first.kill()
        first.wait()
    assert (out / LOCK).read_text().strip() == str(first.pid)   # a SIGKILL leaves the lock file, not the lock
    with hold(out):
        assert (out / LOCK).read_text().strip() == str(os.getpid())
    assert f"taking it over from process {first.pid}, which ended" in capsys.readouterr().out
    assert not (out / LOCK).exists()


WRITER = """
import sys
from nanorlhf.infra.fileio import atomic_write

def write(f):
    f.write(b"half")
    f.flush()
    print("writing", flush=True)
    sys.stdin.read()          # until the test closes stdin
    f.write(b" and the rest")

atomic_write(sys.argv[1], write)
"""


def test_the_start_up_cleaner_keeps_a_live_writers_temp_file(tmp_path, capsys):
    """A run starting in a folder where another live process is writing a checkpoint removes only the temp files of
    dead writers: the live one's survives and becomes its checkpoint."""
    shared = tmp_path / "shared"
    shared.mkdir()
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(shared / "ckpt.pt")], cwd=ROOT, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert writer.stdout.readline().strip() == "writing"
        dead = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                                  text=True).stdout)
        (shared / f".old.pt.{dead}.deadbeef.tmp").write_bytes(b"left by a killed run")
        live = [n for n in os.listdir(shared) if n.startswith(".ckpt.pt.")]
        code, stdout, _ = run_entry(train_dpo, [f"--out_dir={shared}", f"--sft={tmp_path}/missing.pt"], capsys)
        assert code == 2 and f"removed 1 unfinished temporary file(s) in {shared}: .old.pt.{dead}" in stdout
        assert [n for n in os.listdir(shared) if n.endswith(".tmp")] == live
        writer.stdin.close()
        assert writer.wait(timeout=60) == 0
    finally:
        writer.kill()
    assert (shared / "ckpt.pt").read_bytes() == b"half and the rest"


def test_the_pipeline_keeps_a_world_of_another_seed(tmp_path, capsys):
    """A data folder holding a world built with seed 7 (python -m nanorlhf.world --seed=7): the tiny pipeline, with a
    label budget that world lacks, refuses in one line and leaves every file byte for byte; --fresh rebuilds it."""
    data = tmp_path / "data" / "tiny"
    world_main.main(parse_config(world_main.Config, ["--scale=tiny", "--seed=7", f"--out={data}"]))
    before = {n: (data / n).read_bytes() for n in os.listdir(data) if (data / n).is_file()}
    code, _, err = run_entry(pipeline, ["--preset=tiny", f"--data_root={tmp_path / 'data'}",
                                        f"--out_root={tmp_path / 'out'}", "--rm_prompts=100"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "seed 7" in err and "--fresh=true" in err
    assert {n: (data / n).read_bytes() for n in os.listdir(data) if (data / n).is_file()} == before
    assert not (tmp_path / "out").exists()
    assert ensure_world(str(data), "tiny", 100, fresh=True)
    assert json.loads((data / "meta.json").read_text()) == {"scale": "tiny", "seed": 0, "rm_extra": 36}


def test_a_folder_held_in_this_process_is_not_held_twice_elsewhere(tmp_path):
    """hold is re-entrant in its own process (the pipeline holds the run folder its stages write under), and a
    second process's hold of the same folder raises FolderBusy while the first holds it."""
    probe = "from nanorlhf.infra.fileio import hold; import sys\nwith hold(sys.argv[1]): pass"
    with hold(tmp_path / "run"):
        with hold(tmp_path / "run"):
            pass
        assert (tmp_path / "run" / LOCK).exists()
        p = subprocess.run([sys.executable, "-c", probe, str(tmp_path / "run")], cwd=ROOT, capture_output=True,
                           text=True)
        assert p.returncode == 1 and FolderBusy.__name__ in p.stderr and f"process {os.getpid()}" in p.stderr
    assert not (tmp_path / "run").exists()               # created by hold, left empty: removed
