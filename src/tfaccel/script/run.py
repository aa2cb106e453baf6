"""A user's script run under tfaccel: once per trial by `tfaccel tune --` (its fit timed
by the hook inside it), once by `tfaccel run` (the settings applied, its exit code
passed on); both with tfaccel's sitecustomize (`script/inject`) first on its path."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tfaccel._child import ChildResult, child_env, run_attached, run_command
from tfaccel.optimize.settings import Settings
from tfaccel.script.command import Script
from tfaccel.trial.protocol import FIT_STARTED, MARK, TrialRequest
from tfaccel.trial.protocol import SCRIPT_ENV as ENV
from tfaccel.trial.runner import StepPlan, TrialResult, result_of, trial_request

INJECT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "inject")


def hooked_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a user's own script under tfaccel: tfaccel's sitecustomize
    (`script/inject`) first on PYTHONPATH (it chains to the environment's own), and tfaccel
    importable from the script's interpreter."""
    env = dict(os.environ if base is None else base)
    package_root = str(Path(__file__).resolve().parents[2])  # the folder holding tfaccel/
    # tfaccel's own root last: the user's PYTHONPATH keeps its order before it
    paths = [INJECT, *filter(None, env.get("PYTHONPATH", "").split(os.pathsep)), package_root]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


NO_FIT = (
    "the script ended without calling keras.Model.fit, train_on_batch, or a tf.function "
    "that applies a Keras optimizer's gradients, the calls tfaccel times: a script that "
    "trains with Keras 2's tf_keras, or with a step of TensorFlow ops alone, cannot be "
    "tuned this way; tune a function that returns its model and data instead (tfaccel "
    "tune MODULE:FUNCTION, docs/entry-points.md), or set tfaccel.configure() in the script"
)


def too_few_fits(fit: int) -> str:
    return (
        f"the script ended before its fit call {fit} (--fit {fit}): it made fewer keras.Model.fit "
        "calls (count the calls as the script makes them, the first is 1)"
    )


@dataclass(frozen=True)
class ScriptTrial:
    """A user's script as a trial's subject (`trial.runner.TrialTarget`): run as its
    command says, with the hook in it, which times its `script.fit`-th fit call at
    the request's settings."""

    script: Script
    own: tuple[str, ...] = ()  # what the script chooses itself (`ScriptFacts.own`)

    @property
    def name(self) -> str:
        return self.script.name

    def request(
        self, settings: Settings, steps: StepPlan, seed: int, extra: dict[str, Any] | None
    ) -> TrialRequest:
        return trial_request("tune", settings, steps, seed, extra, fit=self.script.fit)

    def start(
        self, request: TrialRequest, overrides: dict[str, str] | None, timeout_s: float
    ) -> ChildResult:
        env = child_env(
            hooked_env(), paths="as_is", overrides={ENV: request.to_json(), **(overrides or {})}
        )
        return run_command(self.script.argv, MARK, env, timeout_s)

    def result(
        self, key: str, settings: Settings, out: ChildResult, timeout_s: float
    ) -> TrialResult:
        fit = self.script.fit
        silent = NO_FIT if fit == 1 else too_few_fits(fit)
        result = result_of(key, settings, out, timeout_s, silent=silent)
        if out.payload is None and not out.timed_out and FIT_STARTED not in out.stdout:
            # The hook says when the first fit starts and answers from inside it, errors
            # included: neither means the script ended (or failed) before it.
            result = replace(result, extra={**result.extra, "before_fit": True})
        return result


def run_script(
    script: Script,
    settings: Settings,
    lr: dict[str, Any] | None = None,
    from_batch: int | None = None,
    xla_cache: str | None = None,
    raced_fit: str | None = None,
) -> int:
    """The script, once, with `settings` applied inside it (and `lr`, a batch offer's
    learning-rate change, `optimize.lr_scaling.LrChange` as a dict, for fits that train
    at `from_batch`, the batch its race started from, or the batch the settings were
    measured at, and at `raced_fit`, where the fit the offer was raced on is called;
    `xla_cache`, the folder of the programs the tune compiled); its exit code
    (128 + N where signal N ended it). Its output is its own; tfaccel's notes go to
    stderr. It dies with tfaccel, and a signal that stops tfaccel stops it
    (`_child.run_attached`)."""
    env = hooked_env()
    request = TrialRequest(
        "run",
        settings.to_dict(),
        lr=lr,
        from_batch=from_batch,
        xla_cache=xla_cache,
        raced_fit=raced_fit,
    )
    env[ENV] = request.to_json()
    return run_attached(script.argv, env)
