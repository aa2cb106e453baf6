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
            )
            kwargs["callbacks"] = [*list(kwargs.get("callbacks") or []), cb]
            return _fit(self, *args, **kwargs)

        keras.Model.fit = _fit_with_profile
    except Exception as exc:
        import sys

        print(f"tfaccel profile: could not hook keras.Model.fit: {exc}", file=sys.stderr)
