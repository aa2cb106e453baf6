"""A trial's process ends mid-epoch (after its timed windows or its race; plan's after
one step), so the files a script's tf.data pipeline writes as it is read would be left
part-written: a `Dataset.cache(filename)` keeps TensorFlow's lockfile, and the script's
next run fails ("There appears to be a concurrent caching iterator running - cache
lockfile already exists"); a `Dataset.snapshot(path)` leaves a run that is never
finished in the user's folder, as large as what was read, one a trial. In such a
process a cache or snapshot of the script's that is not complete is written to the
process's own temporary folder instead (`tfaccel._child` gives each child one and
removes it after); a complete one is read where it is, as the script reads it.
`tfaccel run` runs the script as it is: it ends as the script does. (`profile --stop`,
whose process has no temporary folder of its own, leaves them in the system's, in a
folder of its process id, so that no lockfile of an earlier one stands in the way.)"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
import tempfile
from collections.abc import Callable
from typing import Any

from tfaccel._tf import DATASET_OPS, import_tensorflow
from tfaccel.script.watch import when_imported


def install() -> None:
    """Send the script's unfinished caches and snapshots to this process's temporary
    folder, from when TensorFlow's tf.data is imported."""
    when_imported(DATASET_OPS, _patch)


def _patch() -> None:
    dataset = sys.modules[DATASET_OPS].DatasetV2
    cache, snapshot = dataset.cache, dataset.snapshot

    @functools.wraps(cache)
    def own_cache(self: Any, filename: Any = "", name: Any = None) -> Any:
        return cache(self, private(filename, cache_done), name=name)

    @functools.wraps(snapshot)
    def own_snapshot(self: Any, path: Any, *args: Any, **kwargs: Any) -> Any:
        return snapshot(self, private(path, snapshot_done), *args, **kwargs)

    dataset.cache, dataset.snapshot = own_cache, own_snapshot


def cache_done(path: str) -> bool:
    """A complete file cache: TensorFlow writes its `.index` file last, and reads it then
    (through its own file system: a `gs://` path too)."""
    return bool(import_tensorflow().io.gfile.exists(f"{path}.index"))


def snapshot_done(path: str) -> bool:
    """A finished snapshot: a `snapshot.metadata` in a folder of the path's."""
    return bool(import_tensorflow().io.gfile.glob(f"{path}/*/snapshot.metadata"))


def private(filename: Any, done: Callable[[str], bool] = cache_done) -> Any:
    """Where this process writes what the script names `filename`: the same path where
    it is `done` or in memory ("") or a tensor; else a path of the same name in this
    process's temporary folder, in a folder by the full path (two caches of one name in
    two folders stay two; one in a bucket, `gs://`, is written here then)."""
    if not isinstance(filename, (str, os.PathLike)) or not os.fspath(filename):
        return filename
    path = os.fspath(filename)
    path = path if "://" in path else os.path.abspath(path)
    if done(path):
        return filename
    digest = hashlib.sha256(path.encode()).hexdigest()[:16]
    folder = os.path.join(tempfile.gettempdir(), f"tfaccel-caches-{os.getpid()}", digest)
    os.makedirs(folder, exist_ok=True)
    return os.path.join(folder, os.path.basename(path))
