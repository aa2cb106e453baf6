"""Bad input and injected faults against every command and the Python API.

Each case is run for real (the CLI in-process through typer's runner, files on disk,
read-only and full filesystems as real tmpfs mounts where this machine allows, random
bytes where a file or library is expected) and classified the way a user would judge
it: a clean error with the documented exit code, or a traceback, a silent acceptance,
a wrong exit code, or work lost (a file the user had that changed). Every case must be
clean; the classification is the assertion message when one is not.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner, Result

from tests.clitext import unboxed
from tfaccel.cli import app
from tfaccel.errors import TfaccelError

runner = CliRunner()

# A command line that reaches each command's checks without other work: its workload
# or operands. Built-in `tiny` runs on a CPU in seconds, but no case gets that far.
BASE: dict[str, list[str]] = {
    "doctor": ["--no-import"],
    "plan": ["tiny"],
    "tune": ["tiny"],
    "monitor": ["--once"],
    "bench run": ["tiny"],
    "scale": ["tiny", "--cpu-replicas", "2"],
    "profile capture": [],
    "power set": [],
    "power reset": [],
    "power sweep": ["--limits", "300"],
}
TAIL: dict[str, list[str]] = {"profile capture": ["--", "python", "-c", "pass"]}
JSON_MODE = {
    "doctor",
    "plan",
    "tune",
    "monitor",
    "bench",
    "scale",
    "profile",
    "power set",
    "power reset",
    "power sweep",
}


@dataclass(frozen=True)
class Case:
    name: str
    argv: list[str]
    code: int
    says: str
    files: dict[str, bytes] = field(default_factory=dict)  # the user's files, kept whole


def classify(result: Result, case: Case, before: dict[Path, bytes]) -> str:
    """clean, traceback, silent, wrong exit code, misleading or work lost."""
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        return f"traceback: {type(result.exception).__name__}: {result.exception}"
    if result.exit_code == 0:
        return "silent: exit 0"
    if result.exit_code != case.code:
        return f"wrong exit code {result.exit_code} (expected {case.code}): {result.output[-300:]}"
    for path, data in before.items():
        if not path.exists() or path.read_bytes() != data:
            return f"work lost: {path} changed"
    if case.says not in unboxed(result.output):
        return f"misleading: {case.says!r} not in {unboxed(result.output)[-300:]!r}"
    return "clean"


def run_case(case: Case, where: Path, json_mode: bool = False) -> str:
    before = {}
    for rel, data in case.files.items():
        path = where / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        before[path] = data
    argv = [a.replace("{tmp}", str(where)) for a in case.argv]
    if json_mode:
        cut = argv.index("--") if "--" in argv else len(argv)
        argv = [*argv[:cut], "--format", "json", *argv[cut:]]
    cwd = os.getcwd()
    os.chdir(where)
    try:
        result = runner.invoke(app, argv)
    finally:
        os.chdir(cwd)
    verdict = classify(result, case, before)
    if verdict == "clean" and json_mode:
        verdict = _json_verdict(result)
    return verdict


def _json_verdict(result: Result) -> str:
    try:
        doc = json.loads(result.stdout)
    except ValueError:
        return f"json mode: stdout is not one JSON object: {result.stdout[:200]!r}"
    ok = isinstance(doc, dict) and doc.get("exit_code") == result.exit_code and doc.get("error")
    return "clean" if ok else f"json mode: no error object with the exit code: {doc!r}"[:300]


# --- 1. numbers out of range, from the parser's own table ------------------------------
def _commands() -> Iterator[tuple[str, Any]]:
    root = typer.main.get_command(app)
    for name, cmd in root.commands.items():  # type: ignore[attr-defined]
        subs = getattr(cmd, "commands", None)
        if subs:
            yield from ((f"{name} {s}", c) for s, c in subs.items())
        else:
            yield name, cmd


def _bad_values(param: Any) -> list[str]:
    lo, hi = getattr(param, "min", None), getattr(param, "max", None)
    check = getattr(param.callback, "__name__", "")
    values: list[str] = []
    if lo is not None:
        values.append(str(lo - (1 if isinstance(lo, int) else 0.5)))
    if hi is not None:
        values.append(str(hi + 1))
    if check == "positive":
        values += ["0", "-1", "nan", "inf"]
    elif check == "finite":
        values += ["nan", "inf", "-inf"]
    elif check in ("seconds", "minutes", "hours"):  # durations: 90s, 10m, 1.5h
        values += ["0", "-1", "nan", "inf", "soon", "10x"]
    return values


def range_cases() -> list[Case]:
    cases = []
    for command, cmd in _commands():
        for param in cmd.params:
            for value in _bad_values(param):
                words = command.split()
                if param.param_type_name == "argument":
                    argv = [*words, *BASE[command], "--", value]
                    flag = param.name
                else:
                    argv = [*words, *BASE[command], param.opts[0], value, *TAIL.get(command, [])]
                    flag = param.opts[0]
                cases.append(Case(f"{command} {flag} {value}", argv, 2, "Invalid value for"))
    return cases


RANGES = range_cases()


@pytest.mark.parametrize("case", RANGES, ids=lambda c: c.name)
def test_a_number_out_of_range(case: Case, tmp_path: Path) -> None:
    assert run_case(case, tmp_path) == "clean"
    assert list(tmp_path.iterdir()) == []  # nothing written, nothing started


@pytest.mark.parametrize(
    "case",
    [c for c in RANGES if c.argv[0] in JSON_MODE or " ".join(c.argv[:2]) in JSON_MODE],
    ids=lambda c: c.name,
)
def test_a_number_out_of_range_in_json_mode(case: Case, tmp_path: Path) -> None:
    assert run_case(case, tmp_path, json_mode=True) == "clean"


# --- 2. words that are not among the choices -------------------------------------------
CHOICES = [
    Case("doctor --format yaml", ["doctor", "--format", "yaml"], 2, "yaml"),
    Case("plan --precision fp7", ["plan", "tiny", "--precision", "fp7"], 2, "fp7"),
    Case("plan --spec unknown spec", ["plan", "tiny", "--spec", "Z9000"], 2, "Z9000"),
    Case("plan --scenario bogus", ["plan", "tiny", "--scenario", "bogus"], 2, "bogus"),
    Case("plan --time-budget bogus", ["plan", "tiny", "--time-budget", "soon"], 2, "soon"),
    Case("tune --precisions fp8", ["tune", "tiny", "--precisions", "fp8"], 2, "fp8"),
    Case("tune --skip float9", ["tune", "tiny", "--skip", "float9"], 2, "float9"),
    Case("tune unknown workload", ["tune", "resnet5O"], 2, "resnet5O"),
    Case("tune entry point module", ["tune", "no_such_module:build"], 2, "no_such_module"),
    Case("bench unknown suite", ["bench", "warp-drive"], 2, "warp-drive"),
    Case("bench --xla-options", ["bench", "tiny", "--xla-options", "turbo"], 2, "turbo"),
    Case("scale --engine warp", [*["scale", *BASE["scale"]], "--engine", "warp"], 2, "warp"),
    Case("scale --all-reduce", [*["scale", *BASE["scale"]], "--all-reduce", "ring"], 2, "ring"),
    Case("scale --input disk", [*["scale", *BASE["scale"]], "--input", "disk"], 2, "disk"),
    Case("scale --precision", [*["scale", *BASE["scale"]], "--precision", "fp7"], 2, "fp7"),
    Case("scale --xla", [*["scale", *BASE["scale"]], "--xla", "maybe"], 2, "maybe"),
    Case("scale --input-cast", [*["scale", *BASE["scale"]], "--input-cast", "x"], 2, "x"),
    Case("scale --gpus words", [*["scale", *BASE["scale"]], "--gpus", "one,two"], 2, "--gpus"),
    Case("scale --workers bad", ["scale", "tiny", "--workers", "host"], 2, "host"),
    Case("monitor --gpu-index words", ["monitor", "--gpu-index", "a,b"], 2, "--gpu-index"),
    Case("monitor --log .txt", ["monitor", "--log", "samples.txt"], 2, ".csv or .jsonl"),
    Case("power sweep --limits words", ["power", "sweep", "--limits", "lots"], 2, "lots"),
    Case("profile gate", ["profile", "analyze", "x", "--fail-under", "speed"], 2, "speed"),
    Case(
        "profile gate nan", ["profile", "analyze", "x", "--fail-under", "utilization=nan"], 2, "nan"
    ),
    Case("profile gate words", ["profile", "analyze", "x", "--fail-over", "input=lots"], 2, "lots"),
    Case("profile diff one", ["profile", "diff", "a"], 2, "Missing argument 'B'"),
    Case("profile no command", ["profile", "--"], 2, "Nothing to profile"),
    Case("profile missing program", ["profile", "--", "no-such-program-x"], 2, "no-such-program-x"),
    Case("run no command", ["run"], 2, ""),
    Case("hw unknown spec", ["hw", "--compare", "Z9000"], 2, "Z9000"),
    Case("unknown flag", ["tune", "tiny", "--turbo"], 2, "--turbo"),
    Case("unknown command", ["accelerate"], 2, "accelerate"),
]


@pytest.mark.parametrize("case", CHOICES, ids=lambda c: c.name)
def test_a_word_that_is_not_a_choice(case: Case, tmp_path: Path) -> None:
    assert run_case(case, tmp_path) == "clean"


# --- 3. files that are not what they should be -----------------------------------------
def _deep() -> bytes:
    return b"[" * 100_000 + b"]" * 100_000


BAD_CONTENT: dict[str, bytes] = {
    "random bytes": os.urandom(2048),
    "deep nesting": _deep(),
    "a JSON list": b"[1, 2, 3]\n",
    "empty": b"",
    "cut short": b'{"schema": "tfaccel.settings/1", "settings": {"precision": ',
    "a string": b'"mixed_bfloat16"\n',
    "wrong types": b'{"schema": "tfaccel.settings/1", "settings": {"cache_dataset": "no"}}\n',
    "a misspelled key": b'{"precison": "float32"}\n',
}
READERS: dict[str, list[str]] = {
    "run --config": ["run", "--config", "bad.json", "--", "python", "-c", "pass"],
    "scale --config": ["scale", "tiny", "--cpu-replicas", "2", "--config", "bad.json"],
    "bench compare": ["bench", "compare", "bad.json", "bad.json"],
}


def file_cases() -> list[Case]:
    cases = []
    for reader, argv in READERS.items():
        for kind, data in BAD_CONTENT.items():
            if reader == "bench compare" and kind in ("wrong types", "a misspelled key"):
                continue  # settings files only
            cases.append(Case(f"{reader}: {kind}", argv, 2, "bad.json", {"bad.json": data}))
        missing = [a if a != "bad.json" else "gone.json" for a in argv]
        cases.append(Case(f"{reader}: missing", missing, 2, "gone.json"))
        folder = [a if a != "bad.json" else "{tmp}" for a in argv]
        cases.append(Case(f"{reader}: a folder", folder, 2, "Cannot read"))
    return cases


@pytest.mark.parametrize("case", file_cases(), ids=lambda c: c.name)
def test_a_file_that_is_not_what_it_should_be(case: Case, tmp_path: Path) -> None:
    assert run_case(case, tmp_path) == "clean"


TRACE = "trace/plugins/profile/2026_01_01_00_00_00/host.xplane.pb"
TRACES = [
    Case(
        "profile: random trace",
        ["profile", "analyze", "trace"],
        2,
        "trace",
        {TRACE: os.urandom(4096)},
    ),
    Case("profile: empty trace", ["profile", "analyze", "trace"], 2, "trace", {TRACE: b""}),
    Case("profile: no trace", ["profile", "analyze", "trace"], 2, "trace", {"trace/x.txt": b"x"}),
    Case("profile: missing logdir", ["profile", "analyze", "nowhere"], 2, "nowhere"),
    Case(
        "profile: --run unknown",
        ["profile", "analyze", "trace", "--run", "r9"],
        2,
        "r9",
        {TRACE: os.urandom(64)},
    ),
]


@pytest.mark.parametrize("case", TRACES, ids=lambda c: c.name)
def test_a_trace_that_cannot_be_read(case: Case, tmp_path: Path) -> None:
    assert run_case(case, tmp_path) == "clean"


# --- 4. the tune journal: poisoned, torn, from elsewhere -------------------------------
def _row(**result: Any) -> bytes:
    row = {"schema": "tfaccel.tune-journal/2", "workload": "tiny", "result": result}
    return json.dumps(row).encode() + b"\n"


JOURNALS: dict[str, tuple[bytes, str]] = {
    "random bytes": (os.urandom(512) + b"\n" + os.urandom(64), "journal"),
    "a line that is not JSON": (b"not json\n" + _row(key="k"), "line 1 is not JSON"),
    "a JSON line that is no object": (b"[1, 2]\n", "not a tfaccel tune journal"),
    "an old schema": (b'{"schema": "tfaccel.tune-journal/1", "result": {}}\n', "another version"),
    "a result of the wrong shape": (_row(key=5, windows=7, losses="x"), "not a trial's result"),
    "an unknown field": (_row(key="k", turbo=True), "not a trial's result"),
    "deep nesting": (_deep() + b"\n" + _row(key="k"), "journal"),
}


@pytest.mark.parametrize("kind", list(JOURNALS), ids=str)
def test_a_poisoned_journal_is_refused_before_any_trial(kind: str, tmp_path: Path) -> None:
    data, says = JOURNALS[kind]
    case = Case(kind, ["tune", "tiny", "--journal", "j.jsonl"], 2, says, {"j.jsonl": data})
    assert run_case(case, tmp_path) == "clean"
    assert not (tmp_path / "tfaccel.json").exists()


def test_a_journal_in_use_by_another_tune_is_refused_before_any_trial(tmp_path: Path) -> None:
    from tfaccel.tune.journal import Journal

    other = Journal(tmp_path / "j.jsonl")
    other.hold()  # as a tune running on it holds it
    try:
        says = f"The journal j.jsonl is in use by pid {os.getpid()}"
        case = Case("journal in use", ["tune", "tiny", "--journal", "j.jsonl"], 2, says)
        assert run_case(case, tmp_path) == "clean"
        assert not (tmp_path / "tfaccel.json").exists()
    finally:
        other.release()
    assert not (tmp_path / "j.jsonl.lock").exists()


def test_a_journal_that_cannot_be_written_is_refused_before_any_trial(tmp_path: Path) -> None:
    """An earlier tune's journal on a file system now read-only: said before the first
    trial, whose result would otherwise be lost."""
    ro = tmp_path / "ro"
    ro.mkdir()
    mount = ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(ro)]
    mounted = subprocess.run(mount, check=False, capture_output=True)
    if mounted.returncode != 0:
        pytest.skip("this machine does not allow tmpfs mounts (not root)")
    try:
        (ro / "j.jsonl").write_bytes(b"")
        subprocess.run(["mount", "-o", "remount,ro", str(ro)], check=True)
        # in a folder that can be written (which the outputs' check looks at), a journal
        # that cannot (as a file of another user's is to a user)
        (tmp_path / "j.jsonl").symlink_to(ro / "j.jsonl")
        argv = ["tune", "tiny", "--journal", "j.jsonl"]
        case = Case("read-only journal", argv, 2, "Cannot write the journal j.jsonl")
        assert run_case(case, tmp_path) == "clean"
    finally:
        subprocess.run(["umount", "-l", str(ro)], check=False)


def _settings(schema: str = "tfaccel.settings/1", **settings: Any) -> bytes:
    return json.dumps({"schema": schema, "settings": settings}).encode()


# A settings file of each wrong kind, refused by `run` before the script starts.
SETTINGS_FILES: dict[str, tuple[bytes, str]] = {
    "another version's": (_settings("tfaccel.settings/9"), "another version of tfaccel"),
    "tune's report": (_settings("tfaccel.tune/1"), "is tune's report"),
    "another report": (_settings("tfaccel.bench/1"), "is not a tfaccel settings file"),
    "weights in bf16": (_settings(precision="bfloat16"), "it is for inference, and run trains"),
    "a batch of 10**9": (_settings(batch_size=10**9), "larger than any training batch"),
    "a boolean as a string": (_settings(device_arrays="false"), "device_arrays must be true"),
    "an unknown knob": (_settings(turbo=True), "unknown settings: turbo"),
}


@pytest.mark.parametrize("kind", list(SETTINGS_FILES), ids=str)
def test_run_refuses_a_settings_file_of_the_wrong_kind_before_the_script(
    kind: str, tmp_path: Path
) -> None:
    data, says = SETTINGS_FILES[kind]
    files = {"t.json": data, "train.py": b"open('ran.txt', 'w').write('it ran')\n"}
    argv = ["run", "--config", "t.json", "--", "python", "train.py"]
    assert run_case(Case(kind, argv, 2, says, files), tmp_path) == "clean"
    assert not (tmp_path / "ran.txt").exists()


def test_run_says_a_16_bit_precision_without_a_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    (tmp_path / "t.json").write_bytes(_settings(precision="mixed_float16"))
    (tmp_path / "train.py").write_text("print('trained')\n")
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["run", "--config", "t.json", "--", "python", "train.py"])
    assert result.exit_code == 0, result.output
    assert "mixed_float16 on a machine without a GPU" in unboxed(result.output)


# --- 5. places that cannot take the output ---------------------------------------------
OUTPUTS: dict[str, list[str]] = {
    "tune --output": ["tune", "tiny", "--output", "{out}"],
    "tune --journal": ["tune", "tiny", "--journal", "{out}"],
    "tune --plot": ["tune", "tiny", "--plot", "{out}"],
    "bench --out": ["bench", "tiny", "--out", "{out}"],
    "bench --html": ["bench", "tiny", "--html", "{out}"],
    "scale --out": ["scale", "tiny", "--cpu-replicas", "2", "--out", "{out}"],
    "scale --plot": ["scale", "tiny", "--cpu-replicas", "2", "--plot", "{out}"],
    "monitor --log": ["monitor", "--once", "--log", "{out}"],
    "profile --html": ["profile", "analyze", "trace", "--html", "{out}"],
    "power sweep --plot": ["power", "sweep", "--limits", "300", "--plot", "{out}"],
}
PLACES: dict[str, tuple[str, str]] = {
    "a read-only folder": ("ro/result.csv", "Cannot write in"),
    "a full disk": ("full/result.csv", "Cannot write in"),
    "a folder that does not exist": ("nowhere/result.csv", "does not exist"),
    "a folder given as the file": ("adir", "it is a folder"),
    "the user's own file": ("mine.csv", "already exists"),
}


@pytest.fixture
def places(tmp_path: Path) -> Iterator[Path]:
    """tmp_path with ro/ (read-only) and full/ (no space left) as real tmpfs mounts."""
    (tmp_path / "adir").mkdir()
    mounts = []
    for name, opts in (("ro", "size=1m,ro"), ("full", "size=64k")):
        (tmp_path / name).mkdir()
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(tmp_path / name)],
            capture_output=True,
            check=False,
        )
        if done.returncode == 0:
            mounts.append(tmp_path / name)
    if (tmp_path / "full").is_mount():
        filler = tmp_path / "full/filler"
        with filler.open("wb") as fh, pytest.raises(OSError):
            fh.write(b"\0" * (1 << 20))
    yield tmp_path
    for m in mounts:
        subprocess.run(["umount", "-l", str(m)], check=False)


@pytest.mark.parametrize("json_mode", [False, True], ids=["text", "json"])
@pytest.mark.parametrize("place", list(PLACES), ids=str)
@pytest.mark.parametrize("output", list(OUTPUTS), ids=str)
def test_an_output_place_is_checked_before_the_work(
    output: str, place: str, json_mode: bool, places: Path
) -> None:
    """In text and in JSON mode alike: checked before any work, one object in JSON."""
    rel, says = PLACES[place]
    folder = rel.split("/")[0]
    if folder in ("ro", "full") and not (places / folder).is_mount():
        pytest.skip("this machine does not allow tmpfs mounts (not root)")
    if output in ("tune --journal", "monitor --log") and place == "the user's own file":
        pytest.skip("appended to by design: covered by the journal cases")
    suffix = {"--log": ".csv", "--journal": ".jsonl", "--out": ".json"}.get(output.split()[-1])
    rel = rel.replace(".csv", suffix or ".png") if "." in rel else rel
    files = (
        {"mine" + (suffix or ".png"): b"the user's own results"} if rel.startswith("mine") else {}
    )
    argv = [a.replace("{out}", rel) for a in OUTPUTS[output]]
    case = Case(f"{output} {place}", argv, 2, says, files)
    assert run_case(case, places, json_mode=json_mode) == "clean"


# --- 6. the Python API -----------------------------------------------------------------
def _api_cases() -> list[tuple[str, Callable[[Path], Any], str]]:
    import tfaccel

    def from_file(data: bytes) -> Callable[[Path], Any]:
        def go(tmp: Path) -> Any:
            (tmp / "t.json").write_bytes(data)
            return tfaccel.configure.from_file(tmp / "t.json")

        return go

    cases: list[tuple[str, Callable[[Path], Any], str]] = [
        ("configure('float32')", lambda t: tfaccel.configure("float32"), "Settings object"),
        ("configure(5)", lambda t: tfaccel.configure(5), "Settings object"),
        ("configure(precison=...)", lambda t: tfaccel.configure(precison="float32"), "precision"),
        ("configure(precision='fp7')", lambda t: tfaccel.configure(precision="fp7"), "fp7"),
        ("configure(batch_size=0)", lambda t: tfaccel.configure(batch_size=0), "batch_size"),
        ("configure(batch_size=True)", lambda t: tfaccel.configure(batch_size=True), "batch_size"),
        ("configure(xla_options='x')", lambda t: tfaccel.configure(xla_options="x"), "xla_options"),
        (
            "configure(memory_limit_mib=-5)",
            lambda t: tfaccel.configure(memory_limit_mib=-5),
            "memory_limit_mib",
        ),
        (
            "configure(oversubscription=nan)",
            lambda t: tfaccel.configure(unified_oversubscription=math.nan),
            "unified_oversubscription",
        ),
        ("from_file(5)", lambda t: tfaccel.configure.from_file(5), "file path"),
        ("from_file(None)", lambda t: tfaccel.configure.from_file(None), "file path"),
        ("from_file(missing)", lambda t: tfaccel.configure.from_file(t / "no.json"), "no.json"),
        ("from_file(folder)", lambda t: tfaccel.configure.from_file(t), "Cannot read"),
    ]
    cases += [(f"from_file({k})", from_file(v), "t.json") for k, v in BAD_CONTENT.items()]
    return cases


API = _api_cases()


@pytest.mark.parametrize(("name", "call", "says"), API, ids=[c[0] for c in API])
def test_the_python_api_refuses_bad_input_cleanly(
    name: str, call: Callable[[Path], Any], says: str, tmp_path: Path
) -> None:
    with pytest.raises(TfaccelError) as caught:
        call(tmp_path)
    assert says in str(caught.value)


# --- 7. the environment -----------------------------------------------------------------
def test_stdout_on_a_full_device_is_a_clean_error() -> None:
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [sys.executable, "-m", "tfaccel", "hw", "--list-specs", "--format", "json"],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            check=False,
        )
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "No space left on device" in proc.stderr


@pytest.mark.parametrize("value", ["banana,-7", "0,0", "-1", "gpu0", "0,banana"])
def test_a_nonsense_cuda_visible_devices_is_not_rated_ok(value: str) -> None:
    from tfaccel.doctor.checks import check_visible_devices
    from tfaccel.doctor.context import DoctorContext

    rows = check_visible_devices(DoctorContext(env={"CUDA_VISIBLE_DEVICES": value}))
    assert rows and rows[0].status.value in ("warn", "fail"), rows


# Each verb of `power`, failing on a machine without NVML (or without --yes): one JSON
# object on stdout, whether --format json is the verb's or the group's.
POWER_VERBS = [
    ["power"],
    ["power", "show"],
    ["power", "set", "300", "--yes"],
    ["power", "reset", "--yes"],
    ["power", "sweep", "--limits", "300", "--yes"],
    ["power", "sweep", "--limits", "300"],
]


@pytest.mark.parametrize("where", ["verb", "group"])
@pytest.mark.parametrize("argv", POWER_VERBS, ids=" ".join)
def test_every_power_verb_fails_as_one_json_object(argv: list[str], where: str) -> None:
    from tfaccel.hardware.nvml import driver_info

    if driver_info().gpus:
        pytest.skip("a machine with an NVIDIA GPU: these verbs would work (or change it)")
    flag = ["--format", "json"]
    full = [*argv, *flag] if where == "verb" else [argv[0], *flag, *argv[1:]]
    result = runner.invoke(app, full)
    assert result.exit_code in (2, 4), result.output
    doc = json.loads(result.stdout)
    assert doc["exit_code"] == result.exit_code and doc["error"]["problem"]


# --- 8. an unprivileged user ------------------------------------------------------------
def _as_nobody(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """tfaccel as uid/gid 65534 (a real unprivileged process: root bypasses permissions)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "HOME": str(cwd)}
    return subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
         sys.executable, "-m", "tfaccel", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


