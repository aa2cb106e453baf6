# keras-io's character-level seq2seq shape: fit([encoder_input, decoder_input], target)
# on numpy arrays, a list of two inputs, validation_split.
import numpy as np
import keras

rng = np.random.default_rng(0)
n, t_in, t_out, vocab = 4096, 12, 10, 20
enc = rng.integers(1, vocab, (n, t_in))
target = np.sort(enc[:, :t_out], axis=1)  # the teacher: the first ten tokens, sorted
dec = np.concatenate([np.zeros((n, 1), int), target[:, :-1]], axis=1)  # teacher forcing

enc_in = keras.Input((t_in,), dtype="int32")
dec_in = keras.Input((t_out,), dtype="int32")
embed = keras.layers.Embedding(vocab, 32)
_, h, c = keras.layers.LSTM(64, return_state=True)(embed(enc_in))
seq = keras.layers.LSTM(64, return_sequences=True)(embed(dec_in), initial_state=[h, c])
out = keras.layers.Dense(vocab, activation="softmax")(seq)
model = keras.Model([enc_in, dec_in], out)
model.compile("rmsprop", "sparse_categorical_crossentropy", metrics=["accuracy"])
model.fit([enc, dec], target, batch_size=64, epochs=4, validation_split=0.2)
