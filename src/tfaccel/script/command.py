"""A user's own training script, unmodified, as what tune times and run runs.

`tfaccel tune -- python train.py --epochs 3` runs the script once per trial, in a fresh
process, with tfaccel's hook (`script.hook`) applying the trial's settings inside it and
timing its first `model.fit`; `tfaccel run --config tfaccel.json -- python train.py`
runs it once with the tuned settings. The command is checked before anything runs:
the interpreter, the script file (or the `-m` module), its syntax, and a Keras backend
other than TensorFlow's chosen in the environment or in the script's own lines.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tfaccel.environment import require_tensorflow_backend
from tfaccel.errors import InputError
from tfaccel.script.hook import POLICY_SETTERS

_PYTHON = re.compile(r"^python(\d+(\.\d+)*)?(\.exe)?$")


# The interpreter's options whose value is the next argument (`python -W ignore x.py`).
_VALUED = ("-W", "-X", "--check-hash-based-pycs")


USAGE = "python SCRIPT.py [ARGS...] or python -m MODULE [ARGS...]"


@dataclass(frozen=True)
class Script:
    """A command that runs a Python training script: `argv` as it runs (this
    interpreter first), `shown` as the user wrote it, the script's file (None for
    `-m module`) and its own arguments."""

    argv: tuple[str, ...]
    shown: tuple[str, ...]
    path: Path | None
    args: tuple[str, ...] = ()  # the script's own arguments (after its file or module)
    fit: int = 1  # which of the fit calls it makes is timed (tune --fit)

    @property
    def name(self) -> str:
        """The script as a workload name (journal keys, reports)."""
        timed = f" (fit call {self.fit})" if self.fit > 1 else ""
        return "script: " + shlex.join(self.shown) + timed


def is_command(args: Sequence[str]) -> bool:
    """Do `args` start a script (python ..., or a .py file) rather than name a workload?"""
    first = args[0] if args else ""
    return first.endswith(".py") or bool(_PYTHON.match(os.path.basename(first)))


def _after_options(args: Sequence[str]) -> list[str]:
    """A python command's arguments after the interpreter's own options (-u, -X dev):
    the script, `-m MODULE` or `-c CODE`, and what follows."""
    rest = list(args[1:])
    while rest and rest[0].startswith("-") and rest[0] not in ("-m", "-c"):
        rest = rest[2 if rest[0] in _VALUED else 1 :]
    return rest


def is_inline(args: Sequence[str]) -> bool:
    """Does a python command run code given on its command line (`python -c CODE`)?"""
    return is_command(args) and _after_options(args)[:1] == ["-c"]


def parse_command(args: Sequence[str]) -> Script:
    """The script `args` runs; InputError for anything but a Python script or module."""
    args = list(args)
    if not args:
        raise InputError("No command to run", expected=USAGE, received="nothing after --")
    if args[0].endswith(".py"):
        args = ["python", *args]
    if not _PYTHON.match(os.path.basename(args[0])):
        raise InputError(
            "tfaccel runs Python training scripts",
            expected=USAGE,
            received=shlex.join(args),
            hint="tfaccel's settings apply inside the Python process that trains; "
            "run the script with python directly",
        )
    rest = _after_options(args)
    if not rest or rest[0] == "-c":
        raise InputError("No script to run", expected=USAGE, received=shlex.join(args))
    path = None
    if rest[0] == "-m":
        if len(rest) < 2:
            raise InputError("-m needs a module", expected=USAGE, received=shlex.join(args))
        _check_module(rest[1], args)
    else:
        path = Path(rest[0])
        if not path.is_file():
            raise InputError(
                f"The script {rest[0]} does not exist",
                expected="a Python file (relative to the current directory)",
                received=str(path.resolve()),
            )
    # This interpreter: it has tfaccel and TensorFlow.
    return Script((sys.executable, *args[1:]), tuple(args), path, tuple(rest[1:]))


def _check_module(name: str, args: Sequence[str]) -> None:
    """Refuse `python -m NAME` where Python would find no top-level package or module
    of that name (from the current folder, as `-m` looks first, or the environment),
    without importing anything."""
    from importlib.machinery import PathFinder

    top = name.split(".")[0]
    if top in sys.builtin_module_names or PathFinder.find_spec(top, [os.getcwd(), *sys.path]):
        return
    raise InputError(
        f"No module named {top}",
        expected="python -m MODULE, a module or package in the current folder or the environment",
        received=shlex.join(args),
    )


@dataclass(frozen=True)
class ScriptFacts:
    """What reading the script (never running it) tells: notes on which `fit` is
    timed and on what the trials replace. Its batch size is not read here: the
    baseline trial reads the batches the timed fit gets (`script.hook`), which a source
    can only suggest (a validation set's `.batch(256)` beside the training set's
    `.batch(48)`, an option given on the command line, a size computed at run time)."""

    notes: tuple[str, ...] = ()
    # what the script chooses itself that each trial replaces ("steps_per_execution=8",
    # "its dtype policy"): tune measures the script as written beside the baseline
    own: tuple[str, ...] = ()
    # TensorFlow's global switches it turns on (SWITCHES), said (among `notes`) by tune
    # and by run
    switches: tuple[str, ...] = ()


def check_script(script: Script) -> ScriptFacts:
    """Refuse, before any trial, what cannot run; what the script's source says."""
    require_tensorflow_backend()
    if script.path is None:
        return ScriptFacts()
    try:
        tree = ast.parse(script.path.read_bytes(), filename=str(script.path))
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", None)
        raise InputError(
            f"{script.path} is not valid Python",
            expected="a script that Python can parse",
            received=f"line {line}: {exc}" if line else str(exc),
        ) from exc
    _refuse_other_backend(script.path, tree)
    _refuse_keras_2(script.path, tree)
    policy = _policy_notes(script.path, tree)
    compile_notes, compile_args = _compile_notes(script.path, tree)
    own = [compile_args] if compile_args else []
    own += ["its dtype policy"] if policy else []
    switches = _switch_notes(script.path, tree)
    notes = _fit_notes(script.path, tree, script.fit) + policy + compile_notes + switches
    return ScriptFacts(tuple(notes), tuple(own), tuple(switches))