UNPRIVILEGED = [
    (["power", "set", "300", "--yes"], {4, 2}, "root"),
    (["power", "reset", "--yes"], {4, 2}, "root"),
    (["tune", "tiny", "--output", "{root}/t.json"], {2}, "Permission denied"),
    (["bench", "tiny", "--out", "{root}/b.json"], {2}, "Permission denied"),
    (["monitor", "--once", "--log", "{root}/m.csv"], {2}, "Permission denied"),
]


@pytest.mark.parametrize(("args", "codes", "says"), UNPRIVILEGED, ids=lambda x: str(x))
def test_an_unprivileged_user_gets_a_clean_refusal(
    args: list[str], codes: set[int], says: str, tmp_path: Path
) -> None:
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root to become an unprivileged user (setpriv)")
    home = Path(tempfile.mkdtemp(prefix="tfaccel-nobody-"))  # pytest's tmp is root-only
    try:
        home.chmod(0o777)
        root_only = home / "root-only"
        root_only.mkdir(mode=0o700)
        proc = _as_nobody([a.replace("{root}", str(root_only)) for a in args], home)
        left = list(root_only.iterdir())
    finally:
        shutil.rmtree(home, ignore_errors=True)
    if "No module named" in proc.stderr or "Permission denied: '/" in proc.stderr[:300]:
        pytest.skip("this checkout is not readable by other users")
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.returncode in codes, (proc.returncode, proc.stderr[-800:])
    assert says in proc.stderr
    assert left == []


