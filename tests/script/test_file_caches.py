"""script.file_caches: a trial's process, which ends mid-epoch, leaves no part-written
`Dataset.cache(filename)` of the script's behind (its lockfile would make the script's
next run fail) and no unfinished `Dataset.snapshot(path)` run; complete ones are read
where they are."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tfaccel.optimize.settings import Settings
from tfaccel.script.command import parse_command
from tfaccel.script.file_caches import private, snapshot_done
from tfaccel.script.run import ScriptTrial
from tfaccel.trial.runner import StepPlan, run_trial

# A tf.data pipeline cached to a file beside the script, labels from a fixed teacher.
# It repeats, with steps_per_epoch, so that one iterator reads the first pass to its end
# and completes the file: with one iterator an epoch, TensorFlow discards a pass that
# Keras stops at its last batch, and the next epoch's iterator could find the discarded
# file half-removed (seen under load: "file is too short to be an sstable").
CACHED_SCRIPT = """
import sys
import numpy as np
import tensorflow as tf
import keras

rng = np.random.default_rng(0)
x = rng.normal(size=(4096, 8)).astype("float32")
y = (x @ rng.normal(size=(8, 3))).argmax(axis=1)
train = tf.data.Dataset.from_tensor_slices((x, y)).cache("cached/train").batch(32)
train = train.snapshot("cached/snap") if len(sys.argv) > 1 else train
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(3)])
model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(train.repeat(), epochs=2, steps_per_epoch=128, verbose=0)
print("trained")
"""


def test_an_unfinished_cache_goes_to_the_process_temporary_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "own-tmp"))
    monkeypatch.chdir(tmp_path)
    moved = Path(private("data/train"))
    assert moved.name == "train" and moved.parent.is_dir()
    assert moved.is_relative_to(tmp_path / "own-tmp")
    assert private(str(tmp_path / "data" / "train")) == str(moved)  # by the full path
    assert Path(private("other/train")) != moved  # another folder's cache of that name
    assert private("") == "" and private(b"x") == b"x"  # in memory; not a path
    (tmp_path / "done.index").write_text("")
    assert private("done") == "done"  # complete: read where it is
    tf = pytest.importorskip("tensorflow")
    assert Path(private("ram://elsewhere/c")).is_relative_to(tmp_path / "own-tmp")
    with tf.io.gfile.GFile("ram://elsewhere/d.index", "w") as index:  # TensorFlow's files
        index.write("written")
    assert private("ram://elsewhere/d") == "ram://elsewhere/d"
    (tmp_path / "snap" / "123").mkdir(parents=True)
    assert Path(private("snap", snapshot_done)).is_relative_to(tmp_path / "own-tmp")
    (tmp_path / "snap" / "123" / "snapshot.metadata").write_text("")
    assert private("snap", snapshot_done) == "snap"  # a finished snapshot


def test_a_trial_leaves_no_lockfile_and_the_script_runs_after(script_folder: Path) -> None:
    (script_folder / "cached").mkdir()
    (script_folder / "train.py").write_text(CACHED_SCRIPT)
    script = parse_command(["python", str(script_folder / "train.py")])
    plan = StepPlan(warmup=2, windows=2, window=3)
    trial = run_trial(ScriptTrial(script), Settings(precision="float32", xla="off"), plan)
    assert trial.ok, (trial.error, trial.traceback)
    assert list((script_folder / "cached").iterdir()) == []  # nothing part-written
    done = subprocess.run(
        [sys.executable, "train.py"], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0 and "trained" in done.stdout, done.stderr[-2000:]
    assert (script_folder / "cached" / "train.index").exists()
    again = run_trial(ScriptTrial(script), Settings(precision="float32", xla="off"), plan)
    assert again.ok, (again.error, again.traceback)  # read from the complete cache
    assert sorted(p.suffix for p in (script_folder / "cached").iterdir()) == [
        ".data-00000-of-00001",
        ".index",
    ]


def test_a_trial_leaves_no_unfinished_snapshot(script_folder: Path) -> None:
    (script_folder / "cached").mkdir()
    (script_folder / "train.py").write_text(CACHED_SCRIPT)
    script = parse_command(["python", str(script_folder / "train.py"), "snapshot"])
    plan = StepPlan(warmup=2, windows=2, window=3)
    trial = run_trial(ScriptTrial(script), Settings(precision="float32", xla="off"), plan)
    assert trial.ok, (trial.error, trial.traceback)
    assert list((script_folder / "cached").iterdir()) == []  # no run left unfinished