DEBUGGING = "a debugging setting that slows each step: remove it where you no longer debug"

# TensorFlow's global switches that change every step, by the name the script calls:
# what each does, and what to do about it. tfaccel leaves them as the script sets them
# (they are the script's), and says so.
SWITCHES = {
    "enable_debug_mode": (
        "tf.data then runs its functions eagerly, one element at a time",
        DEBUGGING,
    ),
    "enable_check_numerics": ("every op's output is then checked for NaN and Inf", DEBUGGING),
    "enable_op_determinism": (
        "ops then run deterministically (on a GPU, cuDNN's deterministic algorithms, often "
        "slower) and Keras compiles no model with XLA",
        "kept for the reproducibility it gives; tfaccel tune measures Keras' defaults "
        "without it beside the baseline, so that what it costs is said",
    ),
}


def _switch_notes(path: Path, tree: ast.AST) -> list[str]:
    """A script that turns on one of TensorFlow's global switches (SWITCHES), a
    debugging one often left over: every trial and `run` keep it, and the note says
    so."""
    notes = []
    for node in ast.walk(tree):
        name = getattr(getattr(node, "func", None), "attr", None)
        if isinstance(node, ast.Call) and name in SWITCHES:
            does, advice = SWITCHES[name]
            notes.append(
                f"{path.name} calls {ast.unparse(node.func)}() (line {node.lineno}): "
                f"{does}, in every trial and under tfaccel run; {advice}"
            )
    return sorted(notes)


def _refuse_other_backend(path: Path, tree: ast.AST) -> None:
    """`os.environ["KERAS_BACKEND"] = "jax"` (or setdefault / putenv) in the script."""
    for node in ast.walk(tree):
        named = _backend_set(node)
        if named is not None and named != "tensorflow":
            raise InputError(
                f"{path.name} selects Keras' {named} backend (line {node.lineno})",  # type: ignore[attr-defined]
                expected="a script on the TensorFlow backend: tfaccel's settings are TensorFlow's",
                received=f"KERAS_BACKEND = {named!r}",
            )


def _refuse_keras_2(path: Path, tree: ast.AST) -> None:
    """A script on Keras 2 (the tf_keras package): tfaccel's hook applies the settings
    through Keras 3's `Model.compile` and `fit`, which such a script never calls."""
    how = None
    for node in ast.walk(tree):
        names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
        names += [node.module or ""] if isinstance(node, ast.ImportFrom) else []
        if any(name.split(".")[0] == "tf_keras" for name in names):
            how = f"it imports tf_keras (line {node.lineno})"  # type: ignore[attr-defined]
            break
    legacy = os.environ.get("TF_USE_LEGACY_KERAS", "").lower() in ("1", "true", "yes")
    if how is None and legacy and _uses_tf_keras(tree):
        how = "TF_USE_LEGACY_KERAS is set, which makes its tf.keras tf_keras"
    if how is not None:
        raise InputError(
            f"{path.name} trains with Keras 2 (tf_keras): {how}",
            expected="a script on Keras 3 (import keras, or tf.keras without "
            "TF_USE_LEGACY_KERAS): tfaccel applies its settings through Keras 3's "
            "Model.compile and fit",
            received=how,
            hint="unset TF_USE_LEGACY_KERAS, or train with Keras 3",
        )


def _uses_tf_keras(tree: ast.AST) -> bool:
    """`tf.keras...`, `from tensorflow import keras` or `import tensorflow.keras`."""
    return any(_tf_keras_node(node) for node in ast.walk(tree))


_TF_NAMES = ("tf", "tensorflow")