def test_what_the_user_typed_is_shown_as_typed_and_a_missing_module_has_no_traceback(
    tmp_path: Path,
) -> None:
    """'a:b:c' is no emoji code to rich, and a module that is not there gets its
    message alone: the import machinery's frames are nobody's code."""
    case = Case("a:b:c", ["tune", "a:b:c"], 2, "of entry point 'a:b:c'")
    assert run_case(case, tmp_path) == "clean"
    result = runner.invoke(app, ["tune", "a:b:c", "--output", str(tmp_path / "o.json")])
    assert "Traceback" not in result.output


def test_a_module_that_fails_to_import_shows_the_users_line(tmp_path: Path) -> None:
    (tmp_path / "badmod.py").write_text("import nonexistent_pkg_x\n")
    case = Case("bad import", ["tune", "badmod:build"], 2, 'badmod.py", line 1, in <module>')
    assert run_case(case, tmp_path) == "clean"


def test_a_misspelled_verb_gets_a_suggestion_not_a_program_run(tmp_path: Path) -> None:
    case = Case("profile analyse", ["profile", "analyse", "logs"], 2, "did you mean 'analyze'?")
    assert run_case(case, tmp_path) == "clean"


# One entry point's fault, one exit code, whichever command meets it first.
BAD_ENTRY_POINTS = {  # (the entry point's module, what the message says)
    "an input of unknown length, no data": (
        "import keras\ndef build():\n    i = keras.Input((None, 8))\n"
        "    m = keras.Model(i, keras.layers.Dense(1)(keras.layers.GlobalAveragePooling1D()(i)))\n"
        "    m.compile(optimizer='adam', loss='mse')\n    return m\n",
        "has an unknown dimension",
    ),
    "exits by itself": ("import sys\ndef build():\n    sys.exit(3)\n", "mymod:build"),
    "an unknown optimizer": (
        "import keras\ndef build():\n"
        "    m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])\n"
        "    m.compile(optimizer='adamx', loss='mse')\n    return m\n",
        "mymod:build",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(BAD_ENTRY_POINTS), ids=str)
def test_a_bad_entry_point_gets_one_exit_code_in_plan_and_tune(kind: str, tmp_path: Path) -> None:
    source, says = BAD_ENTRY_POINTS[kind]
    files = {"mymod.py": source.encode()}
    for argv in (["plan", "mymod:build", "--spec", "H200"], ["tune", "mymod:build"]):
        case = Case(f"{argv[0]} {kind}", argv, 2, says, files)
        assert run_case(case, tmp_path) == "clean", argv[0]


def test_plan_without_a_gpu_names_the_spec_alternative() -> None:
    from tfaccel.hardware.nvml import driver_info

    if driver_info().gpus:
        pytest.skip("a machine with an NVIDIA GPU plans for it")
    result = runner.invoke(app, ["plan", "tiny", "--batch", "256"])
    assert result.exit_code != 0 and "tfaccel plan MODEL --spec H200" in unboxed(result.output)


MYMOD = (
    b"import keras\ndef build():\n"
    b"    return keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])\n"
)


def test_tune_checks_its_outputs_before_the_entry_point(tmp_path: Path) -> None:
    """The user's file is said at once, not after seconds of importing the target."""
    files = {"mymod.py": MYMOD, "mine.json": b"{}"}
    case = Case(
        "mine", ["tune", "mymod:build", "--output", "mine.json"], 2, "already exists", files
    )
    start = time.perf_counter()
    assert run_case(case, tmp_path) == "clean"
    assert time.perf_counter() - start < 3  # no child, no TensorFlow


def test_a_misspelled_function_gets_a_close_match(tmp_path: Path) -> None:
    case = Case("buld", ["tune", "mymod:buld"], 2, "did you mean mymod:build?", {"mymod.py": MYMOD})
    assert run_case(case, tmp_path) == "clean"


def test_the_journal_follows_the_output() -> None:
    from tfaccel.tune import Outputs

    assert Outputs().journal_path == Path("tfaccel-tune.jsonl")  # as before
    assert Outputs(Path("mymod.json")).journal_path == Path("mymod-tune.jsonl")
    assert Outputs(Path("a.json"), journal=Path("j.jsonl")).journal_path == Path("j.jsonl")


def _commands(group: Any, path: str = "") -> list[tuple[str, Any]]:
    """Every command of the CLI, by its path ('tune', 'bench run', ...)."""
    out = []
    for name, cmd in getattr(group, "commands", {}).items():
        full = f"{path} {name}".strip()
        out.append((full, cmd))
        out += _commands(cmd, full)
    return out


def test_one_flag_name_for_one_meaning_across_commands() -> None:
    """An output file is --output, -o or --out in every command that writes one."""
    import typer.main

    root = typer.main.get_command(app)
    outputs = [
        (name, set(p.opts))
        for name, cmd in _commands(root)
        for p in getattr(cmd, "params", [])
        if "--output" in p.opts
    ]
    assert len(outputs) >= 3
    for name, opts in outputs:
        assert {"--output", "-o", "--out"} <= opts, (name, opts)


def test_profile_in_a_read_only_folder_is_refused_before_the_run(places: Path) -> None:
    """The default trace folder cannot be made: said as bad input (exit 2) before the
    script runs, not as a failed write afterwards with a tune's hint."""
    if not (places / "ro").is_mount():
        pytest.skip("this machine does not allow tmpfs mounts (not root)")
    (places / "noop.py").write_text("pass\n")  # beside the read-only folder
    argv = ["profile", "--", "python", str(places / "noop.py")]
    case = Case("profile in ro", argv, 2, "Cannot write in")
    assert run_case(case, places / "ro") == "clean"


def test_a_negative_power_limit_is_a_bad_value_not_an_unknown_option() -> None:
    result = runner.invoke(app, ["power", "set", "-5", "--yes"])
    assert result.exit_code == 2 and "-5.0 is not above 0" in unboxed(result.output)


# --- the JSON contract over every failure above ---------------------------------------
def _in_json_mode(case: Case) -> bool:
    """A case of a command with --format json, that does not pass --format itself."""
    head = {case.argv[0], " ".join(case.argv[:2])}
    return bool(head & JSON_MODE) and "--format" not in case.argv


SWEEP = [c for c in (*CHOICES, *file_cases(), *TRACES) if _in_json_mode(c)]


@pytest.mark.parametrize("case", SWEEP, ids=lambda c: c.name)
def test_every_failure_is_one_json_object_in_json_mode(case: Case, tmp_path: Path) -> None:
    """The same bad input in JSON mode: the same exit code, and stdout one object that
    carries the error and the code (numbers out of range have their own sweep above)."""
    assert run_case(case, tmp_path, json_mode=True) == "clean"


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(BAD_ENTRY_POINTS), ids=str)
def test_a_bad_entry_point_is_one_json_object_in_plan_and_tune(kind: str, tmp_path: Path) -> None:
    source, says = BAD_ENTRY_POINTS[kind]
    files = {"mymod.py": source.encode()}
    for argv in (["plan", "mymod:build", "--spec", "H200"], ["tune", "mymod:build"]):
        case = Case(f"{argv[0]} {kind}", argv, 2, says, files)
        assert run_case(case, tmp_path, json_mode=True) == "clean", argv[0]
