"""The layers of src/tfaccel, checked by walking every module's imports (ast).

ground   errors, _version, _deps, _native, _tf, _compat, _child, stats, results, data
hardware hardware/, environment
engine   optimize/, workloads/ (what a trial applies and runs), then trial/, then
         script/ (a user's script: its command, its source, the hook inside it)
commands doctor/ plan/ tune/ bench/ scale/ profile/ monitor/ (one library each)
render   render/ (nothing else prints)
cli      cli/, __main__ (flags -> one library call -> render -> exit code), and
         script/inject/ (the sitecustomize of a user's script)

A module imports only its own layer or lower ones; commands may use each other's
library where no two of them depend on each other both ways. TensorFlow is imported
only by `_tf.py`, pynvml only by `hardware/nvml.py`.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "tfaccel"

LAYERS: dict[str, int] = {
    **dict.fromkeys(
        ("errors", "_version", "_deps", "_native", "_tf", "_compat", "_child", "stats", "results"),
        0,
    ),
    "data": 0,
    "hardware": 1,
    "environment": 1,
    "optimize": 2,
    "workloads": 2,
    "trial": 3,
    "script": 4,
    **dict.fromkeys(("doctor", "plan", "tune", "bench", "scale", "profile", "monitor"), 5),
    "render": 6,
    "cli": 7,
    "__main__": 7,
    # The sitecustomize a user's script starts with: an entry point of the user's
    # process, as __main__ is of tfaccel's, which installs the script's hook and the
    # profile command's.
    "script.inject": 7,
}
# ConfigureReport.summary() renders itself, so `configure()`'s report prints in a
# notebook without the caller importing render.
SANCTIONED = {("tfaccel.optimize.report", "tfaccel.render.configure")}


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, run_time: bool = False) -> set[str]:
    """Every module `path` imports, at any depth (lazy imports count too); `run_time`:
    not those under `if TYPE_CHECKING:`, which only a type checker runs."""
    out: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    if run_time:
        for block in [n for n in ast.walk(tree) if _type_checking(n)]:
            block.body = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(path, node) if node.level else node.module or ""
            out.add(base)
            # `from tfaccel import data` imports the module tfaccel.data
            out.update(f"{base}.{a.name}" for a in node.names if _is_module(f"{base}.{a.name}"))
    return out


def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and ast.unparse(node.test) in (
        "TYPE_CHECKING",
        "typing.TYPE_CHECKING",
    )


def _absolute(path: Path, node: ast.ImportFrom) -> str:
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    package = package[: len(package) - node.level + 1]
    return ".".join(package + ([node.module] if node.module else []))


def _is_module(name: str) -> bool:
    if not name.startswith("tfaccel."):
        return False
    rel = Path(*name.split(".")[1:])
    return (SRC / rel).with_suffix(".py").exists() or (SRC / rel / "__init__.py").exists()


def _unit(module: str) -> str | None:
    """The layer unit of a tfaccel module: its first name below tfaccel (None: the
    facade, tfaccel/__init__.py, which loads its names lazily)."""
    parts = module.split(".")
    if parts[1:3] == ["script", "inject"]:
        return "script.inject"  # the script package's sitecustomize: an entry point
    return parts[1] if len(parts) > 1 else None


def _graph(run_time: bool = False) -> dict[str, set[str]]:
    return {
        _module_name(p): {
            m for m in _imports(p, run_time) if m == "tfaccel" or m.startswith("tfaccel.")
        }
        for p in sorted(SRC.rglob("*.py"))
    }


def test_every_unit_has_a_layer() -> None:
    units = {_unit(m) for m in _graph()} - {None}
    assert units <= set(LAYERS), f"give these a layer: {sorted(units - set(LAYERS))}"


def test_no_lower_layer_imports_a_higher_one() -> None:
    wrong = []
    for mod, targets in _graph().items():
        unit = _unit(mod)
        if unit is None:
            continue
        for target in targets:
            tunit = _unit(target)
            if tunit is None or (mod, target) in SANCTIONED:
                continue
            if LAYERS[tunit] > LAYERS[unit]:
                wrong.append(f"{mod} -> {target}")
    assert not wrong, "imports from a lower layer to a higher one:\n" + "\n".join(sorted(wrong))


def test_no_two_units_depend_on_each_other() -> None:
    deps: dict[str, set[str]] = defaultdict(set)
    for mod, targets in _graph().items():
        for target in targets:
            a, b = _unit(mod), _unit(target)
            if a and b and a != b and (mod, target) not in SANCTIONED:
                deps[a].add(b)
    both = sorted({tuple(sorted((a, b))) for a in deps for b in deps[a] if a in deps.get(b, ())})
    assert not both, f"two-way dependencies: {both}"


def _reaches(path: Path, library: str) -> bool:
    """Does `path` import `library`, by statement or by a call given its name
    (importlib.import_module("tensorflow"))?"""

    def named(m: object) -> bool:
        return isinstance(m, str) and (m == library or m.startswith(library + "."))

    tree = ast.parse(path.read_text(encoding="utf-8"))
    calls = (
        n.args[0].value
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and _called(n) in ("import_module", "require", "__import__")
        and n.args
        and isinstance(n.args[0], ast.Constant)
    )
    return any(named(m) for m in _imports(path)) or any(named(m) for m in calls)


def _called(call: ast.Call) -> str | None:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None


@pytest.mark.parametrize(
    ("library", "door"), [("tensorflow", "tfaccel._tf"), ("pynvml", "tfaccel.hardware.nvml")]
)
def test_one_door_per_library(library: str, door: str) -> None:
    users = sorted(_module_name(p) for p in SRC.rglob("*.py") if _reaches(p, library))
    assert users == [door]


def test_the_checks_see_a_violation(tmp_path: Path) -> None:
    """The walk finds lazy, relative and `from package import module` imports."""
    assert not {m for m in _imports(SRC / "stats.py") if m.startswith("tfaccel")}
    assert "tfaccel.trial.protocol" in _imports(SRC / "profile" / "run.py")  # from pkg import mod
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from tfaccel import results\n    import tensorflow as tf\n")
    assert {"tfaccel.results", "tensorflow"} <= _imports(probe)


def _bodies() -> list[tuple[str, str, int, bool]]:
    """(module, function, body lines, is a CLI command) for every function in src/."""
    out = []
    for path in SRC.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        commands = {n for n in tree.body if isinstance(n, ast.FunctionDef) and n.decorator_list}
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.body[0].lineno + 1  # type: ignore[operator]
                command = node in commands and _module_name(path).startswith("tfaccel.cli")
                out.append((_module_name(path), node.name, lines, command))
    return out


def test_functions_are_short_enough_to_read_at_once() -> None:
    """Under 100 lines a function body; a command's body (after its option
    declarations) about 60: it validates, calls one library function, renders."""
    long = [f"{m}.{f}: {n}" for m, f, n, command in _bodies() if n >= 100]
    assert not long, long
    commands = [f"{m}.{f}: {n}" for m, f, n, command in _bodies() if command and n > 65]
    assert not commands, commands


# A module or a class past these sizes holds several concerns: split it along its seams
# (`tune` is a package of stages, `optimize.apply` three modules, `doctor.checks` a
# package by section). A named exception needs its reason here.
MODULE_LINES = 650
CLASS_LINES = 400
LARGE: dict[str, str] = {}


def test_modules_and_classes_stay_below_a_ceiling() -> None:
    big = []
    for path in SRC.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        name = _module_name(path)
        if text.count("\n") > MODULE_LINES and name not in LARGE:
            big.append(f"{name}: {text.count(chr(10))} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                size = (node.end_lineno or node.lineno) - node.lineno + 1
                if size > CLASS_LINES and f"{name}.{node.name}" not in LARGE:
                    big.append(f"{name}.{node.name}: {size} lines")
    assert not big, big


# Modules that import a module whose name they compute, and why it is never tfaccel's.
COMPUTED_IMPORTS = {
    "tfaccel._tf": "tensorflow's own submodules (the one door to TensorFlow)",
    "tfaccel._deps": "an optional dependency by its import name",
    "tfaccel.workloads": "the user's entry point, module:function",
    "tfaccel.optimize._patch": "Keras' TensorFlow backend module that a patch replaces in",
}


def _computed_imports(path: Path) -> list[str]:
    """The import_module / __import__ calls of a file whose name is not a literal:
    'tfaccel:<line>' where the name starts with tfaccel, else 'other:<line>'."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.Call) and node.args):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        arg = node.args[0]
        if name not in ("import_module", "__import__") or isinstance(arg, ast.Constant):
            continue
        head = arg.values[0] if isinstance(arg, ast.JoinedStr) and arg.values else None
        ours = isinstance(head, ast.Constant) and str(head.value).startswith("tfaccel")
        out.append(f"{'tfaccel' if ours else 'other'}:{node.lineno}")
    return out


