"""What TensorFlow's op determinism costs a small convnet, and whether Keras then
compiles it with XLA: one fresh process per case (determinism is process-wide), each
printing a JSON line with the environment. Run on the GPU machine after the set-up:

    python3 experiments/2026-12-06-determinism/probe.py > determinism.jsonl
"""

import json
import os
import subprocess
import sys
import time

CASES = [  # (op determinism, jit_compile asked)
    (False, False),
    (True, False),
    (False, True),
    (True, True),
]


def one(determinism: bool, jit: bool) -> dict:
    import keras
    import numpy as np
    import tensorflow as tf

    keras.utils.set_random_seed(1)
    if determinism:
        tf.config.experimental.enable_op_determinism()
    rng = np.random.default_rng(0)
    x = rng.random((16384, 28, 28, 1), dtype=np.float32)
    y = rng.integers(0, 10, 16384)
    model = keras.Sequential([
        keras.Input((28, 28, 1)),
        keras.layers.Conv2D(32, 3, activation="relu"),
        keras.layers.MaxPooling2D(),
        keras.layers.Conv2D(64, 3, activation="relu"),
        keras.layers.MaxPooling2D(),
        keras.layers.Flatten(),
        keras.layers.Dense(10, activation="softmax"),
    ])
    model.compile("adam", "sparse_categorical_crossentropy", jit_compile=jit)
    model.fit(x[:1024], y[:1024], batch_size=128, epochs=1, verbose=0)  # trace, compile
    start = time.perf_counter()
    model.fit(x, y, batch_size=128, epochs=2, verbose=0)
    seconds = time.perf_counter() - start
    gpu = tf.config.list_physical_devices("GPU")
    name = tf.config.experimental.get_device_details(gpu[0]).get("device_name") if gpu else "CPU"
    return {
        "determinism": determinism, "jit_compile_asked": jit,
        "jit_compile_used": bool(model.jit_compile),
        "samples_per_s": round(2 * len(x) / seconds),
        "device": name, "tf": tf.__version__, "keras": keras.__version__,
    }


if __name__ == "__main__":
    if len(sys.argv) == 3:
        print(json.dumps(one(sys.argv[1] == "1", sys.argv[2] == "1")), flush=True)
    else:
        for det, jit in CASES:
            out = subprocess.run(
                [sys.executable, __file__, str(int(det)), str(int(jit))],
                capture_output=True, text=True, env=os.environ,
            )
            lines = out.stdout.strip().splitlines()
            print(lines[-1] if lines else json.dumps({"error": out.stderr[-500:]}), flush=True)
