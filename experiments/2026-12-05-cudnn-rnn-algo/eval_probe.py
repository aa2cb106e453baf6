"""Do cuDNN's RNN algorithms evaluate the same weights alike? (run by eval_probe.sh).

With `persist_dynamic` in tune's answer, keras-io's LSTM script trained as far as under
plain python (training losses alike) yet validated worse, which points at the
algorithm's inference path. `train` trains keras-io's bidirectional LSTM model (as in
probe.py, learnable labels) for STEPS steps under TensorFlow's default algorithm and
saves its weights; `eval CONFIG` loads them in a process of its own (TensorFlow reads
its TF_DEBUG_CUDNN_RNN* variables once) and prints one JSON line: the loss on held-out
data through `evaluate` (the inference path) and through calls with training=True (the
training path), from the same weights."""

import json
import os
import sys

import numpy as np

import keras
from lstm_model import build, learnable

keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)
BATCH, STEPS, HELD = 32, int(os.environ.get("STEPS", "400")), 4096
x, y = learnable(rng, BATCH * STEPS + HELD)
x_train, y_train, x_held, y_held = x[:-HELD], y[:-HELD], x[-HELD:], y[-HELD:]
model = build()
mode, config, weights = sys.argv[1], sys.argv[2], sys.argv[3]
out: dict = {"mode": mode, "config": config, "steps": STEPS}
if mode == "train":
    history = model.fit(x_train, y_train, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
    out["train_loss"] = history.history["loss"][-1]
    model.save_weights(weights)
else:
    model.load_weights(weights)
out["evaluate_loss"] = float(model.evaluate(x_held, y_held, batch_size=BATCH, verbose=0))
loss = keras.losses.BinaryCrossentropy()
parts = [
    float(loss(y_held[i : i + BATCH, None], model(x_held[i : i + BATCH], training=True)))
    for i in range(0, HELD, BATCH)
]
out["training_path_loss"] = float(np.mean(parts))
print(json.dumps(out), flush=True)
