# Structured data as a dict of numpy arrays, named inputs, validation_data as a tuple.
import numpy as np
import keras

rng = np.random.default_rng(0)
n = 8000
age = rng.uniform(18, 90, n).astype("float32")
income = rng.lognormal(10, 1, n).astype("float32")
city = rng.integers(0, 30, n)
y = ((age > 40) ^ (city % 3 == 0)).astype("float32")
x = {"age": age[:, None], "income": np.log(income)[:, None], "city": city[:, None]}
inputs = {
    "age": keras.Input((1,), name="age"),
    "income": keras.Input((1,), name="income"),
    "city": keras.Input((1,), name="city", dtype="int32"),
}
city_vec = keras.layers.Flatten()(keras.layers.Embedding(30, 4)(inputs["city"]))
h = keras.layers.Concatenate()([inputs["age"] / 90.0, inputs["income"] / 10.0, city_vec])
h = keras.layers.Dense(32, activation="relu")(h)
model = keras.Model(inputs, keras.layers.Dense(1, activation="sigmoid")(h))
model.compile(keras.optimizers.SGD(0.1), "binary_crossentropy", metrics=["accuracy"])
split = 6400
train = {k: v[:split] for k, v in x.items()}
val = {k: v[split:] for k, v in x.items()}
model.fit(train, y[:split], batch_size=32, epochs=5, validation_data=(val, y[split:]))
