"""An image classifier as keras-io's image tutorials write it: PNG files in class
folders (written once to ./shapes), keras.utils.image_dataset_from_directory with a
validation subset, augmentation layers (RandomFlip, RandomRotation, RandomZoom) and
Rescaling inside the model, cache + prefetch on the datasets. The class: a fixed
teacher (which shape is drawn)."""

import os

import numpy as np
import keras
import tensorflow as tf

ROOT, SIZE, CLASSES = "shapes", 48, ("disc", "square", "cross")


def draw(kind, rng):
    img = np.zeros((SIZE, SIZE, 3), "uint8") + rng.integers(0, 60, 3, dtype="uint8")
    c, r = rng.integers(14, 34, 2), rng.integers(6, 12)
    yy, xx = np.mgrid[:SIZE, :SIZE]
    if kind == "disc":
        mask = (yy - c[0]) ** 2 + (xx - c[1]) ** 2 < r * r
    elif kind == "square":
        mask = (abs(yy - c[0]) < r) & (abs(xx - c[1]) < r)
    else:
        mask = ((abs(yy - c[0]) < r) & (abs(xx - c[1]) < 3)) | (
            (abs(xx - c[1]) < r) & (abs(yy - c[0]) < 3))
    img[mask] = rng.integers(140, 255, 3, dtype="uint8")
    return img


if not os.path.isdir(ROOT):
    rng = np.random.default_rng(0)
    for kind in CLASSES:
        os.makedirs(f"{ROOT}/{kind}")
        for i in range(600):
            keras.utils.save_img(f"{ROOT}/{kind}/{i}.png", draw(kind, rng))

train, val = keras.utils.image_dataset_from_directory(
    ROOT, validation_split=0.2, subset="both", seed=1, image_size=(SIZE, SIZE),
    batch_size=32)
train = train.cache().prefetch(tf.data.AUTOTUNE)
val = val.cache().prefetch(tf.data.AUTOTUNE)

model = keras.Sequential([
    keras.Input((SIZE, SIZE, 3)),
    keras.layers.RandomFlip("horizontal"),
    keras.layers.RandomRotation(0.1),
    keras.layers.RandomZoom(0.1),
    keras.layers.Rescaling(1 / 255),
    keras.layers.Conv2D(16, 3, activation="relu"),
    keras.layers.MaxPooling2D(),
    keras.layers.Conv2D(32, 3, activation="relu"),
    keras.layers.MaxPooling2D(),
    keras.layers.GlobalAveragePooling2D(),
    keras.layers.Dense(len(CLASSES)),
])
model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["accuracy"])
model.fit(train, validation_data=val, epochs=10)
