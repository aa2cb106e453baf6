"""The trial protocol: every key a real trial's process writes is declared in
`tfaccel.trial.protocol.Payload`, so that the parent keeps it (the parent reads the
payload through that type, not through a list of keys of its own)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("tensorflow")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from tfaccel.optimize.settings import LAYER_KNOBS, Settings
from tfaccel.script.command import parse_command
from tfaccel.script.run import ScriptTrial
from tfaccel.trial import protocol, runner
from tfaccel.trial.runner import StepPlan, run_trial

SMALL = StepPlan(warmup=2, windows=2, window=3)

SCRIPT = """
import numpy as np
import keras
rng = np.random.default_rng(0)
x = rng.normal(size=(2048, 8)).astype("float32")
y = (x @ rng.normal(size=(8, 1)) > 0).astype("float32")
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, "relu"),
                          keras.layers.Dropout(0.1), keras.layers.Dense(1, "sigmoid")])
model.compile(optimizer="adam", loss="binary_crossentropy")
model.fit(x, y, batch_size=32, epochs=1, validation_split=0.25, verbose=0)
"""


@pytest.fixture
def payloads(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    summarize = runner.summarize

    def recording(key: str, s: Settings, payload: dict[str, Any], wall_s: float) -> Any:
        seen.append(payload)
        return summarize(key, s, payload, wall_s)

    monkeypatch.setattr(runner, "summarize", recording)
    return seen


@pytest.mark.slow
def test_every_key_a_trial_writes_is_declared(
    payloads: list[dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A built-in's trial counting FLOPs (the baseline's), and a script's trial and race
    (the hook's keys, the offer's data facts and the noise scale)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(SCRIPT)
    base = Settings(precision="float32", xla="off", batch_size=32)
    assert run_trial("tiny", base, SMALL, 180, extra={"count_flops": True}).ok
    script = parse_command(["python", "train.py"])
    r = run_trial(
        ScriptTrial(script), base.replace(batch_size=None), SMALL, extra={"count_flops": True}
    )
    assert r.ok, (r.error, r.traceback)
    race = {"race": {"seconds": 2.0, "lr": None}}
    assert run_trial(ScriptTrial(script), base, SMALL, extra=race).ok
    assert len(payloads) == 3
    for payload in payloads:
        assert protocol.undeclared(payload, LAYER_KNOBS) == set()
    kept = r.extra
    assert kept["fit_data"] == "arrays" and "noise_scale" in kept and "examples" in kept


def test_result_and_extra_keys_split_the_declared_keys() -> None:
    declared = set(protocol.Payload.__annotations__)
    assert set(protocol.RESULT_KEYS) <= declared
    assert set(protocol.EXTRA_KEYS) == declared - set(protocol.RESULT_KEYS)
    payload = {"status": "ok", "fit_data": "arrays", "dropout_layers": 2, "stray": 1}
    assert protocol.extra_of(payload, ("dropout",)) == {"fit_data": "arrays", "dropout_layers": 2}
    assert protocol.undeclared(payload, ("dropout",)) == {"stray"}


def test_a_request_goes_through_json_whole_and_extras_find_their_fields() -> None:
    """The caller's extras (those its journal key holds) become the request's fields,
    the data-parallel engine's options apart; a key no field takes is refused on the
    parent's side, and the child refuses a request it cannot read."""
    s = Settings(batch_size=64)
    extra = {"race": {"seconds": 30.0, "lr": None}, "count_flops": True, "num_packs": 4}
    req = runner.trial_request("workload", s, SMALL, 3, extra, workload="tiny")
    assert req.race == {"seconds": 30.0, "lr": None} and req.count_flops
    assert req.engine == {"num_packs": 4} and req.seed == 3
    assert req.steps == SMALL.__dict__ and req.settings == s.to_dict()
    again = protocol.TrialRequest.from_json(req.to_json())
    assert again.to_json() == req.to_json() and Settings(**again.settings) == s
    with pytest.raises(ValueError, match="not a trial request's field: turbo"):
        runner.trial_request("tune", s, SMALL, 0, {"turbo": True})
    for text in ('{"mode": "train", "settings": {}}', "[1]", '{"mode": "run", "x": 1}'):
        with pytest.raises(ValueError, match="not a trial request"):
            protocol.TrialRequest.from_json(text)