def _tf_keras_node(node: ast.AST) -> bool:
    if isinstance(node, ast.Attribute):
        value = node.value
        return node.attr == "keras" and isinstance(value, ast.Name) and value.id in _TF_NAMES
    if isinstance(node, ast.ImportFrom):
        module = node.module or ""
        keras = module == "tensorflow" and any(alias.name == "keras" for alias in node.names)
        return keras or module.startswith("tensorflow.keras")
    if isinstance(node, ast.Import):
        return any(alias.name.startswith("tensorflow.keras") for alias in node.names)
    return False


def _backend_set(node: ast.AST) -> str | None:
    """The backend a statement sets through KERAS_BACKEND, if it does."""
    strings = [const.value for const in ast.walk(node) if isinstance(const, ast.Constant)]
    if "KERAS_BACKEND" not in strings:
        return None
    if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
        return str(node.value.value)
    if isinstance(node, ast.Call) and len(node.args) == 2:
        value = node.args[1]
        return str(value.value) if isinstance(value, ast.Constant) else None
    return None


def _call_lines(tree: ast.AST, method: str = "fit") -> list[int]:
    """The lines of the source's `.fit(` calls (or another `method`'s)."""
    return sorted(
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == method
    )


def _fit_notes(path: Path, tree: ast.AST, timed: int = 1) -> list[str]:
    lines = _call_lines(tree)
    if timed > 1:
        where = f" (its source calls fit at lines {', '.join(map(str, lines))})" if lines else ""
        return [
            f"each trial times fit call {timed} that {path.name} makes{where}; the calls "
            "before it train one step each"
        ]
    loop = _call_lines(tree, "train_on_batch")
    if not lines and loop:
        return [
            f"{path.name} trains with train_on_batch (line {loop[0]}) and has no .fit( call: "
            "each trial times the train_on_batch calls of the model it trains (the first "
            "that makes them, unless another makes more than twice as many), as the "
            "script's loop makes them (its other work between them counted)"
        ]
    step = _call_lines(tree, "apply_gradients")
    if not lines and step:
        return [
            f"{path.name} applies an optimizer's gradients itself (line {step[0]}) and has "
            "no .fit( call: each trial times the calls of its training step (the "
            "tf.function that applies them), as the script's loop makes them"
        ]
    if not lines:
        return [
            f"{path.name} has no .fit( call of its own: the trials time the first "
            "keras.Model.fit the script makes (through the modules it imports)"
        ]
    if len(lines) > 1:
        where = ", ".join(map(str, lines))
        return [
            f"{path.name} calls fit at lines {where}: each trial times the first call made "
            "(--fit N times the N-th)"
        ]
    return []


def _policy_notes(path: Path, tree: ast.AST) -> list[str]:
    """A script that sets its own dtype policy (`set_global_policy("mixed_float16")`):
    the trial's precision replaces it (`script.hook`), as `run`'s tuned one does."""
    lines = sorted(
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and getattr(node.func, "attr", getattr(node.func, "id", "")) in POLICY_SETTERS
    )
    if not lines:
        return []
    return [
        f"{path.name} sets its own dtype policy (line {lines[0]}): each trial's precision "
        "applies instead, as the tuned one does in tfaccel run; the script as written is "
        "measured beside them"
    ]


# compile's arguments that each trial sets (`optimize.report.compile_kwargs`)
TRIAL_COMPILE_ARGS = ("jit_compile", "steps_per_execution")
# between the arguments `ScriptFacts.own` names: written by `_compile_notes`, read back
# by `own_compile_args`
ARGS_SEPARATOR = ", "


def own_compile_args(own: tuple[str, ...]) -> dict[str, str] | None:
    """The script's own compile arguments that `own` (`ScriptFacts.own`) names, each as
    its source writes it ({"jit_compile": "False"}); None where `own` names more than
    them (its dtype policy) or an argument does not read back (a value with a comma)."""
    args = {}
    for choice in own:
        for given in choice.split(ARGS_SEPARATOR):
            name, sep, value = given.partition("=")
            if not sep or name not in TRIAL_COMPILE_ARGS:
                return None
            args[name] = value
    return args


def _compile_notes(path: Path, tree: ast.AST) -> tuple[list[str], str | None]:
    """A script that chooses XLA or steps_per_execution in its own `compile`: each trial
    sets its own (the baseline and Keras' defaults included), as `run` applies the
    tuned ones; said before the trials, so that no figure is read as the script's. The
    note, and the arguments as written."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "compile":
            own = [kw for kw in node.keywords if kw.arg in TRIAL_COMPILE_ARGS]
            if own:
                given = ARGS_SEPARATOR.join(f"{kw.arg}={ast.unparse(kw.value)}" for kw in own)
                note = (
                    f"{path.name} compiles with {given} (line {node.lineno}): each trial "
                    "sets its own, the baseline and Keras' defaults theirs, as tfaccel run "
                    "applies the tuned ones; the script as written is measured beside them "
                    "where it is not the baseline itself"
                )
                return [note], given
    return [], None
