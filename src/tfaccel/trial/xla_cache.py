"""What a trial's process does so that trials, each a fresh process, load one another's
compiled XLA programs from TensorFlow's persistent cache (`runner.compile_cache_env`
points every trial at one cache directory), and what `tfaccel run` does to load them
too (`load`, where the settings file names that directory: `tune.output.compiled`).

- A trial with XLA options of its own gets a directory of its own
  (`own_executable_cache`): the cache keys an executable by its program, not by XLA's
  flags, so such a trial would load another trial's executable and time that.
- The same program gets the same name in every trial (`steady_names`). TensorFlow
  names a traced function `__inference_<name>_<n>`, `n` drawn from a process-wide
  counter when its trace ends, and the persistent cache keys an executable by that
  name. A race's run of the best trial's settings trains the very program of that
  trial (the same HLO but for the name, on the CPU), but reaches it by another path:
  it evaluates before it trains, so the trace of its train step builds no loss
  trackers and draws fewer numbers, and device prefetch traces functions of its own.
  Each such run compiled the program again, which for a model XLA compiles slowly is
  a large share of a tune's budget (figures on the docs' measurements page). The
  counter only goes up, so Keras' train and test steps are wrapped to move it on to a
  fixed mark for their kind (MARKS) as their trace begins, and TensorFlow's naming to
  move it further, to a fixed name mark, just before it names the function that traced
  the step (the number is drawn as the trace ends, after the outputs' tensors, whose
  count differs with the path). A trace that creates variables is traced again by TensorFlow, so
  only the trace that creates none is named at the mark. The same program then has
  the same names in every process, for about a tenth of a second each. A process
  already past a mark (a script that traced a million functions first) keeps its names
  and compiles as before.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable
from typing import Any

from tfaccel._tf import import_tensorflow, tf_internal

# Where the counter goes as each kind of step is traced: its first trace starts at the
# mark, a second one (after a trace that created variables) a STRIDE on, and the
# function is named two STRIDEs on. A race evaluates the starting weights before it
# trains, so the test step's marks are the lower ones; a trial that evaluates after it
# trained keeps the test step's names as they come.
STRIDE = 1 << 17  # more numbers than a step's trace draws
MARKS = {"test_step": 1 << 20, "train_step": (1 << 20) + 4 * STRIDE}
NAMED = 2 * STRIDE
PATCHED = "_tfaccel_steady_names"
PERSISTENT = "--tf_xla_persistent_cache_directory"  # TensorFlow's flag (TF_XLA_FLAGS)
NAMING = "_inference_name"  # TensorFlow's, in polymorphic_function.concrete_function


def persistent_cache() -> re.Match[str] | None:
    """The persistent XLA cache TF_XLA_FLAGS names (group 1: its directory), if any."""
    return re.search(rf"{PERSISTENT}=(\S+)", os.environ.get("TF_XLA_FLAGS", ""))


def own_executable_cache(options: tuple[str, ...]) -> None:
    """Give a trial with XLA `options` a cache directory of its own, inside the shared
    one named in TF_XLA_FLAGS (nothing where there is none)."""
    found = persistent_cache()
    if not options or not found:
        return
    own = os.path.join(found.group(1), "xla-options-" + "-".join(options))
    os.makedirs(own, exist_ok=True)
    os.environ["TF_XLA_FLAGS"] = os.environ["TF_XLA_FLAGS"].replace(
        found.group(0), f"{PERSISTENT}={own}"
    )


def prepare(options: tuple[str, ...]) -> None:
    """Both, for a trial's process whose XLA options are `options` (the settings'
    `effective_xla_options`); nothing of the names where no persistent cache is set."""
    own_executable_cache(options)
    if persistent_cache() is None:
        return
    try:
        steady_names()
    except (ImportError, AttributeError):  # another Keras: names as they come, as before
        return


def load(folder: str, options: tuple[str, ...]) -> str | None:
    """For `tfaccel run`: the tune's cache folder as this process's persistent XLA cache,
    with the trials' names (`prepare`), so that a program the trials compiled is loaded;
    why not, where TF_XLA_FLAGS names a cache of the user's own (left as it is)."""
    flags = os.environ.get("TF_XLA_FLAGS", "")
    if persistent_cache() is not None:
        return "TF_XLA_FLAGS names a persistent XLA cache of your own: the tune's is not loaded"
    os.environ["TF_XLA_FLAGS"] = f"{flags} {PERSISTENT}={folder}".strip()
    try:
        prepare(options)
    except OSError as exc:  # its folder for these XLA options cannot be made
        os.environ["TF_XLA_FLAGS"] = flags
        return f"the tune's folder cannot be used ({exc.strerror}): XLA compiles as usual"
    return None


