"""The text of a CLI result as a user reads it: rich's panel borders and line wraps removed."""

from __future__ import annotations

import re

_BORDER = re.compile(r"[│╭╮╰╯─]")


def unboxed(output: str) -> str:
    return " ".join(_BORDER.sub(" ", output).split())
