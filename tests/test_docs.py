"""The documentation: the exit codes page lists every ExitCode, and the configure
reference is generated from every Settings field, each with its documentation."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

from tfaccel.errors import ExitCode
from tfaccel.optimize.settings import Settings

ROOT = Path(__file__).resolve().parents[1]


def test_every_exit_code_is_documented() -> None:
    page = (ROOT / "docs/reference/exit-codes.md").read_text()
    for code in ExitCode:
        assert f"| {int(code)} |" in page, code


def test_every_setting_has_its_documentation_in_the_generated_table() -> None:
    spec = importlib.util.spec_from_file_location("hooks", ROOT / "docs/hooks.py")
    assert spec and spec.loader
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    table = hooks.on_page_markdown(hooks.MARKER)
    for f in dataclasses.fields(Settings):
        assert f.metadata.get("doc"), f.name
        assert f"| `{f.name}` |" in table and f.metadata["doc"] in table
