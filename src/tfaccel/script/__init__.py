"""Everything about a user's own training script, unmodified: its command parsed and
its source read before it runs (`command`: the interpreter, the file, the fit calls, its
own compile and dtype choices, its Keras backend), the hook inside its process (`hook`:
the settings applied when it imports Keras, its fit timed or raced, its batch size read
from the data its fit gets; `fit_batch`: the batch a fit trains at under `run`;
`file_caches`: a process ended early leaves no part-written tf.data cache or snapshot
of the script's; `watch`: waiting for the script's own imports), its validation as a
race reads it and a trial times it (`validation`), the sitecustomize it starts with
(`inject`, which chains to the environment's own), and running it (`run`). Used by
`tfaccel run`, `tune --` and `profile --`; above `trial/`, whose timing and protocol
the hook shares, and below the commands."""
