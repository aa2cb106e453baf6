"""Two outputs with loss_weights and a metric each, sample weights given as a dict,
a LossScaleOptimizer of the user's own around Adam, validation_split."""

import numpy as np
from tensorflow import keras

rng = np.random.default_rng(0)
x = rng.normal(size=(8000, 20)).astype("float32")
w = rng.normal(size=(20,)).astype("float32")
z = x @ w
y_cls = (z > 0).astype("int32")
y_reg = (np.tanh(z) + 0.1 * x[:, 0] ** 2).astype("float32")
weights = np.where(y_cls == 1, 2.0, 1.0).astype("float32")

inp = keras.Input((20,), name="features")
h = keras.layers.Dense(64, activation="relu")(inp)
h = keras.layers.Dense(64, activation="relu")(h)
cls = keras.layers.Dense(1, activation="sigmoid", name="cls")(h)
reg = keras.layers.Dense(1, name="reg")(h)
model = keras.Model(inp, {"cls": cls, "reg": reg})
model.compile(
    optimizer=keras.optimizers.LossScaleOptimizer(keras.optimizers.Adam(1e-3)),
    loss={"cls": "binary_crossentropy", "reg": "mse"},
    loss_weights={"cls": 1.0, "reg": 0.5},
    metrics={"cls": ["accuracy"], "reg": ["mae"]},
)
model.fit(
    x, {"cls": y_cls, "reg": y_reg},
    sample_weight={"cls": weights, "reg": np.ones_like(weights)},
    batch_size=64, epochs=4, validation_split=0.2,
)
