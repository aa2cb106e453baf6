"""Shared CLI plumbing: consoles, the --format option, and errors -> exit codes."""

from __future__ import annotations

import contextlib
import functools
import math
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup

from tfaccel.errors import ExitCode, TfaccelError, WriteError
from tfaccel.render import Format
from tfaccel.workloads import BUILTIN

F = TypeVar("F", bound=Callable[..., Any])

FORMAT_OPTION = typer.Option(
    Format.text,
    "--format",
    "-f",
    help="Output format: text (rich) or json.",
    case_sensitive=False,
)


WORKLOAD_HELP = (
    f"A built-in workload ({', '.join(BUILTIN)}) or module:function returning a Keras "
    "model (README: the entry-point contract)."
)


def stdout_console() -> Console:
    return Console(soft_wrap=False, highlight=False, emoji=False)


# `tfaccel -q ...`: no progress, status or notes on stderr; results and errors stay.
QUIET = {"on": False}


def stderr_console() -> Console:
    """Progress, status and notes (silent under -q)."""
    return Console(stderr=True, highlight=False, soft_wrap=True, quiet=QUIET["on"], emoji=False)


def _error_console() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)


def error_json(exc: TfaccelError) -> str:
    """The error as the one JSON object a `--format json` command prints on failure."""
    from tfaccel.results import dumps

    error = {
        "problem": exc.problem,
        "expected": exc.expected,
        "received": None if exc.received is None else str(exc.received),
        "hint": exc.hint,
        "kind": type(exc).__name__,
    }
    return dumps({"error": error, "exit_code": int(exc.exit_code)})


def report_error(exc: TfaccelError) -> None:
    err = _error_console()
    err.print(f"[bold red]error:[/] {escape(exc.message)}")
    if exc.hint:
        err.print(f"[dim]hint:[/] {escape(exc.hint)}")


