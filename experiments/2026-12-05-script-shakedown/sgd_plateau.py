# SGD with Nesterov momentum, tf.data input, ReduceLROnPlateau and EarlyStopping,
# validation data as its own dataset, sample weights in the training dataset.
import numpy as np
import tensorflow as tf
import keras

rng = np.random.default_rng(1)
x = rng.normal(size=(16000, 20)).astype("float32")
teacher = rng.normal(size=(20,))
y = (x @ teacher > 0).astype("float32")
sw = np.where(y > 0, 1.0, 2.0).astype("float32")
train = tf.data.Dataset.from_tensor_slices((x[:14000], y[:14000], sw[:14000])).shuffle(4096).batch(48).prefetch(2)
val = tf.data.Dataset.from_tensor_slices((x[14000:], y[14000:])).batch(256)

model = keras.Sequential([keras.Input((20,)), keras.layers.Dense(64, activation="relu"),
                          keras.layers.BatchNormalization(), keras.layers.Dropout(0.1),
                          keras.layers.Dense(1, activation="sigmoid")])
model.compile(optimizer=keras.optimizers.SGD(0.05, momentum=0.9, nesterov=True),
              loss="binary_crossentropy", metrics=["accuracy"])
model.fit(train, validation_data=val, epochs=6,
          callbacks=[keras.callbacks.ReduceLROnPlateau(patience=1),
                     keras.callbacks.EarlyStopping(patience=2, restore_best_weights=True)])
