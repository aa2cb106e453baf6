"""MkDocs hook: the configure reference is generated from `Settings` itself (its fields,
their types, defaults and one-line docs), so the docs cannot drift from the code."""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

MARKER = "<!-- settings-table -->"
COMPAT = "<!-- compat-table -->"


def settings_table() -> str:
    from tfaccel.optimize.settings import Settings

    hints = typing.get_type_hints(Settings)
    rows = ["| setting | values | default | what it does |", "|---|---|---|---|"]
    for f in dataclasses.fields(Settings):
        rows.append(
            f"| `{f.name}` | {_values(hints[f.name])} | `{f.default!r}` | "
            f"{f.metadata.get('doc', '')} |"
        )
    return "\n".join(rows)


def _values(hint: Any) -> str:
    args = typing.get_args(hint)
    if typing.get_origin(hint) is typing.Literal:
        return " ".join(f"`{a}`" for a in args)
    if typing.get_origin(hint) is tuple:
        return "a list of names"
    names = [getattr(a, "__name__", str(a)) for a in args] or [getattr(hint, "__name__", str(hint))]
    return " or ".join(n.replace("NoneType", "None") for n in names)


def compat_table() -> str:
    """Each feature's floor, from tfaccel._compat (the tables the code checks)."""
    from tfaccel import _compat

    rows = ["| feature | needs | why |", "|---|---|---|"]
    for flag, (since, why) in _compat.XLA_FLAG_SINCE.items():
        rows.append(f"| XLA flag `{flag}` | TensorFlow {since} | {why} |")
    for (knob, value), (since, what) in _compat.KERAS_FEATURE_SINCE.items():
        rows.append(f"| `{knob}={value!r}` | Keras {since} | {what} |")
    since, what = _compat.KERAS_TUNE_SPE
    rows.append(f"| `tune`'s steps_per_execution trials | Keras {since} | {what} |")
    return "\n".join(rows)


def on_page_markdown(markdown: str, **_: Any) -> str:
    return markdown.replace(MARKER, settings_table()).replace(COMPAT, compat_table())
