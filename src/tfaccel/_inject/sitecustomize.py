"""tfaccel's hook into a user's unmodified script (`tfaccel profile|tune|run --
python train.py`): this folder goes first on the script's PYTHONPATH, so Python runs
this file at start-up.

It first runs the `sitecustomize` the environment had (the next one on sys.path), so
nothing the user's set-up does there is lost, then installs the hook the environment
asks for. Nothing here imports Keras or TensorFlow: the hooks wait for the script's own
`import keras`. A hook that fails says so and lets the script run.
"""

import importlib
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _chain() -> None:
    """Import the environment's own sitecustomize, found after this folder."""
    ours = sys.modules.pop("sitecustomize", None)
    saved = list(sys.path)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    try:
        importlib.import_module("sitecustomize")
    except ModuleNotFoundError as exc:
        if exc.name != "sitecustomize":
            raise
    finally:
        sys.path[:] = saved
        if ours is not None:  # site.py reads it back when this file ends
            sys.modules["sitecustomize"] = ours


def _install() -> None:
    try:
        if os.environ.get("TFACCEL_SCRIPT"):
            from tfaccel.trial.hook import install

            install()
        if os.environ.get("TFACCEL_PROFILE_LOGDIR"):
            from tfaccel.profile.hook import install as install_profile

            install_profile()
    except Exception as exc:  # never break the script it observes
        print(f"tfaccel: could not install its hook: {exc}", file=sys.stderr)


_chain()
_install()
