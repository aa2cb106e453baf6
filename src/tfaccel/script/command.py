"""A user's own training script, unmodified, as what tune times and run runs.

`tfaccel tune -- python train.py --epochs 3` runs the script once per trial, in a fresh
process, with tfaccel's hook (`script.hook`) applying the trial's settings inside it and
timing its first `model.fit`; `tfaccel run --config tfaccel.json -- python train.py`
runs it once with the tuned settings. The command is checked before anything runs:
the interpreter, the script file, its syntax, and a Keras backend other than
TensorFlow's chosen in the environment or in the script's own lines.
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
from typing import Any

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
    rest = args[1:]
    while rest and rest[0].startswith("-") and rest[0] not in ("-m", "-c"):
        rest = rest[2 if rest[0] in _VALUED else 1 :]  # interpreter options (-u, -X dev)
    if not rest or rest[0] == "-c":
        raise InputError("No script to run", expected=USAGE, received=shlex.join(args))
    path = None
    if rest[0] == "-m":
        if len(rest) < 2:
            raise InputError("-m needs a module", expected=USAGE, received=shlex.join(args))
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


@dataclass(frozen=True)
class ScriptFacts:
    """What reading the script (never running it) tells: notes on which `fit` is
    timed, and the batch size it trains at where its source says so literally."""

    notes: tuple[str, ...] = ()
    batch_size: int | None = None


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
    fits = _fit_lines(tree)
    notes = tuple(_fit_notes(script.path, fits, script.fit) + _policy_notes(script.path, tree))
    if script.fit > 1 or len(fits) > 1:
        # which call a batch_size in the source is for, the source cannot say: the
        # baseline reads the timed call's own
        return ScriptFacts(notes)
    return ScriptFacts(notes, own_batch_size(tree, script.args))


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
    for n in ast.walk(tree):
        names = [a.name for a in n.names] if isinstance(n, ast.Import) else []
        names += [n.module or ""] if isinstance(n, ast.ImportFrom) else []
        if any(name.split(".")[0] == "tf_keras" for name in names):
            how = f"it imports tf_keras (line {n.lineno})"  # type: ignore[attr-defined]
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
    return any(_tf_keras_node(n) for n in ast.walk(tree))


_TF_NAMES = ("tf", "tensorflow")


def _tf_keras_node(n: ast.AST) -> bool:
    if isinstance(n, ast.Attribute):
        value = n.value
        return n.attr == "keras" and isinstance(value, ast.Name) and value.id in _TF_NAMES
    if isinstance(n, ast.ImportFrom):
        module = n.module or ""
        keras = module == "tensorflow" and any(a.name == "keras" for a in n.names)
        return keras or module.startswith("tensorflow.keras")
    if isinstance(n, ast.Import):
        return any(a.name.startswith("tensorflow.keras") for a in n.names)
    return False


def _backend_set(node: ast.AST) -> str | None:
    """The backend a statement sets through KERAS_BACKEND, if it does."""
    strings = [n.value for n in ast.walk(node) if isinstance(n, ast.Constant)]
    if "KERAS_BACKEND" not in strings:
        return None
    if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
        return str(node.value.value)
    if isinstance(node, ast.Call) and len(node.args) == 2:
        value = node.args[1]
        return str(value.value) if isinstance(value, ast.Constant) else None
    return None


def _fit_lines(tree: ast.AST) -> list[int]:
    """The lines of the source's `.fit(` calls."""
    return sorted(
        n.lineno
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "fit"
    )


def _fit_notes(path: Path, lines: list[int], timed: int = 1) -> list[str]:
    if timed > 1:
        at = f" (its source calls fit at lines {', '.join(map(str, lines))})" if lines else ""
        return [
            f"each trial times fit call {timed} that {path.name} makes{at}; the calls "
            "before it train one step each"
        ]
    if not lines:
        return [
            f"{path.name} has no .fit( call of its own: the trials time the first "
            "keras.Model.fit the script makes (through the modules it imports)"
        ]
    if len(lines) > 1:
        at = ", ".join(map(str, lines))
        return [
            f"{path.name} calls fit at lines {at}: each trial times the first call made "
            "(--fit N times the N-th)"
        ]
    return []


