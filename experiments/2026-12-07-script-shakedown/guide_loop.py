"""TensorFlow's guide "Writing a training loop from scratch", as written there: a
tf.data pipeline, a GradientTape step in a @tf.function, the optimizer's
apply_gradients, a metric updated in the step and read after each epoch. Labels: a
fixed teacher (the argmax of a random projection)."""
import numpy as np
import tensorflow as tf
import keras

rng = np.random.default_rng(0)
x = rng.normal(size=(20000, 32)).astype("float32")
w = rng.normal(size=(32, 10))
y = np.argmax(np.tanh(x @ w) + 0.1 * x[:, :10], axis=1)
ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(20000).batch(64)

model = keras.Sequential([keras.Input((32,)), keras.layers.Dense(256, activation="relu"),
                          keras.layers.Dense(256, activation="relu"), keras.layers.Dense(10)])
optimizer = keras.optimizers.Adam(1e-3)
loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
acc = keras.metrics.SparseCategoricalAccuracy()


@tf.function
def train_step(xb, yb):
    with tf.GradientTape() as tape:
        logits = model(xb, training=True)
        loss = loss_fn(yb, logits)
    grads = tape.gradient(loss, model.trainable_weights)
    optimizer.apply_gradients(zip(grads, model.trainable_weights))
    acc.update_state(yb, logits)
    return loss


for epoch in range(3):
    for step, (xb, yb) in enumerate(ds):
        loss = train_step(xb, yb)
    print(f"epoch {epoch}: loss {float(loss):.4f} acc {float(acc.result()):.4f}")
    acc.reset_state()