def test_no_tfaccel_module_is_imported_by_a_computed_name() -> None:
    """A module imported by a computed name is invisible to mypy and to the walks
    above: tfaccel's own are imported by name (optimize.patches holds the knobs that
    once were found as tfaccel.optimize.<knob>); other computed imports are named."""
    found = {_module_name(p): _computed_imports(p) for p in SRC.rglob("*.py")}
    ours = {m: c for m, c in found.items() if any(x.startswith("tfaccel") for x in c)}
    assert not ours, ours
    others = {m for m, c in found.items() if c}
    assert others == set(COMPUTED_IMPORTS), others ^ set(COMPUTED_IMPORTS)


def test_the_computed_import_walk_sees_one(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import importlib\nk = 'x'\nimportlib.import_module(f'tfaccel.optimize.{k}')\n"
        "importlib.import_module(k)\nimportlib.import_module('json')\n"
    )
    assert _computed_imports(probe) == ["tfaccel:3", "other:4"]


def _module_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Groups of modules that import each other, directly or around a loop (Tarjan's
    strongly connected components), among the modules of `graph`."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        order[module] = low[module] = len(order)
        stack.append(module)
        for target in graph[module]:
            if target not in order:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], order[target])
        if low[module] == order[module]:
            group = stack[stack.index(module) :]
            del stack[stack.index(module) :]
            if len(group) > 1:
                cycles.append(sorted(group))

    for module in sorted(graph):
        if module not in order:
            visit(module)
    return cycles


