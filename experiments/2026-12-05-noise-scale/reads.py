import numpy as np, keras, tensorflow as tf
import tfaccel.trial.noise_scale as ns
from tfaccel.workloads.inputs import in_batches
rng = np.random.default_rng(2)
x = rng.normal(size=(10000, 16)).astype("float32")
y = (np.sin(x[:, :1] * 2) + x[:, 1:2] ** 2).astype("float32")
keras.utils.set_random_seed(0)
model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(64, activation="gelu"),
                          keras.layers.Dense(64, activation="gelu"), keras.layers.Dense(1)])
model.compile(optimizer="adam", loss="mse")
ex = tf.data.Dataset.from_tensor_slices((x[:8000], y[:8000])).shuffle(8000)
def est(ns_small, ns_big, b=100, big=8):
    s = [ns._norm2(model, e) for e in in_batches(ex, b, True).take(ns_small)]
    g = [ns._norm2(model, e) for e in in_batches(ex, big*b, True).take(ns_big)]
    v = ns.simple_noise_scale(b, big*b, sum(s)/len(s), sum(g)/len(g))
    return None if v is None else round(v, 1)
for cfg in ((4, 4), (16, 4), (32, 8), (64, 10)):
    print(cfg, [est(*cfg) for _ in range(6)], flush=True)
done = 0
for steps in (10, 40, 80):
    model.fit(x[:8000], y[:8000], batch_size=100, epochs=1, steps_per_epoch=steps - done, verbose=0)
    done = steps
    print("after", steps, "steps:", [est(32, 8) for _ in range(4)], "val", round(model.evaluate(x[8000:], y[8000:], verbose=0), 3), flush=True)
