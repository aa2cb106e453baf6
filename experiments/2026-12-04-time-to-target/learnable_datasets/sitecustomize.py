"""The GPU machine reaches no dataset host: this environment's own sitecustomize feeds
keras.datasets' MNIST and IMDB loaders arrays of the real shapes and types whose labels
come from a fixed teacher, so that a validation loss means something (random labels
only measure memorisation) and the public example scripts run unmodified.

- MNIST: uniform random pixels; the label is the argmax of a fixed linear teacher of
  the image's 4x4-block means (a 7x7x10 weight grid), which a convnet with pooling
  can learn.
- Fashion-MNIST (for keras-io's WGAN-GP script, which trains on the images only):
  the MNIST arrays above, through `load_data` itself (its loader reads four gzip
  files, not one archive).
- IMDB: Zipf-distributed word ids that stay inside `num_words=20000` after the
  loader's `index_from=3`; the label says whether a fixed +-1 weight of the 2,000
  most frequent words sums above its median over the last 200 words (what the script's
  `pad_sequences(maxlen=200)` keeps).

LEARNABLE_SEED=n seeds Python, NumPy and TensorFlow (`keras.utils.set_random_seed`)
where the process first imports Keras, and again as the script loads its data: the two
runs of a same-wall pair then start from the same weights and shuffle, so that what
differs between them is the settings, not the luck of an initialisation. (Until
2026-12-07 it seeded at load_data only, after keras-io's LSTM script has built its
model: its pairs shared their shuffle, not their weights.) LEARNABLE_DETERMINISTIC=1 also
turns on TensorFlow's op determinism there: cuDNN's training is not deterministic, and
on an H100 the same seed's plain runs of the LSTM script ended their first epoch
anywhere from 0.34 to 0.51, wider than any difference between settings being
compared (Keras then compiles nothing with XLA: for the LSTM, which XLA never
compiles, nothing else changes).
"""

import importlib.util
import os
import sys
import tempfile

import numpy as np


# LEARNABLE_SCALE=0.1: a tenth of the examples, for a check on a CPU.
SCALE = float(os.environ.get("LEARNABLE_SCALE", "1"))


def _npz(name, make):
    path = os.path.join(tempfile.gettempdir(), f"learnable-{SCALE:g}-{name}")
    if not os.path.exists(path):
        np.savez(path, **make(np.random.default_rng(0)))
    return path


def _mnist(rng):
    teacher = rng.normal(size=(7, 7, 10))

    def split(n):
        x = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        blocks = (x.astype("float32") / 255 - 0.5).reshape(n, 7, 4, 7, 4).mean(axis=(2, 4))
        y = np.argmax(np.einsum("nij,ijk->nk", blocks, teacher), axis=1).astype(np.uint8)
        return x, y

    (x_train, y_train), (x_test, y_test) = split(int(60000 * SCALE)), split(int(10000 * SCALE))
    return {"x_train": x_train, "y_train": y_train, "x_test": x_test, "y_test": y_test}


def _imdb(rng):
    weight = np.zeros(20000)
    weight[4:2004] = rng.choice([-1.0, 1.0], 2000)  # ids as the script sees them

    def split(n):
        out = np.empty(n, dtype=object)
        sums = np.empty(n)
        for i, length in enumerate(rng.integers(50, 500, n)):
            raw = np.minimum(rng.zipf(1.2, length), 19996)  # +3 stays below 20000
            sums[i] = weight[(raw + 3)[-200:]].sum()
            out[i] = raw.tolist()  # Python ints: Keras unpickles no numpy scalars
        return out, (sums > threshold).astype(np.int64)

    threshold = 0.0

    state = rng.bit_generator.state
    probe = split(2000)  # the median of the sums, so that the classes are balanced
    sums = [weight[(np.array(r) + 3)[-200:]].sum() for r in probe[0]]
    rng.bit_generator.state = state
    threshold = float(np.median(sums))
    (x_train, y_train), (x_test, y_test) = split(25000), split(25000)
    return {"x_train": x_train, "y_train": y_train, "x_test": x_test, "y_test": y_test}


def _split(arrays):
    return (arrays["x_train"], arrays["y_train"]), (arrays["x_test"], arrays["y_test"])


def _seed():
    if os.environ.get("LEARNABLE_SEED"):
        import keras

        keras.utils.set_random_seed(int(os.environ["LEARNABLE_SEED"]))
    if os.environ.get("LEARNABLE_DETERMINISTIC") == "1":
        import tensorflow as tf

        tf.config.experimental.enable_op_determinism()


def _seeding(load_data):
    def load(*args, **kwargs):
        _seed()
        return load_data(*args, **kwargs)

    return load


class _PatchOnImport:
    """Patches each loader's module as the script imports it, not before: importing
    Keras here would cost every Python process that starts with this folder on its
    path (tfaccel's own command too) the seconds of TensorFlow's import."""

    LOADERS = {"keras.src.datasets.mnist": ("mnist.npz", _mnist),
               "keras.src.datasets.imdb": ("imdb.npz", _imdb),
               "keras.src.datasets.fashion_mnist": ("mnist.npz", _mnist)}

    def find_spec(self, name, path=None, target=None):
        if name not in self.LOADERS and name != "keras":
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        execute = spec.loader.exec_module
        if name == "keras":  # seeded before the script can build a model

            def exec_keras(module):
                execute(module)
                _seed()

            spec.loader.exec_module = exec_keras
            return spec
        file, make = self.LOADERS[name]

        def exec_module(module):
            execute(module)
            module.get_file = lambda *a, **k: _npz(file, make)
            if name.endswith("fashion_mnist"):
                module.load_data = lambda: _split(np.load(_npz(file, make)))
            module.load_data = _seeding(module.load_data)

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _PatchOnImport())