def test_no_modules_import_each_other() -> None:
    """No loop of imports between modules, lazy ones included (trial.child and
    trial.parallel were one: what both need is in trial.shared now). A package's
    __init__ is left out: importing a submodule runs it anyway; so are the imports
    under `if TYPE_CHECKING:`, which never run (the report's renderer names its type)."""
    packages = {_module_name(p.parent / "__init__.py") for p in SRC.rglob("__init__.py")}
    graph = {
        m: {t for t in targets if t != m and t not in packages}
        for m, targets in _graph(run_time=True).items()
        if m not in packages
    }
    graph = {m: {t for t in targets if t in graph} for m, targets in graph.items()}
    assert not _module_cycles(graph)


def test_the_cycle_walk_sees_one() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _module_cycles(graph) == [["a", "b", "c"]]


LAYER_NAMES = ("ground", "hardware", "engine (below the commands)", "engine: trials",
               "engine: a user's script", "commands", "render", "cli")  # fmt: skip
LAYOUT = Path(__file__).resolve().parents[1] / "docs" / "reference" / "layout.md"


def _summary(unit: str) -> str:
    """The first paragraph of a unit's docstring (a package's __init__, a module, or
    script/inject's sitecustomize), on one line."""
    folder = SRC.joinpath(*unit.split("."))
    for path in (SRC / f"{unit}.py", folder / "__init__.py", folder / "sitecustomize.py"):
        if path.exists():
            doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
            return " ".join(doc.split("\n\n")[0].split()).replace("|", "\\|")
    return ""


