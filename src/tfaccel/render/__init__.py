"""Turning results into text (rich), JSON and markdown. Nothing outside render/ prints."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Sequence
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


@dataclasses.dataclass(frozen=True)
class Change:
    """One row of a before/after chart: B's value against A's, and the noise band."""

    label: str
    value: float  # a ratio (centre 1) or a change in % (centre 0)
    band: float  # the noise: within centre +- band is no change
    better: bool | None  # None: within the noise


def change_img(rows: Sequence[Change], centre: float, xlabel: str, title: str) -> str:
    """B against A, a bar per row: green better, red worse beyond the noise, grey within
    it, the noise band drawn around `centre`. An <img> for an HTML page ("" without rows)."""
    if not rows:
        return ""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 0.32 * len(rows) + 1.5))
    colors = [_COLOR[change.better] for change in rows]
    ax.barh(range(len(rows)), [change.value for change in rows], color=colors)
    for i, change in enumerate(rows):
        ax.plot(
            [centre - change.band, centre + change.band], [i, i], color="#444444", lw=3, alpha=0.35
        )
    ax.axvline(centre, color="black", lw=0.8)
    ax.set_yticks(range(len(rows)), labels=[change.label for change in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel(f"{xlabel} (green: better beyond the noise, red: worse, grey: within it)")
    ax.set_title(title)
    fig.tight_layout()
    return f"<img alt='B against A' src='data:image/png;base64,{png_base64(fig)}'>"


def before_after_page(
    title: str, before: str, after: str, img: str, table: Sequence[Sequence[str]]
) -> str:
    """A self-contained HTML page: A and B named, the chart, and a table whose first row
    is its header (cells are escaped here)."""
    import html

    def row(cells: Sequence[str], tag: str) -> str:
        return "<tr>" + "".join(f"<{tag}>{html.escape(cell)}</{tag}>" for cell in cells) + "</tr>"

    body = row(table[0], "th") + "".join(row(table_row, "td") for table_row in table[1:])
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>{html.escape(title)}
</title><style>body{{font-family:system-ui,sans-serif;margin:2em}}td,th{{border:1px solid
#ccc;padding:3px 8px}}table{{border-collapse:collapse}}</style></head><body>
<h1>{html.escape(title)}</h1><p>A: {html.escape(before)}<br>B: {html.escape(after)}</p>{img}
<table>{body}</table></body></html>"""


_COLOR = {True: "#2ca02c", False: "#d62728", None: "#999999"}
