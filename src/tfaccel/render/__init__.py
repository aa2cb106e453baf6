"""Turning results into text (rich), JSON and markdown. Nothing outside render/ prints."""

from __future__ import annotations

import dataclasses
import enum
import json
import math
from pathlib import Path
from typing import Any


class Format(str, enum.Enum):
    """Output formats every command accepts through `--format`."""

    text = "text"
    json = "json"
    markdown = "markdown"


def to_jsonable(obj: Any) -> Any:
    """Dataclasses, enums, paths, tuples and sets -> plain JSON values (NaN -> None)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    return str(obj)


def dumps(obj: Any, **extra: Any) -> str:
    """JSON text for any result object; `extra` keys are merged at the top level."""
    payload = to_jsonable(obj)
    if extra and isinstance(payload, dict):
        payload = {**extra, **payload}
    return json.dumps(payload, indent=2, sort_keys=False)


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
