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


def test_the_dependencies_page_names_each_packages_extra_as_pyproject_does() -> None:
    """A row that names an extra, `(extra `x`)`, names only packages pyproject puts in
    x (keras-hub was once said to be in `tf`; it is in `hub`)."""
    import re
    from importlib.metadata import requires

    root = Path(__file__).resolve().parents[1]
    names: dict[str, set[str]] = {}
    for req in requires("tfaccel") or []:  # pyproject's extras, as installed
        extra = re.search(r"extra == ['\"]([\w-]+)['\"]", req)
        if extra:
            names.setdefault(extra.group(1), set()).add(re.split(r"[\[<>=!; ]", req)[0])
    page = (root / "docs/reference/dependencies.md").read_text()
    checked = 0
    for line in page.splitlines():
        for part in re.findall(r"((?:`[\w\-\[\]]+`(?: \+ |, )?)+) \(extra `([\w-]+)`\)", line):
            packages, extra = part
            for pkg in re.findall(r"`([\w\-]+)", packages):
                assert pkg in names[extra], f"{pkg} is not in the extra {extra!r}"
                checked += 1
    assert checked >= 5
