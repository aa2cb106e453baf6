"""Shared CLI plumbing: consoles, the --format option, and errors -> exit codes."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from tfaccel.errors import ExitCode, TfaccelError
from tfaccel.render import Format
from tfaccel.workloads import BUILTIN

F = TypeVar("F", bound=Callable[..., Any])

FORMAT_OPTION = typer.Option(
    Format.text,
    "--format",
    "-f",
    help="Output format: text (rich), json, or markdown.",
    case_sensitive=False,
)


WORKLOAD_HELP = (
    f"A built-in workload ({', '.join(BUILTIN)}) or module:function returning a Keras "
    "model (README: the entry-point contract)."
)


def stdout_console() -> Console:
    return Console(soft_wrap=False, highlight=False)


def stderr_console() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


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
    err = stderr_console()
    err.print(f"[bold red]error:[/] {escape(exc.message)}")
    if exc.hint:
        err.print(f"[dim]hint:[/] {escape(exc.hint)}")


def handle_errors(fn: F) -> F:
    """Map TfaccelError to its exit code and Ctrl-C to 130, with a clean message."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except TfaccelError as exc:
            report_error(exc)
            if kwargs.get("fmt") is Format.json:  # machines read stdout: one JSON object
                write_out(error_json(exc))
            raise typer.Exit(int(exc.exit_code)) from None
        except KeyboardInterrupt:
            stderr_console().print("[yellow]interrupted[/]")
            raise typer.Exit(int(ExitCode.INTERRUPTED)) from None

    return wrapper  # type: ignore[return-value]


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


def require_positive(*flags: tuple[str, int | None]) -> None:
    """An InputError for the first (flag, value) whose value is given and below 1."""
    from tfaccel.errors import InputError

    for name, value in flags:
        if value is not None and value < 1:
            raise InputError(f"{name} must be positive", expected="an integer >= 1", received=value)


def operands(args: list[str], count: int, problem: str, usage: str) -> list[str]:
    """The `count` arguments after a verb (`compare A B`), or an InputError showing usage."""
    from tfaccel.errors import InputError

    if len(args) != count + 1:
        raise InputError(problem, expected=usage, received=" ".join(args[1:]) or "nothing")
    return args[1:]


def write_out(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
