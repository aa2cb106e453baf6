"""A TFRecord pipeline as users write one: records written once to ./records, read with
interleave and a parse function, a Normalization layer adapted on a sample,
EarlyStopping(restore_best_weights=True), validation_steps. Labels: a fixed teacher."""

import os

import numpy as np
import tensorflow as tf
from tensorflow import keras

RECORDS = "records"
FEATURES = 12


def teacher(x):
    w = np.linspace(-1.0, 1.0, FEATURES)
    return (np.sin(x @ w) + 0.3 * x[:, 0] * x[:, 1] > 0.0).astype("int64")


def write_records():
    if os.path.isdir(RECORDS):
        return
    os.makedirs(RECORDS)
    rng = np.random.default_rng(0)
    for shard in range(4):
        x = rng.normal(2.0, 3.0, size=(4000, FEATURES)).astype("float32")
        y = teacher((x - 2.0) / 3.0)
        with tf.io.TFRecordWriter(f"{RECORDS}/train-{shard}.tfrecord") as out:
            for xi, yi in zip(x, y):
                ex = tf.train.Example(
                    features=tf.train.Features(
                        feature={
                            "x": tf.train.Feature(float_list=tf.train.FloatList(value=xi)),
                            "y": tf.train.Feature(int64_list=tf.train.Int64List(value=[yi])),
                        }
                    )
                )
                out.write(ex.SerializeToString())


SPEC = {
    "x": tf.io.FixedLenFeature([FEATURES], tf.float32),
    "y": tf.io.FixedLenFeature([1], tf.int64),
}


def parse(record):
    ex = tf.io.parse_single_example(record, SPEC)
    return ex["x"], ex["y"]


def dataset(pattern, shuffle):
    files = tf.data.Dataset.list_files(pattern, shuffle=shuffle, seed=1)
    ds = files.interleave(tf.data.TFRecordDataset, cycle_length=4,
                          num_parallel_calls=tf.data.AUTOTUNE)
    ds = ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE)
    if shuffle:
        ds = ds.shuffle(2048)
    return ds


write_records()
train = dataset(f"{RECORDS}/train-[0-2].tfrecord", True).batch(64).prefetch(tf.data.AUTOTUNE)
val = dataset(f"{RECORDS}/train-3.tfrecord", False).batch(256).repeat()

norm = keras.layers.Normalization()
norm.adapt(train.map(lambda x, y: x).take(20))

model = keras.Sequential([
    keras.Input((FEATURES,)),
    norm,
    keras.layers.Dense(128, activation="relu"),
    keras.layers.Dense(128, activation="relu"),
    keras.layers.Dense(1, activation="sigmoid"),
])
model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="binary_crossentropy",
              metrics=["accuracy"])
model.fit(train, epochs=8, validation_data=val, validation_steps=15,
          callbacks=[keras.callbacks.EarlyStopping(patience=2, restore_best_weights=True)])
