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

keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)
BATCH, STEPS, WINDOWS = int(os.environ.get("BATCH", "32")), 60, 3
x = np.minimum(rng.zipf(1.2, (BATCH * STEPS * (WINDOWS + 1), 200)), 19999).astype("int32")
teacher = rng.choice([-1.0, 1.0], 20000)
y = (teacher[x].sum(axis=1) > np.median(teacher[x].sum(axis=1))).astype("float32")

inputs = keras.Input(shape=(None,), dtype="int32")
h = keras.layers.Embedding(20000, 128)(inputs)
h = keras.layers.Bidirectional(keras.layers.LSTM(64, return_sequences=True))(h)
h = keras.layers.Bidirectional(keras.layers.LSTM(64))(h)
model = keras.Model(inputs, keras.layers.Dense(1, activation="sigmoid")(h))
model.compile("adam", "binary_crossentropy")

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