def layout_page() -> str:
    """docs/reference/layout.md, from LAYERS and each unit's docstring."""
    lines = [
        "# Layout of the code",
        "",
        "Generated from the layering test's table (`tests/test_layering.py`) and each",
        "package's docstring; `python tests/test_layering.py > docs/reference/layout.md`",
        "writes it again, and a test checks that it is current.",
        "",
        "A module imports only its own layer or lower ones (lazy imports count), commands",
        "may use each other's library where no two depend on each other both ways, no two",
        "modules import each other, and no tfaccel module is imported by a computed name.",
        "TensorFlow is imported only by `_tf.py`, pynvml only by `hardware/nvml.py`.",
        "",
        "| layer | unit | what it is |",
        "|---|---|---|",
    ]
    for unit, layer in sorted(LAYERS.items(), key=lambda kv: (kv[1], kv[0].lstrip("_"))):
        kind = "/" if SRC.joinpath(*unit.split(".")).is_dir() else ".py"
        shown = unit.replace(".", "/")
        lines.append(f"| {layer} {LAYER_NAMES[layer]} | `{shown}{kind}` | {_summary(unit)} |")
    lines += [
        "",
        "`tests/` mirrors `src/`; markers `gpu` and `multi_gpu` (they skip without a GPU).",
        "Tests build tiny real shared libraries with the machine's C compiler for the",
        "loader's cases, fake NVML at its boundary, and run TensorFlow for real on the CPU.",
        "`benchmarks/results/` holds what was recorded on GPU machines, with the",
        "environment; `experiments/` the dated experiments behind them.",
        *RECIPES,
    ]
    return "\n".join(lines) + "\n"


# The three extensions the layout was cut for: each is one row in a registry, its own
# module and its test (the tests named hold each recipe to it).
RECIPES = (
    "",
    "## Three recipes",
    "",
    "**A knob that replaces a Keras function, with a new hardware need** (five files):",
    "its module `optimize/<knob>.py` (`use`, `in_use`, `count_layers`); its row of",
    "`optimize/patches.py` `PATCHES`; its field and row of `optimize/settings.py` `KNOBS`",
    "(a `TuneTry` naming the need: the late stage, `--skip`, the layer counts and the",
    "progress bar follow it); the need's row of `tune/result.py` `HARDWARE_NEEDS` (a",
    "compute capability too: its row of `hardware/capabilities.py`); and its test",
    "(`tests/tune/test_search.py::test_a_knobs_row_alone_makes_tune_try_it`,",
    "`test_a_new_hardware_need_is_one_row`).",
    "",
    "**A doctor rule for a new CUDA library with a version requirement** (data only):",
    "its row of `data/cuda_libraries.json` (its soname per CUDA major, its wheel, and",
    "`tested_as`: the column of TensorFlow's tested build it is compared with), that",
    "column in `data/tf_cuda_compat.json`'s rows, and its test",
    "(`tests/doctor/test_checks.py::test_a_cuda_library_with_a_version_requirement_is_one_row_of_data`).",
    "",
    "**A built-in benchmark model** (three files): its function in",
    "`workloads/builtin.py` (a `Workload`: model, data, loss, sample unit), its row of",
    "`workloads/__init__.py` `BUILTINS` (entry point, bench batch, revision, `bench all`),",
    "and its test (`tests/bench/test_bench.py::test_a_built_in_model_is_one_row`).",
)


def test_the_layout_page_is_generated_and_current() -> None:
    assert LAYOUT.read_text(encoding="utf-8") == layout_page(), (
        "docs/reference/layout.md is stale: python tests/test_layering.py > "
        "docs/reference/layout.md"
    )


def test_every_unit_says_what_it_is() -> None:
    assert not [u for u in LAYERS if not _summary(u)]


# Folders a module may name by path though they belong to a higher unit: the script
# package puts its sitecustomize (script/inject) first on a user's script's PYTHONPATH.
NAMED_BY_PATH = {("tfaccel.script.run", "script.inject")}


def _path_strings(tree: ast.AST) -> set[str]:
    """The string constants a module builds paths of: the arguments of os.path.join,
    Path(), PurePath() and joinpath, and the operands of `/`."""
    found: set[str] = set()
    for node in ast.walk(tree):
        parts: list[ast.expr] = []
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            parts = list(node.args) if name in ("join", "Path", "PurePath", "joinpath") else []
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            parts = [node.left, node.right]
        found |= {
            p.value for p in parts if isinstance(p, ast.Constant) and isinstance(p.value, str)
        }
    return found


