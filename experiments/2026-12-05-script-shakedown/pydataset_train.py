# A PyDataset of its own for training and validation, class_weight, a model saved at the end.
import math
import numpy as np
import keras

rng = np.random.default_rng(5)
x = rng.normal(size=(6000, 24)).astype("float32")
y = (np.sin(x[:, 0]) + x[:, 1] * x[:, 2] > 0).astype("int32")


class Batches(keras.utils.PyDataset):
    def __init__(self, x, y, batch_size, **kwargs):
        super().__init__(**kwargs)
        self.x, self.y, self.batch_size = x, y, batch_size

    def __len__(self):
        return math.ceil(len(self.x) / self.batch_size)

    def __getitem__(self, i):
        s = slice(i * self.batch_size, (i + 1) * self.batch_size)
        return self.x[s], self.y[s]


model = keras.Sequential([keras.Input((24,)), keras.layers.Dense(64, activation="relu"),
                          keras.layers.Dense(2, activation="softmax")])
model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
model.fit(Batches(x[:5000], y[:5000], 40), validation_data=Batches(x[5000:], y[5000:], 500),
          epochs=4, class_weight={0: 1.0, 1: 1.5})
model.save("model.keras")
