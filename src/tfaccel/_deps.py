"""Optional packages and data files: one way to import or read them, one error shape."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from types import ModuleType
from typing import Any

from tfaccel.errors import ConfigFileError, DependencyMissingError


def require(module: str, package: str, what: str) -> ModuleType:
    """Import `module`, or raise DependencyMissingError naming `pip install package`."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise DependencyMissingError(
            f"{what} is not installed",
            expected=f"the {package} package",
            received=str(exc),
            hint=f"pip install {package}",
        ) from exc


def read_json(path: str | Path, expected: str) -> Any:
    """Parse a JSON file (never executed); a path of another type, an unreadable,
    binary, invalid or too deeply nested file is a ConfigFileError."""
    if not isinstance(path, (str, Path)):
        raise ConfigFileError(
            "A file path was expected", expected=expected, received=type(path).__name__
        )
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigFileError(f"Cannot read {file}", expected=expected, received=str(exc)) from exc
    except UnicodeDecodeError as exc:
        raise ConfigFileError(
            f"{file} is not a text file",
            expected=expected,
            received=f"byte {exc.start}: {exc.reason}",
        ) from None
    return parse_json(text, str(file), expected)


def parse_json(text: str, where: str, expected: str) -> Any:
    """JSON text -> value; invalid or too deeply nested text is a ConfigFileError."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigFileError(
            f"{where} is not valid JSON",
            expected=expected,
            received=f"line {exc.lineno}, column {exc.colno}: {exc.msg}",
        ) from exc
    except RecursionError:
        raise ConfigFileError(
            f"{where} is nested too deeply to read", expected=expected, received="deep nesting"
        ) from None
