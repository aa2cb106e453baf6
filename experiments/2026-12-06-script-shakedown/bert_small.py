"""A user's text classifier on a small KerasHub BERT backbone built from its config.

Token ids are random; the label says whether token 7 occurs more often than token 11
in the unpadded part (a fixed teacher function, so there is something to learn).
"""

import keras
import keras_hub
import numpy as np

SEQ = 64
VOCAB = 512
rng = np.random.default_rng(0)


def make(n):
    lengths = rng.integers(16, SEQ + 1, size=n)
    ids = rng.integers(1, VOCAB, size=(n, SEQ))
    mask = np.arange(SEQ)[None, :] < lengths[:, None]
    ids = np.where(mask, ids, 0)
    ids[:, :8] = np.where(rng.random((n, 8)) < 0.5, 7, 11)
    y = ((ids == 7).sum(1) > (ids == 11).sum(1)).astype("float32")
    x = {"token_ids": ids.astype("int32"), "padding_mask": mask, "segment_ids": np.zeros_like(ids, dtype="int32")}
    return x, y


x_train, y_train = make(6000)
x_val, y_val = make(1000)

backbone = keras_hub.models.BertBackbone(
    vocabulary_size=VOCAB, num_layers=2, num_heads=2, hidden_dim=64,
    intermediate_dim=128, max_sequence_length=SEQ,
)
pooled = backbone.output["pooled_output"]
out = keras.layers.Dense(1, activation="sigmoid")(keras.layers.Dropout(0.1)(pooled))
model = keras.Model(backbone.input, out)
model.compile(optimizer=keras.optimizers.AdamW(3e-4), loss="binary_crossentropy", metrics=["accuracy"])
model.fit(x_train, y_train, batch_size=32, epochs=3, validation_data=(x_val, y_val))
print(model.evaluate(x_val, y_val, verbose=0))
