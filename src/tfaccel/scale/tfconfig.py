"""TF_CONFIG for MultiWorkerMirroredStrategy: generate it, and check one a user has.

    TF_CONFIG='{"cluster": {"worker": ["host1:12345", "host2:12345"]},
                "task": {"type": "worker", "index": 0}}'

Every worker runs the same script with the same cluster and its own task index.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from tfaccel._deps import parse_json
from tfaccel.errors import ConfigFileError, InputError

TASK_TYPES = ("chief", "worker", "ps", "evaluator")
_ADDR = re.compile(r"^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9_.\-]+):(\d{1,5})$")


@dataclass(frozen=True)
class TfConfig:
    cluster: dict[str, list[str]]
    task_type: str
    task_index: int

    @property
    def num_workers(self) -> int:
        return len(self.cluster.get("worker", [])) + len(self.cluster.get("chief", []))

    def to_json(self) -> str:
        return json.dumps(
            {"cluster": self.cluster, "task": {"type": self.task_type, "index": self.task_index}}
        )

    def commands(self, script: str = "python train.py") -> list[str]:
        """What each worker must run (one line per task)."""
        out = []
        for ttype, addrs in self.cluster.items():
            for i, addr in enumerate(addrs):
                cfg = TfConfig(self.cluster, ttype, i).to_json()
                out.append(
                    f"# on {addr.rsplit(':', 1)[0]} ({ttype} {i}):\nTF_CONFIG='{cfg}' {script}"
                )
        return out


def _fail(field: str, problem: str, expected: str, received: Any) -> ConfigFileError:
    return ConfigFileError(f"TF_CONFIG {field}: {problem}", expected=expected, received=received)


def validate(config: str | dict[str, Any]) -> TfConfig:
    """Check a TF_CONFIG (JSON text or dict); errors name the field that is wrong."""
    if isinstance(config, str):
        data = parse_json(config, "TF_CONFIG", "a JSON object with 'cluster' and 'task'")
    else:
        data = config
    if not isinstance(data, dict):
        raise _fail(
            "(top level)", "not an object", '{"cluster": ..., "task": ...}', type(data).__name__
        )
    cluster = data.get("cluster")
    if not isinstance(cluster, dict) or not cluster:
        raise _fail(
            "'cluster'", "missing or empty", '{"worker": ["host:port", ...]}', repr(cluster)
        )
    seen: dict[str, str] = {}
    for ttype, addrs in cluster.items():
        if ttype not in TASK_TYPES:
            raise _fail(
                f"cluster.{ttype}", "unknown task type", f"one of {TASK_TYPES}", repr(ttype)
            )
        if not isinstance(addrs, list) or not addrs:
            raise _fail(
                f"cluster.{ttype}", "not a list of addresses", '["host:port", ...]', repr(addrs)
            )
        for i, addr in enumerate(addrs):
            match = _ADDR.match(addr) if isinstance(addr, str) else None
            if not match or not 0 < int(match.group(2)) < 65536:
                raise _fail(
                    f"cluster.{ttype}[{i}]",
                    "not a host:port address",
                    "host:port with a port in 1..65535",
                    repr(addr),
                )
            key = addr.lower()  # host names are case-insensitive
            if key in seen:
                raise _fail(
                    f"cluster.{ttype}[{i}]",
                    f"{addr} is listed twice (also {seen[key]}; host names ignore case)",
                    "each address once",
                    repr(addr),
                )
            seen[key] = f"cluster.{ttype}[{i}]"
    task = data.get("task")
    if not isinstance(task, dict):
        raise _fail("'task'", "missing", '{"type": "worker", "index": 0}', repr(task))
    ttype = task.get("type")
    if not isinstance(ttype, str) or ttype not in cluster:
        raise _fail(
            "task.type", "names no task in the cluster", f"one of {sorted(cluster)}", repr(ttype)
        )
    index = task.get("index")
    if (
        not isinstance(index, int)
        or isinstance(index, bool)
        or not 0 <= index < len(cluster[ttype])
    ):
        raise _fail(
            "task.index",
            "out of range",
            f"0..{len(cluster[ttype]) - 1} for {len(cluster[ttype])} {ttype}(s)",
            repr(index),
        )
    return TfConfig(
        {role: list(addresses) for role, addresses in cluster.items()}, str(ttype), index
    )


def from_environment(env: Any = None) -> TfConfig | None:
    """The TF_CONFIG this process's environment sets, checked (ConfigFileError naming
    the field that is wrong); None where it sets none."""
    import os

    text = (os.environ if env is None else env).get("TF_CONFIG", "")
    return validate(text) if text.strip() else None


def make(workers: list[str], index: int) -> TfConfig:
    """A worker-only cluster from 'host:port' strings (the --workers flag)."""
    if not workers:
        raise InputError(
            "No workers given", expected="--workers host1:port,host2:port", received="nothing"
        )
    return validate({"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}})
