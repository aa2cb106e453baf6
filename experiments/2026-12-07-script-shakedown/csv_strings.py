"""Structured data as users write it: a CSV file read with the csv module, string and number
columns, a dict of inputs, StringLookup + one-hot and Normalization layers inside the
model (adapted on the columns), fit on a tf.data dataset of the dict of columns, a
held-out slice for validation, as keras-io's structured-data examples do. Labels: a
fixed teacher of the columns."""

import csv
import os

import numpy as np
import keras
import tensorflow as tf

CSV = "customers.csv"
CITIES = ["oslo", "lima", "pune", "kobe", "graz", "nice"]
PLANS = ["free", "basic", "pro"]


def write_csv():
    if os.path.exists(CSV):
        return
    rng = np.random.default_rng(0)
    n = 6000
    age = rng.integers(18, 80, n)
    income = rng.lognormal(10, 0.5, n).round(2)
    city = rng.choice(CITIES, n)
    plan = rng.choice(PLANS, n)
    city_w = dict(zip(CITIES, [0.8, -0.6, 0.3, -0.9, 0.5, -0.2]))
    plan_w = {"free": -0.7, "basic": 0.1, "pro": 0.9}
    score = (0.04 * (age - 45) + 1.5 * np.log(income / 22000)
             + np.array([city_w[c] for c in city]) + np.array([plan_w[p] for p in plan]))
    with open(CSV, "w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["age", "income", "city", "plan", "churned"])
        writer.writerows(zip(age, income, city, plan, (score > 0).astype(int)))


write_csv()
with open(CSV, newline="") as f:
    rows = list(csv.DictReader(f))
columns = {
    "age": np.array([float(r["age"]) for r in rows], "float32"),
    "income": np.array([float(r["income"]) for r in rows], "float32"),
    "city": np.array([r["city"] for r in rows], dtype=object),
    "plan": np.array([r["plan"] for r in rows], dtype=object),
}
labels = np.array([int(r["churned"]) for r in rows])

inputs, encoded = {}, []
for name in ("age", "income"):
    inputs[name] = keras.Input((1,), name=name)
    norm = keras.layers.Normalization()
    norm.adapt(columns[name].reshape(-1, 1))
    encoded.append(norm(inputs[name]))
for name in ("city", "plan"):
    inputs[name] = keras.Input((1,), name=name, dtype="string")
    lookup = keras.layers.StringLookup(output_mode="one_hot")
    lookup.adapt(columns[name])
    encoded.append(lookup(inputs[name]))
x = keras.layers.Concatenate()(encoded)
x = keras.layers.Dense(64, activation="relu")(x)
x = keras.layers.Dropout(0.2)(x)
x = keras.layers.Dense(32, activation="relu")(x)
model = keras.Model(inputs, keras.layers.Dense(1, activation="sigmoid")(x))
model.compile("adam", "binary_crossentropy", metrics=["accuracy"])
features = {name: col.reshape(-1, 1) for name, col in columns.items()}
ds = tf.data.Dataset.from_tensor_slices((features, labels))
ds = ds.shuffle(6000, seed=1, reshuffle_each_iteration=False)
train, val = ds.skip(1200).batch(32), ds.take(1200).batch(32)
model.fit(train, validation_data=val, epochs=10)
