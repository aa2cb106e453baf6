# AdamW with weight decay, a LearningRateScheduler callback, validation_freq=2,
# two inputs through a functional model.
import numpy as np
import keras

rng = np.random.default_rng(3)
a = rng.normal(size=(9000, 12)).astype("float32")
b = rng.normal(size=(9000, 6)).astype("float32")
y = ((a[:, :6] * b).sum(axis=1) > 0).astype("int32")
ia, ib = keras.Input((12,), name="a"), keras.Input((6,), name="b")
h = keras.layers.Concatenate()([keras.layers.Dense(32, activation="relu")(ia), ib])
h = keras.layers.Dense(32, activation="relu")(h)
model = keras.Model([ia, ib], keras.layers.Dense(2, activation="softmax")(h))
model.compile(optimizer=keras.optimizers.AdamW(2e-3, weight_decay=1e-4),
              loss="sparse_categorical_crossentropy", metrics=["accuracy"])

def step_decay(epoch, lr):
    return lr * 0.7 if epoch >= 2 else lr

model.fit({"a": a, "b": b}, y, batch_size=32, epochs=6, validation_split=0.15,
          validation_freq=2, callbacks=[keras.callbacks.LearningRateScheduler(step_decay)])
