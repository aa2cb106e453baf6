"""Calling a function when a module is first imported, without importing it first: the
hooks in a user's script wait for its own imports (`keras`, TensorFlow's tf.data)."""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from collections.abc import Callable
from typing import Any


def when_imported(module: str, fn: Callable[[], None]) -> None:
    """Call `fn` right after the process first imports `module`, or now if it did."""
    if module in sys.modules:
        fn()
    else:
        sys.meta_path.insert(0, _ImportWatcher(module, fn))


class _ImportWatcher(importlib.abc.MetaPathFinder):
    """Wraps the loader of each spec found for `module` until one of them executes:
    TensorFlow asks `find_spec("keras")` to see whether Keras is installed, without
    importing it, before the script's own import."""

    def __init__(self, module: str, fn: Callable[[], None]) -> None:
        self.module, self.fn = module, fn
        self.busy = False

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != self.module or self.busy:
            return None
        self.busy = True
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self.busy = False
        loader = getattr(spec, "loader", None)
        if spec is None or loader is None:
            return spec
        execute = loader.exec_module

        def exec_module(module: Any) -> None:
            if self in sys.meta_path:
                sys.meta_path.remove(self)
            execute(module)
            self.fn()

        loader.exec_module = exec_module
        return spec
