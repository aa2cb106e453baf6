"""tfaccel's hook into a user's unmodified script (`tfaccel profile|tune|run|plan --
python train.py`): this folder goes first on the script's PYTHONPATH, so Python runs
this file at start-up.

It installs the hook the environment asks for, then runs the `sitecustomize` the
environment had (the next one on sys.path), so nothing the user's set-up does there is
lost; if that one raises, its traceback is shown and the hook stays. Nothing here
imports Keras or TensorFlow: the hooks wait for the script's own `import keras`. A hook
that fails says so and lets the script run.
"""

import importlib
import importlib.util
import os
import sys
import traceback

_HERE = os.path.dirname(os.path.abspath(__file__))


def _chain() -> None:
    """Import the environment's own sitecustomize, found after this folder. One that
    raises shows its traceback and which file raised; tfaccel's hook, installed
    before it, still applies."""
    ours = sys.modules.pop("sitecustomize", None)
    saved = list(sys.path)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    origin = "?"
    try:
        spec = importlib.util.find_spec("sitecustomize")
        if spec is not None:
            origin = spec.origin or origin
            importlib.import_module("sitecustomize")
    except Exception:
        traceback.print_exc()
        print(
            f"tfaccel: the environment's own sitecustomize ({origin}) raised the error above; "
            "tfaccel's settings still apply",
            file=sys.stderr,
        )
    finally:
        sys.path[:] = saved
        if ours is not None:  # site.py reads it back when this file ends
            sys.modules["sitecustomize"] = ours


def _install() -> None:
    try:
        from tfaccel.trial import protocol  # light: names, no TensorFlow

        if os.environ.get(protocol.SCRIPT_ENV):
            from tfaccel.script.hook import install

            install()
        if os.environ.get(protocol.PROFILE_LOGDIR_ENV):
            from tfaccel.profile.hook import install as install_profile

            install_profile()
        if os.environ.get(protocol.PLAN_ENV):
            from tfaccel.plan.hook import install as install_plan

            install_plan()
    except Exception as exc:  # never break the script it observes
        print(f"tfaccel: could not install its hook: {exc}", file=sys.stderr)


_install()  # first: an environment's sitecustomize that raises leaves it in place
_chain()
