"""Loaded by `tfaccel profile -- python train.py` (put first on PYTHONPATH).

It adds tfaccel's ProfileCallback to every `keras.Model.fit` call of an unmodified
script, with the window from TFACCEL_PROFILE_LOGDIR / _START / _STEPS. It never breaks
the user's script: a failure to hook is printed and ignored.
"""

import os

if os.environ.get("TFACCEL_PROFILE_LOGDIR"):
    try:
        import keras

        _fit = keras.Model.fit

        def _fit_with_profile(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            from tfaccel.profile.capture import ProfileCallback

            cb = ProfileCallback(
                os.environ["TFACCEL_PROFILE_LOGDIR"],
                int(os.environ.get("TFACCEL_PROFILE_START", "10")),
                int(os.environ.get("TFACCEL_PROFILE_STEPS", "10")),
                batch_size=_batch_size(args, kwargs),
            )
            kwargs["callbacks"] = [*list(kwargs.get("callbacks") or []), cb]
            return _fit(self, *args, **kwargs)

        def _batch_size(args, kwargs):  # type: ignore[no-untyped-def]
            """Samples per batch, where fit's arguments say it (None if they do not)."""
            try:
                if kwargs.get("batch_size"):
                    return int(kwargs["batch_size"])
                x = args[0] if args else kwargs.get("x")
                spec = getattr(x, "element_spec", None)
                if spec is not None:  # a tf.data.Dataset: its static batch dimension
                    from tfaccel._tf import import_tensorflow

                    tf = import_tensorflow()

                    first = tf.nest.flatten(spec)[0]
                    dim = first.shape[0] if first.shape.rank else None
                    return int(dim) if dim is not None else None
                if hasattr(x, "shape") or isinstance(x, (list, dict)):
                    return 32  # Keras' default for arrays
            except Exception:
                return None
            return None

        keras.Model.fit = _fit_with_profile
    except Exception as exc:
        import sys

        print(f"tfaccel profile: could not hook keras.Model.fit: {exc}", file=sys.stderr)
