# Imbalanced classes: class_weight in fit, as keras-io's fraud-detection example does.
import numpy as np
import keras

rng = np.random.default_rng(0)
x = rng.normal(size=(8192, 30)).astype("float32")
w = rng.normal(size=(30,))
y = (x @ w > 2.2).astype("float32")  # about 1.5 % positives
model = keras.Sequential([
    keras.Input((30,)),
    keras.layers.Dense(64, activation="relu"),
    keras.layers.Dropout(0.3),
    keras.layers.Dense(64, activation="relu"),
    keras.layers.Dense(1, activation="sigmoid"),
])
model.compile(keras.optimizers.Adam(1e-2), "binary_crossentropy",
              metrics=[keras.metrics.Precision(), keras.metrics.Recall()])
neg, pos = np.bincount(y.astype(int))
model.fit(x, y, batch_size=256, epochs=10, validation_split=0.2,
          class_weight={0: 1.0 / neg, 1: 1.0 / pos}, verbose=2)
