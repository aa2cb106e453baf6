# A model built under a distribution strategy's scope, as the multi-GPU guide writes it.
import numpy as np
import tensorflow as tf
import keras

strategy = tf.distribute.MirroredStrategy()
print("replicas:", strategy.num_replicas_in_sync)
rng = np.random.default_rng(0)
x = rng.normal(size=(4096, 20)).astype("float32")
y = (np.sin(x[:, :5]).sum(axis=1) > 0).astype("float32")
with strategy.scope():
    model = keras.Sequential([
        keras.Input((20,)),
        keras.layers.Dense(128, activation="relu"),
        keras.layers.Dense(1, activation="sigmoid"),
    ])
    model.compile("adam", "binary_crossentropy", metrics=["accuracy"])
batch = 64 * strategy.num_replicas_in_sync
ds = tf.data.Dataset.from_tensor_slices((x[:3584], y[:3584])).shuffle(3584).batch(batch)
val = tf.data.Dataset.from_tensor_slices((x[3584:], y[3584:])).batch(batch)
model.fit(ds, epochs=4, validation_data=val)
