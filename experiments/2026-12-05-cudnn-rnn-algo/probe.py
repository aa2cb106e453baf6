"""One configuration of the cuDNN RNN algorithm probe (run by probe.sh, one process
each: TensorFlow reads its TF_DEBUG_CUDNN_RNN* variables once). keras-io's
bidirectional LSTM model (IMDB: 20,000 words, 200 steps, two Bidirectional(LSTM(64)))
at its batch of 32, on learnable labels; prints one JSON line: steps/s over timed
windows after a warm-up, and the loss after the same steps from the same weights."""

import json
import os
import sys
import time

import numpy as np

import keras
from lstm_model import build, learnable

keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)
BATCH, STEPS, WINDOWS = int(os.environ.get("BATCH", "32")), 60, 3
x, y = learnable(rng, BATCH * STEPS * (WINDOWS + 1))
model = build()

times, losses = [], []


class Clock(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        self.t0 = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        times.append(time.perf_counter() - self.t0)
        losses.append(float(logs["loss"]))


try:
    model.fit(x, y, batch_size=BATCH, epochs=WINDOWS + 1, steps_per_epoch=STEPS,
              shuffle=False, verbose=0, callbacks=[Clock()])
    out = {"steps_per_s": [round(STEPS / t, 1) for t in times[1:]], "losses": losses}
except Exception as error:  # the configuration's own failure is the finding
    out = {"error": f"{type(error).__name__}: {str(error)[:300]}"}
out.update(config=sys.argv[1], batch=BATCH)
print(json.dumps(out), flush=True)
