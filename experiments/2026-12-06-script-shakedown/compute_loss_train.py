"""Keras 3's idiom for a loss of one's own: a Model subclass overriding compute_loss
(here: the compiled loss plus a penalty on the mean prediction), validation_split."""
import numpy as np
import keras
from keras import ops

rng = np.random.default_rng(0)
w = rng.normal(size=(12, 1)).astype("float32")
x = rng.normal(size=(12000, 12)).astype("float32")
y = (np.tanh(x @ w / 3) + 0.2 * x[:, :1] * x[:, 1:2]).astype("float32")


class Penalized(keras.Model):
    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        loss = super().compute_loss(x, y, y_pred, sample_weight, training)
        return loss + 0.01 * ops.mean(ops.square(ops.mean(y_pred)))


inputs = keras.Input((12,))
h = keras.layers.Dense(64, activation="relu")(inputs)
model = Penalized(inputs, keras.layers.Dense(1)(h))
model.compile(keras.optimizers.SGD(0.05, momentum=0.9), "mse")
model.fit(x, y, batch_size=32, epochs=4, validation_split=0.2)
