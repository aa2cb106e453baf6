"""A trial's process ends mid-epoch (after its timed windows or its race; plan's after
one step), so a `Dataset.cache(filename)` of the script's would be left part-written:
TensorFlow keeps its lockfile, and the script's next run fails ("There appears to be a
concurrent caching iterator running - cache lockfile already exists"). In such a process
a file cache of the script's that is not complete is written to the process's own
temporary folder instead (`tfaccel._child` gives each child one and removes it after);
a complete one (its `.index` file there) is read where it is, as the script reads it.
`tfaccel run` runs the script as it is: it ends as the script does. (`profile --stop`,
whose process has no temporary folder of its own, leaves them in the system's, in a
folder of its process id, so that no lockfile of an earlier one stands in the way.)"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
import tempfile
from typing import Any

from tfaccel._tf import DATASET_OPS
from tfaccel.script.watch import when_imported


def install() -> None:
    """Send the script's unfinished file caches to this process's temporary folder,
    from when TensorFlow's tf.data is imported."""
    when_imported(DATASET_OPS, _patch)


def _patch() -> None:
    dataset = sys.modules[DATASET_OPS].DatasetV2
    original = dataset.cache

    @functools.wraps(original)
    def cache(self: Any, filename: Any = "", name: Any = None) -> Any:
        return original(self, private(filename), name=name)

    dataset.cache = cache


def private(filename: Any) -> Any:
    """Where this process writes the cache the script names `filename`: the same file
    where it is complete or in memory ("") or a tensor; else a file of the same name in
    this process's temporary folder, in a folder by the full path (two caches of one
    name in two folders stay two)."""
    if not isinstance(filename, (str, os.PathLike)) or not os.fspath(filename):
        return filename
    path = os.path.abspath(os.fspath(filename))
    if os.path.exists(f"{path}.index"):
        return filename
    digest = hashlib.sha256(path.encode()).hexdigest()[:16]
    folder = os.path.join(tempfile.gettempdir(), f"tfaccel-caches-{os.getpid()}", digest)
    os.makedirs(folder, exist_ok=True)
    return os.path.join(folder, os.path.basename(path))
