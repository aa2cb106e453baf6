"""Trains one epoch per fit call, in a loop, evaluating in between (a common pattern)."""
import numpy as np
import keras

rng = np.random.default_rng(0)
x = rng.normal(size=(6000, 16)).astype("float32")
w = rng.normal(size=(16, 4))
y = np.argmax(np.tanh(x @ w) + 0.1 * x[:, :4], axis=1)
xv, yv = x[5000:], y[5000:]
x, y = x[:5000], y[:5000]

model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(64, activation="relu"),
                          keras.layers.Dense(4, activation="softmax")])
model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
best = 0.0
for epoch in range(6):
    model.fit(x, y, batch_size=32, epochs=1, verbose=2)
    loss, acc = model.evaluate(xv, yv, verbose=0)
    best = max(best, acc)
    print(f"epoch {epoch}: val_acc {acc:.3f}")
print("best", best)
