"""A forecasting script in keras-io's timeseries style: a long multivariate series,
keras.utils.timeseries_dataset_from_array for the training and validation windows
(datasets of batches with targets), a Conv1D + GRU model, an MAE metric, ModelCheckpoint
to ./best.keras. The target: a fixed function of the series' recent past (learnable)."""

import numpy as np
import keras

rng = np.random.default_rng(0)
steps, channels = 40000, 5
t = np.arange(steps)
series = np.stack(
    [np.sin(t / p + ph) for p, ph in zip((20, 37, 61, 97, 150), rng.uniform(0, 6, 5))],
    axis=1,
).astype("float32")
series += 0.1 * rng.normal(size=series.shape).astype("float32")
# the teacher: tomorrow's value from a fixed mix of the last 24 steps
weights = np.linspace(0.2, 1.0, 24)[:, None] * np.array([0.5, -0.3, 0.8, 0.1, -0.6])
target = np.zeros(steps, "float32")
for i in range(24, steps):
    target[i] = np.tanh((series[i - 24:i] * weights).sum() / 8)

past, split = 48, 32000
train = keras.utils.timeseries_dataset_from_array(
    series[:split], target[past:split + past], sequence_length=past, batch_size=128,
    shuffle=True, seed=1)
val = keras.utils.timeseries_dataset_from_array(
    series[split:-past], target[split + past:], sequence_length=past, batch_size=128)

model = keras.Sequential([
    keras.Input((past, channels)),
    keras.layers.Conv1D(32, 5, activation="relu"),
    keras.layers.GRU(32),
    keras.layers.Dense(1),
])
model.compile(keras.optimizers.Adam(1e-3), "mse", metrics=["mae"])
model.fit(train, validation_data=val, epochs=8,
          callbacks=[keras.callbacks.ModelCheckpoint("best.keras", save_best_only=True)])
