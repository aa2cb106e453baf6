"""XProf's own converters (the `xprof` package) turn an XSpace into tool data.

The only module that imports xprof. Each tool returns Google-visualisation tables
(`cols`, `rows`, `p`), read here into plain Python values.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tfaccel._native import native_log
from tfaccel.errors import InputError

TOOLS = (
    "overview_page",
    "input_pipeline_analyzer",
    "framework_op_stats",
    "kernel_stats",
    "memory_profile",
    "trace_viewer",
)


def convert(files: Sequence[Path], tool: str) -> Any:
    """Run one XProf tool on the run's files; raises InputError if the files do not parse.
    XProf's log is kept out of the terminal, and shown in the error when it fails."""
    from tfaccel._deps import require

    raw_to_tool_data = require("xprof.convert.raw_to_tool_data", "xprof", "XProf's converters")
    with native_log() as log:
        data, _ctype = raw_to_tool_data.xspace_to_tool_data([str(path) for path in files], tool, {})
    if data is None:
        lines = [line for line in "".join(log).splitlines() if line.strip()]
        # absl's warnings and errors ("E0000 ...") say why; the INFO lines only what ran
        lines = [line for line in lines if line[:1] in "EWF" and line[1:2].isdigit()] or lines
        raise InputError(
            f"{', '.join(str(path) for path in files)} could not be read",
            expected="complete XSpace protobufs written by TensorFlow's profiler",
            received="a truncated or foreign file (XProf could not parse it)"
            + ("; XProf said: " + " | ".join(lines[-3:]) if lines else ""),
            hint="profile again; do not copy the files while a capture runs",
        )
    if isinstance(data, bytes):
        data = data.decode("utf-8", "replace")
    return json.loads(data) if isinstance(data, str) else data


def table_rows(table: dict[str, Any]) -> list[dict[str, Any]]:
    """A gviz table -> list of {column id: value}."""
    ids = [column.get("id") or column.get("label") for column in table.get("cols", [])]
    out = []
    for row in table.get("rows", []):
        cells = row.get("c", [])
        out.append(
            {
                column_id: (column or {}).get("v")
                for column_id, column in zip(ids, cells, strict=False)
            }
        )
    return out


def number(text: Any) -> float | None:
    """'12.5%' / '3.0' / 4 -> float; '' or None -> None."""
    if text is None or text == "":
        return None
    if isinstance(text, (int, float)):
        return float(text)
    try:
        return float(str(text).strip().rstrip("%"))
    except ValueError:
        return None