def move_counter_to(mark: int) -> None:
    """Draw TensorFlow's function counter (`ops.uid`) up to `mark`; nothing where it is
    past it already."""
    ops = tf_internal("python.framework.ops")
    n = ops.uid()
    while n < mark:
        n = ops.uid()


def steady_names() -> None:
    """Have Keras' TensorFlow trainer wrap each model's steps (`_aligned`) as it makes
    their functions, in this process."""
    from keras.src.backend.tensorflow.trainer import TensorFlowTrainer

    concrete_function = tf_internal("python.eager.polymorphic_function.concrete_function")
    naming = getattr(concrete_function, NAMING, None)
    if naming is None:  # another TensorFlow: names as they come
        return
    if not getattr(naming, PATCHED, False):
        setattr(concrete_function, NAMING, _naming(naming))
    for step, mark in MARKS.items():
        maker = "make_" + step.replace("_step", "_function")
        original = getattr(TensorFlowTrainer, maker)
        if not getattr(original, PATCHED, False):
            setattr(TensorFlowTrainer, maker, _steadied(original, step, mark))


def _steadied(original: Callable[..., Any], step: str, mark: int) -> Callable[..., Any]:
    """`make_train_function` (`make_test_function`) with the model's `step` wrapped
    first: Keras takes the step when it makes the function (3.15) or looks it up when it
    traces (3.6), so the wrapper stays on the model."""

    @functools.wraps(original)
    def make(self: Any, force: bool = False) -> Any:
        current = getattr(self, step)
        if not getattr(current, PATCHED, False):
            object.__setattr__(self, step, _aligned(current, mark))
        return original(self, force)

    setattr(make, PATCHED, True)
    return make


# The function graphs whose trace ran a wrapped step and created no variables, by
# name: where the counter goes before TensorFlow names the function.
_NAMED_AT: dict[str, int] = {}


def _aligned(step: Callable[..., Any], mark: int) -> Callable[..., Any]:
    tf = import_tensorflow()

    @functools.wraps(step)
    def aligned(*args: Any, **kwargs: Any) -> Any:
        if not tf.inside_function():  # run eagerly: nothing is named
            return step(*args, **kwargs)
        move_counter_to(_slot(mark))  # the names drawn inside the trace
        created: list[bool] = []

        def creator(next_creator: Callable[..., Any], **kwargs: Any) -> Any:
            created.append(True)
            return next_creator(**kwargs)

        with tf.variable_creator_scope(creator):
            out = step(*args, **kwargs)
        if not created:  # the trace TensorFlow keeps
            _NAMED_AT.setdefault(tf.compat.v1.get_default_graph().name, mark + NAMED)
        return out

    setattr(aligned, PATCHED, True)
    return aligned


def _slot(mark: int) -> int:
    """Where a step's trace starts: the mark, or a STRIDE on for a trace after it."""
    ops = tf_internal("python.framework.ops")
    return mark if ops.uid() < mark else mark + STRIDE


def _naming(original: Callable[[str], str]) -> Callable[[str], str]:
    """TensorFlow's `_inference_name(n)`, which first moves the counter to where
    `_NAMED_AT` says for a function graph named `n`."""

    @functools.wraps(original)
    def inference_name(n: str) -> str:
        mark = _NAMED_AT.pop(n, None)
        if mark is not None:
            move_counter_to(mark)
        return original(n)

    setattr(inference_name, PATCHED, True)
    return inference_name
