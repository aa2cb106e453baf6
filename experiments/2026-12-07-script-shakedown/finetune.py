# Transfer learning as keras-io teaches it: train a head on a frozen base, then unfreeze
# and fine-tune at a lower learning rate (two compiles, two fits).
import numpy as np
import keras

rng = np.random.default_rng(0)
x = rng.normal(size=(2048, 16, 16, 3)).astype("float32")
y = (x[..., 0].mean(axis=(1, 2)) > 0).astype("int32")  # a teacher the base can see

base = keras.Sequential([
    keras.Input((16, 16, 3)),
    keras.layers.Conv2D(16, 3, activation="relu"),
    keras.layers.MaxPooling2D(),
    keras.layers.Conv2D(32, 3, activation="relu"),
    keras.layers.GlobalAveragePooling2D(),
], name="base")
inputs = keras.Input((16, 16, 3))
h = base(inputs, training=False)
h = keras.layers.Dropout(0.2)(h)
outputs = keras.layers.Dense(2, activation="softmax")(h)
model = keras.Model(inputs, outputs)

base.trainable = False
model.compile(keras.optimizers.Adam(1e-3), "sparse_categorical_crossentropy", metrics=["accuracy"])
model.fit(x, y, batch_size=64, epochs=3, validation_split=0.2)

base.trainable = True
model.compile(keras.optimizers.Adam(1e-5), "sparse_categorical_crossentropy", metrics=["accuracy"])
model.fit(x, y, batch_size=64, epochs=3, validation_split=0.2)
model.save("finetuned.keras")
