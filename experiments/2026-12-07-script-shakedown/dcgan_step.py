"""The DCGAN tutorial's shape (TensorFlow's tutorials): a generator and a discriminator
built with tf.keras, one @tf.function step with two GradientTapes and two optimizers,
noise drawn inside the step, the real images its only argument. The "images": 16x16
blobs drawn from a fixed rule (a bright disc at a random place)."""

import time

import numpy as np
import tensorflow as tf

BATCH, NOISE = 64, 32
rng = np.random.default_rng(0)
yy, xx = np.mgrid[:16, :16]
centres = rng.integers(4, 12, size=(6000, 2))
images = np.exp(-((yy - centres[:, :1, None]) ** 2 + (xx - centres[:, 1:, None]) ** 2) / 6.0)
images = (images[..., None] * 2 - 1).astype("float32")
dataset = tf.data.Dataset.from_tensor_slices(images).shuffle(6000).batch(BATCH, drop_remainder=True)

generator = tf.keras.Sequential([
    tf.keras.Input((NOISE,)),
    tf.keras.layers.Dense(4 * 4 * 64, use_bias=False),
    tf.keras.layers.BatchNormalization(),
    tf.keras.layers.LeakyReLU(),
    tf.keras.layers.Reshape((4, 4, 64)),
    tf.keras.layers.Conv2DTranspose(32, 5, strides=2, padding="same", use_bias=False),
    tf.keras.layers.BatchNormalization(),
    tf.keras.layers.LeakyReLU(),
    tf.keras.layers.Conv2DTranspose(1, 5, strides=2, padding="same", activation="tanh"),
])
discriminator = tf.keras.Sequential([
    tf.keras.Input((16, 16, 1)),
    tf.keras.layers.Conv2D(32, 5, strides=2, padding="same"),
    tf.keras.layers.LeakyReLU(),
    tf.keras.layers.Dropout(0.3),
    tf.keras.layers.Conv2D(64, 5, strides=2, padding="same"),
    tf.keras.layers.LeakyReLU(),
    tf.keras.layers.Flatten(),
    tf.keras.layers.Dense(1),
])
cross_entropy = tf.keras.losses.BinaryCrossentropy(from_logits=True)
generator_optimizer = tf.keras.optimizers.Adam(1e-4)
discriminator_optimizer = tf.keras.optimizers.Adam(1e-4)


@tf.function
def train_step(real):
    noise = tf.random.normal([BATCH, NOISE])
    with tf.GradientTape() as gen_tape, tf.GradientTape() as disc_tape:
        fake = generator(noise, training=True)
        real_out = discriminator(real, training=True)
        fake_out = discriminator(fake, training=True)
        gen_loss = cross_entropy(tf.ones_like(fake_out), fake_out)
        disc_loss = (cross_entropy(tf.ones_like(real_out), real_out)
                     + cross_entropy(tf.zeros_like(fake_out), fake_out))
    gen_grads = gen_tape.gradient(gen_loss, generator.trainable_variables)
    disc_grads = disc_tape.gradient(disc_loss, discriminator.trainable_variables)
    generator_optimizer.apply_gradients(zip(gen_grads, generator.trainable_variables))
    discriminator_optimizer.apply_gradients(zip(disc_grads, discriminator.trainable_variables))
    return gen_loss, disc_loss


for epoch in range(5):
    start = time.time()
    for batch in dataset:
        gen_loss, disc_loss = train_step(batch)
    print(f"epoch {epoch + 1}: gen {float(gen_loss):.3f} disc {float(disc_loss):.3f} "
          f"({time.time() - start:.1f} s)")
