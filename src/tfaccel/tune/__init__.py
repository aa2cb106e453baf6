"""`tfaccel tune`: measure which combination of settings makes a model fastest."""
