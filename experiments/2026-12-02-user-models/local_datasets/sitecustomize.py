"""The machines that run these experiments reach no dataset host: this environment's
own sitecustomize feeds keras.datasets' MNIST and IMDB loaders synthetic arrays of
the real shapes and types, so the public example scripts run unmodified (and it shows
tfaccel's hook chaining to an environment's own sitecustomize)."""

import os
import tempfile

import numpy as np


def _npz(name, make):
    path = os.path.join(tempfile.gettempdir(), f"local-{name}")
    if not os.path.exists(path):
        np.savez(path, **make(np.random.default_rng(0)))
    return path


def _mnist(rng):
    def images(n):
        return rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)

    return {
        "x_train": images(60000),
        "y_train": rng.integers(0, 10, 60000, dtype=np.uint8),
        "x_test": images(10000),
        "y_test": rng.integers(0, 10, 10000, dtype=np.uint8),
    }


def _imdb(rng):
    def reviews(n):
        out = np.empty(n, dtype=object)
        for i, length in enumerate(rng.integers(50, 500, n)):
            out[i] = rng.integers(
                1, 88000, length
            ).tolist()  # Python ints: Keras unpickles no numpy scalars
        return out

    return {
        "x_train": reviews(25000),
        "y_train": rng.integers(0, 2, 25000),
        "x_test": reviews(25000),
        "y_test": rng.integers(0, 2, 25000),
    }


try:
    import keras.src.datasets.imdb as _imdb_module
    import keras.src.datasets.mnist as _mnist_module

    _mnist_module.get_file = lambda *a, **k: _npz("mnist.npz", _mnist)
    _imdb_module.get_file = lambda *a, **k: _npz("imdb.npz", _imdb)
except ImportError:
    pass