def _units_named_by_path(path: Path) -> set[str]:
    """The tfaccel units whose folders `path` names by path (from its own folder or the
    package's root)."""
    units = set()
    for text in _path_strings(ast.parse(path.read_text(encoding="utf-8"))):
        for base in (path.parent, SRC):
            target = (base / text).resolve()
            if target.is_dir() and SRC in target.parents:
                units.add(_unit(_module_name(target / "__init__.py")) or "")
    return units


def _higher_folders_named(modules: list[tuple[str, Path]]) -> list[str]:
    bad = []
    for module, path in modules:
        own = LAYERS.get(_unit(module) or "", 0)
        for unit in sorted(_units_named_by_path(path)):
            if LAYERS.get(unit, 0) > own and (module, unit) not in NAMED_BY_PATH:
                bad.append(f"{module} names {unit}/ by path")
    return bad


def test_no_module_names_a_higher_units_folder() -> None:
    """What an import would make a layer violation is one by path as well: a module
    that builds the path of a higher unit's folder depends on it (the ground's _child
    once named the script hook's folder)."""
    assert not _higher_folders_named([(_module_name(p), p) for p in sorted(SRC.rglob("*.py"))])


def test_the_path_walk_sees_one(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"  # read as the ground module tfaccel.stats
    probe.write_text('import os\nHOOK = os.path.join(os.path.dirname(__file__), "render")\n')
    assert _higher_folders_named([("tfaccel.stats", probe)]) == [
        "tfaccel.stats names render/ by path"
    ]
    probe.write_text('from pathlib import Path\nHOOK = Path(__file__).parent / "script/inject"\n')
    assert _units_named_by_path(probe) == {"script.inject"}
    assert _higher_folders_named([("tfaccel.render.tune", probe)]) == [
        "tfaccel.render.tune names script.inject/ by path"
    ]


# Bindings of one or two characters, as a share of all: arguments, assignments, loop,
# comprehension and `with`/`except` targets, definitions (`_`, self and cls aside).
# `tf`, `x`, `i` and a paper's letters (attention's q, k, v) are fine; a row called `r`
# is not. The ceiling sits above today's share (about 6 %) to leave room for those.
SHORT_NAMES_MAX = 0.07


def _bindings(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            found.append(node.id)
        elif isinstance(node, ast.arg):
            found.append(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or (
            isinstance(node, ast.ExceptHandler) and node.name
        ):
            found.append(node.name)
    return [name for name in found if name not in ("self", "cls")]


def test_names_say_what_they_hold() -> None:
    names = [name for path in SRC.rglob("*.py") for name in _bindings(ast.parse(path.read_text()))]
    short = [name for name in names if len(name) <= 2 and name != "_"]
    assert len(short) / len(names) < SHORT_NAMES_MAX, (
        f"{len(short)} of {len(names)} bindings have one- or two-letter names"
    )


RESULTS = SRC.parents[1] / "benchmarks" / "results"


def test_results_keep_one_file_per_command_workload_and_gpu() -> None:
    """`benchmarks/results/` keeps the current record of each command, workload and GPU;
    a dated or per-lease variant belongs to the experiment that made it."""
    dated = re.compile(r"\d{4}-\d{2}-\d{2}|-lease")
    variants = [str(p.relative_to(RESULTS)) for p in RESULTS.rglob("*") if dated.search(p.name)]
    assert not variants, f"dated variants, for experiments/: {variants}"


def test_the_results_the_docs_cite_exist() -> None:
    root = SRC.parents[1]
    texts = [root / "README.md", *sorted((root / "docs").rglob("*.md"))]
    cited = {
        m.rstrip(".")
        for t in texts
        for m in re.findall(r"benchmarks/results/[\w./-]+", t.read_text(encoding="utf-8"))
    }
    assert cited, "the docs cite no recorded result"
    assert not [c for c in sorted(cited) if not (root / c).exists()]


if __name__ == "__main__":
    print(layout_page(), end="")