def handle_errors(fn: F) -> F:
    """Map TfaccelError to its exit code and Ctrl-C to 130, with a clean message."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (TfaccelError, OSError) as exc:
            error = WriteError.of(exc) if isinstance(exc, OSError) else exc
            report_error(error)
            if _json_asked(kwargs):  # one JSON object on stdout
                with contextlib.suppress(OSError):  # stdout itself may be what failed
                    write_out(error_json(error))
            raise typer.Exit(int(error.exit_code)) from None
        except KeyboardInterrupt:
            _error_console().print("[yellow]interrupted[/]")
            raise typer.Exit(int(ExitCode.INTERRUPTED)) from None

    return wrapper  # type: ignore[return-value]


def _json_asked(kwargs: dict[str, Any]) -> bool:
    """--format json, given to the command or to a group above it (a command's
    keyword arguments: `fmt`, and `ctx` where it takes its typer.Context)."""
    return group_format(kwargs.get("ctx"), kwargs.get("fmt")) is Format.json


def group_format(ctx: Any, fmt: Any) -> Format:
    """A command's --format: json where it or any group above it asked for json
    (`power --format json set`: the group's flag means the same for each subcommand),
    else its own (text where it has none)."""
    if _is_json(fmt):
        return Format.json
    while ctx is not None:
        if _is_json(ctx.params.get("fmt")):
            return Format.json
        ctx = ctx.parent
    return fmt if isinstance(fmt, Format) else Format.text


def _is_json(fmt: Any) -> bool:
    return getattr(fmt, "value", fmt) == "json"


def int_list(text: str | None, flag: str, example: str) -> list[int] | None:
    """'0,1' -> [0, 1]; None or '' -> None; anything else is an InputError for `flag`."""
    from tfaccel.errors import InputError

    if not text:
        return None
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise InputError(
            f"Cannot read {flag}", expected=f"integers like {example}", received=repr(text)
        ) from exc


# One meaning per GPU flag on every command: --gpu-index picks GPUs as nvidia-smi (NVML)
# numbers them, --gpus counts them; both take one number or a comma list.
GPU_INDEX_HELP = "GPUs as nvidia-smi numbers them: 0, or a list like 0,1"
GPUS_HELP = "GPU counts: 8, or a list like 1,2,4"


def _numbers_flag(least: int, example: str) -> Callable[[str | None], str | None]:
    """The callback of a flag of one number or a comma list, each `least` or more."""

    def check(value: str | None) -> str | None:
        if value is None:
            return None
        try:
            found = [int(x) for x in value.split(",") if x.strip()]
        except ValueError:
            found = []
        if not found or min(found) < least:
            raise typer.BadParameter(
                f"{value!r}: expected integers of {least} or more, like {example}"
            )
        return value

    return check


gpu_index_flag = _numbers_flag(0, "0 or 0,1")
gpus_flag = _numbers_flag(1, "8 or 1,2,4")


def gpu_indices(text: str | None) -> list[int] | None:
    """--gpu-index's GPUs ('0,1' -> [0, 1]), as its callback (gpu_index_flag) let it by."""
    return int_list(text, "--gpu-index", "0,1")


def one_gpu_index(text: str | None, doing: str) -> int:
    """--gpu-index where a command acts on one GPU at a time (`doing`: what it does)."""
    from tfaccel.errors import InputError

    found = gpu_indices(text) or [0]
    if len(found) > 1:
        raise InputError(
            f"{doing} one GPU at a time",
            expected="one index, like --gpu-index 1",
            received=text,
            hint="run the command once per GPU",
        )
    return found[0]


def gpu_counts(text: str | None) -> list[int] | None:
    """--gpus's counts ('1,2' -> [1, 2]), as its callback (gpus_flag) let them by."""
    return int_list(text, "--gpus", "1,2,4")


def name_list(
    text: str, flag: str, what: str, known: list[str], hint: str | None = None
) -> tuple[str, ...]:
    """'a, b' -> ("a", "b"), each one of `known`; an empty list or another name is an
    InputError for `flag` ("Unknown {what} in {flag}", with `hint` if given)."""
    from tfaccel.errors import InputError

    names = tuple(x.strip() for x in text.split(",") if x.strip())
    if not names or set(names) - set(known):
        raise InputError(
            f"Unknown {what} in {flag}",
            expected="a comma-separated list of " + ", ".join(known),
            received=text,
            hint=hint,
        )
    return names


def finite(value: float | None) -> float | None:
    """A float flag's callback: NaN and the infinities are refused (its range, given
    with typer's min/max, shows in --help)."""
    if value is not None and not math.isfinite(value):
        raise typer.BadParameter(f"{value} is not a finite number")
    return value


def positive(value: float | None) -> float | None:
    """A float flag's callback for amounts that must be above zero (seconds, samples)."""
    if finite(value) is not None and value <= 0:  # type: ignore[operator]
        raise typer.BadParameter(f"{value} is not above 0")
    return value


# Every time flag takes one grammar: a bare number is seconds (as `sleep` and `timeout`
# take it), or a number with a unit: 90s, 10m, 1.5h, 2d.
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
DURATION_HELP = "a bare number is seconds; or 90s, 10m, 1.5h, 2d"


def seconds_of(text: str | float | None) -> float | None:
    """A duration flag's value in seconds, above 0; None when not given."""
    if text is None:
        return None
    t = str(text).strip().lower()
    scale = _UNITS.get(t[-1:], 1.0)
    try:
        value = float(t[:-1] if t[-1:] in _UNITS else t) * scale
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise typer.BadParameter(f"{text!r} is not a duration above 0 ({DURATION_HELP})")
    return value


def duration(
    low: float | None = None,
    high: float | None = None,
    bare_below: float | None = None,
) -> Callable[[str | float | None], str | None]:
    """The callback of a duration flag: its value checked (within [low, high] seconds
    where given) and written out in seconds ("10m" -> "600s"), read with seconds_of.
    A bare number below `bare_below` seconds is refused as ambiguous (this flag's bare
    numbers once meant minutes or hours): with a unit, any value is taken."""

    def check(value: str | float | None) -> str | None:
        amount = seconds_of(value)
        if amount is None:
            return None
        bare = str(value).strip()[-1:].isdigit()
        if bare and bare_below is not None and amount < bare_below:
            raise typer.BadParameter(
                f"{value!r} is {amount:g} seconds (a bare number is seconds): "
                f"write {value}s if you mean it, {value}m for minutes"
            )
        if (low is not None and amount < low) or (high is not None and amount > high):
            span = f"{low or 0:g}s to {high:g}s" if high is not None else f"{low:g}s or more"
            raise typer.BadParameter(f"{value!r} is {amount:g} seconds; expected {span}")
        return f"{amount:g}s"

    return check


def json_requested(argv: Sequence[str]) -> bool:
    """Does a command line ask for --format json (any spelling the parser accepts)?"""
    for i, arg in enumerate(argv):
        if arg in ("--format", "-f") and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith("--format="):
            value = arg.split("=", 1)[1]
        elif arg.startswith("-f") and len(arg) > 2 and not arg.startswith("--"):
            value = arg[2:]
        else:
            continue
        if value.lower() == "json":
            return True
    return False


# The parser's usage error (an unknown flag, a value out of its range): click's, or
# the copy of click that newer typers carry.
_UsageError: type[Exception] = next(
    c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError"
)


class Commands(TyperGroup):
    """tfaccel's command group: a usage error is shown as typer shows it, and under
    --format json also written as the one JSON error object on stdout, like every
    other failure."""

    _argv: tuple[str, ...] = ()

    def main(self, args: Sequence[str] | None = None, *rest: Any, **kwargs: Any) -> Any:
        self._argv = tuple(sys.argv[1:] if args is None else args)
        return super().main(args, *rest, **kwargs)

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except _UsageError as exc:
            if json_requested(self._argv):
                write_out(usage_error_json(exc))
            raise


class DefaultSubcommand(TyperGroup):
    """A command with verbs of its own and one verb taken when none is named:
    `tfaccel profile -- python train.py` is `tfaccel profile capture -- ...`, while
    `tfaccel profile analyze LOGDIR` has its own help and refuses options that do not
    apply. Subclasses name the verb in `default`."""

    default = ""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        first = args[0] if args else None
        if first not in self.commands and first not in ctx.help_option_names:
            self._refuse_a_misspelled_verb(ctx, first)
            args = [self.default, *args]
        return list(super().parse_args(ctx, args))

    def _refuse_a_misspelled_verb(self, ctx: Any, word: str | None) -> None:
        """`profile analyse` is a typo of a verb, not a program to run."""
        import difflib

        if not word or word.startswith("-"):
            return
        close = difflib.get_close_matches(word, list(self.commands), 1, cutoff=0.75)
        if close:
            ctx.fail(
                f"No such verb {word!r}: did you mean {close[0]!r}? (a command to run "
                f"goes after --: tfaccel {ctx.info_name} -- {word} ...)"
            )


def default_subcommand(verb: str) -> type[DefaultSubcommand]:
    """The group class whose verb, when none is named, is `verb`."""
    return type(f"Default_{verb}", (DefaultSubcommand,), {"default": verb})


def usage_error_json(exc: Exception) -> str:
    from tfaccel.results import dumps

    error = {
        "problem": exc.format_message(),  # type: ignore[attr-defined]
        "expected": None,
        "received": None,
        "hint": "tfaccel COMMAND --help lists the flags, their choices and ranges",
        "kind": "UsageError",
    }
    return dumps({"error": error, "exit_code": int(ExitCode.USAGE)})


def write_out(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
