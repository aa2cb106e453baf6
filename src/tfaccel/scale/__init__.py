"""Multi-GPU: TF_CONFIG for multi-worker training, MPS, and scaling measurements."""
