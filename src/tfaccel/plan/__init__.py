"""`tfaccel plan`: will a model fit, what batch, how long to train, which set-up."""
