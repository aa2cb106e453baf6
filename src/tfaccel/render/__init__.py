"""Turning results into text (rich), JSON and markdown. Nothing outside render/ prints."""

from __future__ import annotations

import enum
from typing import Any

from tfaccel.results import dumps, to_jsonable

__all__ = ["Format", "dumps", "png_base64", "pyplot", "to_jsonable"]


class Format(str, enum.Enum):
    """Output formats every command accepts through `--format`."""

    text = "text"
    json = "json"


class DoctorFormat(str, enum.Enum):
    """The doctor's formats: markdown too, to paste into a bug report."""

    text = "text"
    json = "json"
    markdown = "markdown"


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend: files and inline images, no display."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def png_base64(fig: Any) -> str:
    """`fig` as a base64 PNG for an HTML report's <img src="data:...">; closes it."""
    import base64
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    pyplot().close(fig)
    return base64.b64encode(buf.getvalue()).decode()
