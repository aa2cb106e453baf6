"""`tfaccel bench`: a maintained TensorFlow GPU benchmark suite, against the GPU's peak."""