def _policy_notes(path: Path, tree: ast.AST) -> list[str]:
    """A script that sets its own dtype policy (`set_global_policy("mixed_float16")`):
    the trial's precision replaces it (`script.hook`), as `run`'s tuned one does."""
    lines = sorted(
        n.lineno
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and getattr(n.func, "attr", getattr(n.func, "id", "")) in POLICY_SETTERS
    )
    if not lines:
        return []
    return [
        f"{path.name} sets its own dtype policy (line {lines[0]}): each trial's precision "
        "applies instead, as the tuned one does in tfaccel run"
    ]


def own_batch_size(tree: ast.AST, args: Sequence[str] = ()) -> int | None:
    """The batch size the script trains at, where its source says it with a number:
    `fit(..., batch_size=128)`, `.batch(64)` or a loader's `batch_size=` (Keras'
    `image_dataset_from_directory`, say), the number written there, assigned
    to the name written there at the top level (`batch_size = 128`), or an option's
    (`args.batch_size`: the value in the script's arguments `args`, else the default
    in its `add_argument` or absl `DEFINE_integer`)."""
    names = {
        t.id: n.value.value
        for n in getattr(tree, "body", [])
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
        for t in n.targets
        if isinstance(t, ast.Name)
    }
    options = _options(tree, names, args)

    def number(node: ast.AST | None) -> int | None:
        value = node.value if isinstance(node, ast.Constant) else None
        if isinstance(node, ast.Name):
            value = names.get(node.id)
        if isinstance(node, ast.Attribute):
            value = options.get(node.attr)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    # fit's own first, then the pipeline's, then a loader's (image_dataset_from_directory)
    found: dict[str, list[int | None]] = {"fit": [], "batch": [], "loader": []}
    for n in ast.walk(tree):
        if not isinstance(n, ast.Call):
            continue
        name = n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", "")
        if name == "batch" and n.args:
            found["batch"].append(number(n.args[0]))
            continue
        sizes = [number(k.value) for k in n.keywords if k.arg == "batch_size"]
        found["fit" if name == "fit" else "loader"] += sizes[:1]
    return next((b for rank in found.values() for b in rank if b and b > 0), None)


def _options(tree: ast.AST, names: dict[str, Any], args: Sequence[str]) -> dict[str, Any]:
    """The script's command-line options, by name: the value given in `args`, else the
    default its source writes (argparse's `add_argument`, absl's `DEFINE_integer`)."""
    found: dict[str, Any] = {}
    for n in ast.walk(tree):
        if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)):
            continue
        strings = [
            a.value for a in n.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
        ]
        keywords = {k.arg: k.value for k in n.keywords if k.arg}
        if n.func.attr == "add_argument":
            flags = strings
            given = keywords.get("dest")
            dest = given.value if isinstance(given, ast.Constant) else _dest(flags)
            default = keywords.get("default")
        elif n.func.attr == "DEFINE_integer" and len(n.args) > 1 and strings:
            dest, flags = strings[0], [f"--{strings[0]}"]
            default = keywords.get("default", n.args[1])
        else:
            continue
        value: Any = _given(flags, args)
        if value is None and isinstance(default, ast.Constant):
            value = default.value
        elif value is None and isinstance(default, ast.Name):
            value = names.get(default.id)
        if isinstance(dest, str):
            found[dest] = value
    return found


def _dest(flags: list[str]) -> str | None:
    """argparse's name for an option: its first long flag's, else its first flag's."""
    first = next((f for f in flags if f.startswith("--")), flags[0] if flags else None)
    return first.lstrip("-").replace("-", "_") if first else None


def _given(flags: list[str], args: Sequence[str]) -> int | None:
    """The integer given for one of `flags` in `args` (`--batch 64` or `--batch=64`)."""
    for i, arg in enumerate(args):
        for flag in (f for f in flags if f.startswith("-")):
            text = args[i + 1] if arg == flag and i + 1 < len(args) else None
            if arg.startswith(flag + "="):
                text = arg[len(flag) + 1 :]
            if text is not None:
                return int(text) if text.lstrip("-").isdigit() else None
    return None
