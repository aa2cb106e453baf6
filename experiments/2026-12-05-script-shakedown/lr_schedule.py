# A user's script: MLP, Adam with a cosine-decay schedule, validation_split.
import numpy as np
import keras

rng = np.random.default_rng(0)
x = rng.normal(size=(12000, 32)).astype("float32")
w = rng.normal(size=(32, 4))
y = np.argmax(np.tanh(x @ w) + 0.1 * rng.normal(size=(12000, 4)), axis=1)

model = keras.Sequential([keras.Input((32,)), keras.layers.Dense(128, activation="relu"),
                          keras.layers.Dense(128, activation="relu"), keras.layers.Dense(4)])
schedule = keras.optimizers.schedules.CosineDecay(1e-3, decay_steps=2000)
model.compile(optimizer=keras.optimizers.Adam(schedule),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["accuracy"])
model.fit(x, y, batch_size=64, epochs=4, validation_split=0.1)
