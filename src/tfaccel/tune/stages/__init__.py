"""The stages of a tune, one module each, as functions of a `TunerCore` and the search's
`State` (their order: `tfaccel.tune.search.STAGES`): `references` (the baseline and
Keras' defaults), `precision` (precisions with and without XLA), `steps` (arrays in GPU
memory, steps_per_execution, input transfers), `late` (XLA's GEMM options, the late
knobs, those that fell short together), `answer` (settled and confirmed) and
`batch_offer` (the ladder and its races)."""
