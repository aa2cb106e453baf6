"""Does steps_per_execution change what Keras trains? One seeded logistic regression
per value, the same data and initial weights; prints each history. Run it under each
Keras (installed beside TensorFlow 2.16.2 with `pip install --no-deps --target DIR
keras==X`, then `PYTHONPATH=DIR python probe.py`): the figures are on the docs'
measurements page ("steps_per_execution on Keras 3.6 trains other batches")."""

import keras
import numpy as np

x = np.random.default_rng(0).random((320, 4)).astype("float32")
y = (x.sum(1) > 2).astype("float32")
for spe in (1, 2, 3, 4, 7, 8, 9):
    keras.utils.set_random_seed(1)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1, activation="sigmoid")])
    model.compile("adam", "binary_crossentropy", steps_per_execution=spe)
    history = model.fit(x, y, batch_size=32, epochs=2, validation_split=0.2, verbose=0)
    losses = {name: [round(v, 6) for v in values] for name, values in history.history.items()}
    print("keras", keras.__version__, "steps_per_execution", spe, losses)
