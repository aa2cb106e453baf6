# Written against tf.keras in TF 2.x style, no `import keras`.
import numpy as np
import tensorflow as tf

rng = np.random.default_rng(4)
x = rng.normal(size=(8000, 10)).astype("float32")
y = (x[:, 0] * x[:, 1] > 0).astype("float32")
model = tf.keras.models.Sequential([
    tf.keras.layers.Dense(32, activation="relu", input_shape=(10,)),
    tf.keras.layers.Dense(1, activation="sigmoid")])
model.compile(optimizer=tf.keras.optimizers.RMSprop(1e-3), loss="binary_crossentropy", metrics=["accuracy"])
model.fit(x, y, epochs=3, validation_split=0.1)
