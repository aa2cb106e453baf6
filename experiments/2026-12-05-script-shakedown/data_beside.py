# Reads its data from a file beside it (not the working directory), main() with argparse.
import argparse
import os
import numpy as np
import keras


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch", type=int, default=50)
    a = p.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    d = np.load(os.path.join(here, "data", "train.npz"))
    model = keras.Sequential([keras.Input((d["x"].shape[1],)), keras.layers.Dense(32, activation="relu"),
                              keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.01, momentum=0.9), loss="mse")
    model.fit(d["x"], d["y"], batch_size=a.batch, epochs=a.epochs, validation_split=0.1)


if __name__ == "__main__":
    main()
