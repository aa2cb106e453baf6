"""What a tune leaves behind: tfaccel.json (the best settings) and the result record."""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfaccel.optimize import lr_scaling
from tfaccel.optimize.settings import LATE_KNOBS, Settings, changed
from tfaccel.results import SCHEMAS, to_jsonable, write_atomic
from tfaccel.trial.protocol import FIT_AT
from tfaccel.tune.offer import reached_after
from tfaccel.tune.result import BatchOffer, TuneResult

SETTINGS_SCHEMA = SCHEMAS["settings"]


# What `settings` holds in a settings file: the same-training answer (the user's batch
# size, the same math up to the accuracy guard). Files of older tunes, without it,
# hold a batch size chosen for samples per second alone.
SAME_TRAINING = "same_training"


def settings_document(
    result: TuneResult, plot: Path | None = None, xla_cache: str | None = None
) -> dict[str, Any]:
    best = result.best
    return {
        "schema": SETTINGS_SCHEMA,
        "workload": result.workload,
        **({"plot": str(plot)} if plot is not None else {}),
        "answer": SAME_TRAINING,
        "settings": result.best_settings.to_dict() if result.best_settings else None,
        "measured": {
            "samples_per_s": best.samples_per_s if best else None,
            "spread": best.spread if best else None,
            "speedup_over_baseline": result.speedup(result.baseline),
            "same_training_speedup_over_keras_defaults": result.speedup(result.keras_defaults),
            **(
                {"speedup_over_as_written": result.speedup(result.as_written)}
                if result.as_written is not None
                else {}
            ),
            "confirmed_speedup_over_keras_defaults": result.confirmed_speedup,
            "drift_between_trials": result.drift_between_trials,
            "speedups_across_machines": result.other_machine,
            "device": best.device if best else None,
        },
        "batch_offer": offer_document(result.batch_offer),
        **({"batch_note": result.batch_note} if result.batch_note else {}),
        # `tfaccel run` applies the batch offer only where this is true (or with
        # --batch-offer), and only an offer whose race passed.
        "apply_batch_offer": False,
        **compiled_entry(xla_cache),
        "load_with": "tfaccel.configure.from_file('tfaccel.json')",
    }


def compiled_entry(xla_cache: str | None) -> dict[str, Any]:
    """The folder of the programs the trials compiled (`trial.xla_cache`), where it holds
    any, with the TensorFlow and the GPU models that compiled them: `tfaccel run` loads
    them where the script's programs are the same, and only there (`with_compiled`)."""
    from tfaccel._tf import installed_version
    from tfaccel.trial.runner import executables_in

    if not xla_cache or not any(executables_in(xla_cache).rglob("*.pb")):
        return {}
    folder = str(executables_in(xla_cache).resolve())
    return {"compiled": {"xla_cache": folder, "tensorflow": installed_version(), "gpus": _gpus()}}


def _gpus() -> str:
    """The GPU models the programs were compiled for, as NVML names them."""
    from tfaccel.hardware.nvml import driver_info

    return ", ".join(sorted({gpu.name or "?" for gpu in driver_info().gpus}))


def offer_document(offer: BatchOffer | None) -> dict[str, Any] | None:
    """The batch offer as the settings file and tune's JSON carry it."""
    if offer is None:
        return None
    race = offer.race
    return {
        "batch_size": offer.batch,
        "from_batch_size": offer.from_batch,
        "learning_rate": offer.lr.to_dict(),
        "verdict": offer.verdict,
        "why": offer.why,
        "samples_speedup_over_same_training": offer.samples_speedup,
        "to_target_speedup_over_same_training": race.to_target_speedup if race else None,
        "epochs_to_target": offer.epochs_to_target,
        "other_settings": offer.other_settings,
        "raced_fit": raced_fit(offer),
        "race": dataclasses.asdict(race) if race else None,
    }


def raced_fit(offer: BatchOffer) -> str | None:
    """Where the script's fit that the offer was raced on is called ("train.py:42", as
    its trials timed it), or None (an entry point): `run` applies the offer there."""
    measured = offer.trial.extra.get("measured")
    if isinstance(measured, str) and measured.startswith(FIT_AT):
        return measured[len(FIT_AT) :]
    return None


def write_settings(
    path: Path, result: TuneResult, plot: Path | None = None, xla_cache: str | None = None
) -> None:
    doc = settings_document(result, plot, xla_cache)
    write_atomic(path, json.dumps(doc, indent=2) + "\n")


def own_outputs(path: Path, workload: str) -> set[Path]:
    """The files an earlier tune of `workload` wrote, which running the same command
    again may replace: `path` when it is that tune's settings file, and the plot it
    names. Empty for any other file (the user's own, or another workload's tune)."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return set()
    if not isinstance(doc, dict) or doc.get("schema") != SETTINGS_SCHEMA:
        return set()
    if doc.get("workload") != workload:
        return set()
    plot = doc.get("plot")
    return {out.resolve() for out in (path, Path(plot) if isinstance(plot, str) else None) if out}


def result_json(result: TuneResult) -> str:
    doc = to_jsonable(result)
    doc["speedup_over_baseline"] = result.speedup(result.baseline)
    doc["speedup_over_keras_defaults"] = result.speedup(result.keras_defaults)
    doc["same_training_speedup_over_keras_defaults"] = result.speedup(result.keras_defaults)
    doc["speedup_over_as_written"] = result.speedup(result.as_written)
    doc["graph_mode_speedup_over_baseline"] = result.graph_mode_gain
    doc["without_determinism_speedup_over_keras_defaults"] = result.without_determinism_gain
    doc["batch_offer"] = offer_document(result.batch_offer)
    doc["races"] = [offer_document(raced) for raced in result.races]
    doc["to_target_speedup_over_keras_defaults"] = to_target_over_defaults(result)
    doc["confirmed_speedup_over_keras_defaults"] = result.confirmed_speedup
    doc["compile_s_total"] = result.compile_s_total
    doc["setup_s_total"] = result.setup_s_total
    doc["seconds_to_1_5x_keras_defaults"] = result.time_to(1.5)
    doc["largest_fitting_batch"] = result.largest_fitting_batch
    from tfaccel.environment import environment

    return json.dumps({"schema": SCHEMAS["tune"], "environment": environment(), **doc}, indent=2)


def to_target_over_defaults(result: TuneResult) -> float | None:
    """How many times sooner the chosen answer reaches the target loss than Keras'
    defaults would: the same-training speed-up (the same steps, so the same loss at
    each step), times the race's to-target speed-up where the batch offer passed. The
    race ran against the same-training answer of its time (late stages may have sped
    the answer up since: `Tuner.after_offer`): its speed-up is of that answer's speed."""
    same = result.speedup(result.keras_defaults)
    offer = result.batch_offer
    if same is None or offer is None or offer.verdict != "passed" or offer.race is None:
        return same
    defaults = result.keras_defaults
    raced_against = (offer.trial.samples_per_s or 0.0) / (offer.samples_speedup or math.nan)
    if defaults is None or not defaults.samples_per_s or not math.isfinite(raced_against):
        return same
    return max(same, raced_against / defaults.samples_per_s * (offer.race.to_target_speedup or 1.0))


@dataclass(frozen=True)
class Answer:
    """What `tfaccel run` applies from a settings file: the settings, the learning-rate
    change that goes with an applied batch offer (LrChange as a dict, or None), and
    what was changed or left alone, in words."""

    settings: Settings
    lr: dict[str, Any] | None = None
    notes: tuple[str, ...] = ()
    # The batch the settings were measured at (the same-training answer's), or an
    # applied offer's race started from: `run` says where the script's fit differs.
    from_batch: int | None = None
    # The folder of the programs the tune compiled, loaded where the script's are the same.
    xla_cache: str | None = None
    # Where the fit an applied offer was raced on is called ("train.py:42"): other fits
    # keep their own batch and rate. None: any fit at its batch (an older tune's file).
    raced_fit: str | None = None


def for_this_machine(answer: Answer, gpus: int) -> Answer:
    """The answer checked against what this machine can do, before the script starts:
    weights in bf16 refused (tune measures training, and so does run), a 16-bit
    precision without a GPU said (a CPU emulates it, slower than float32)."""
    from tfaccel.errors import InputError

    precision = answer.settings.precision
    if precision == "bfloat16":
        raise InputError(
            "precision bfloat16 stores the weights in bf16: it is for inference, and run trains",
            expected="mixed_bfloat16 (bf16 math, float32 weights)",
            received="precision=bfloat16",
        )
    if gpus == 0 and precision in ("mixed_float16", "mixed_bfloat16"):
        note = (
            f"{precision} on a machine without a GPU: the CPU emulates 16-bit math, slower "
            "than float32 (applied as the file asks; tune on this machine for its answer)"
        )
        return dataclasses.replace(answer, notes=(*answer.notes, note))
    return answer


def read_answer(path: Path, batch_offer: bool = False) -> Answer:
    """The settings file's same-training answer, at the script's own batch size; with
    `batch_offer` (or the file's `"apply_batch_offer": true`), its batch offer on top,
    only where its race passed (ConfigFileError otherwise). A file of an older tune,
    whose batch size was chosen for samples per second alone, keeps the script's own
    batch size unless asked."""
    from tfaccel._deps import read_json
    from tfaccel.optimize.settings import settings_from_dict

    doc = read_json(path, "a tfaccel.json written by `tfaccel tune`")
    settings = settings_from_dict(doc, str(path))
    asked = batch_offer or (isinstance(doc, dict) and doc.get("apply_batch_offer") is True)
    if isinstance(doc, dict) and "schema" in doc and doc.get("answer") != SAME_TRAINING:
        return _older(path, settings, asked)
    offer, note = doc.get("batch_offer"), doc.get("batch_note")
    answer = _with_offer(path, settings, offer, note) if asked else None
    return with_compiled(path, doc, _withheld_said(answer or _same_training(settings)))


def _withheld_said(answer: Answer) -> Answer:
    """The answer, with a note for each knob it sets that tune now withholds
    (`TuneTry.withheld`): a file of an older tune, or one written by hand, keeps it as
    it asks, and the user learns why tune no longer chooses it."""
    asked = changed(Settings(), answer.settings)
    notes = [
        f"{knob.name}={asked[knob.name]} kept as the file asks, though tune no longer "
        f"tries it: {knob.tune.withheld}"
        for knob in LATE_KNOBS
        if knob.tune and knob.tune.withheld and knob.name in asked
    ]
    return dataclasses.replace(answer, notes=(*answer.notes, *notes)) if notes else answer


def with_compiled(path: Path, doc: Any, answer: Answer) -> Answer:
    """The answer with the tune's compiled programs (`compiled_entry`) where the file
    names them, their folder is there, and this is the TensorFlow and the GPU models
    that compiled them; said either way."""
    from tfaccel.errors import ConfigFileError

    entry = doc.get("compiled") if isinstance(doc, dict) else None
    if entry is None:
        return answer
    folder, version, gpus = (entry.get(k) if isinstance(entry, dict) else None for k in _COMPILED)
    if not all(isinstance(value, str) for value in (folder, version, gpus)):
        raise ConfigFileError(
            f"{path}'s compiled entry is malformed",
            expected='"compiled": {"xla_cache": a folder, "tensorflow": a version, '
            '"gpus": GPU models}',
            received=f"compiled {entry!r}"[:300],
        )
    why = _not_loaded(str(folder), str(version), str(gpus))
    if why:
        return dataclasses.replace(answer, notes=(*answer.notes, f"compiled programs: {why}"))
    note = (
        f"compiled programs: those the tune compiled are loaded from {folder} where the "
        "script's are the same programs, the others compile as usual (TensorFlow logs "
        "'Error parsing text-format tensorflow.XlaSerializedCacheEntry' as it reads each: "
        "it then reads the binary form)"
    )
    return dataclasses.replace(answer, xla_cache=folder, notes=(*answer.notes, note))


_COMPILED = ("xla_cache", "tensorflow", "gpus")


def _not_loaded(folder: str, version: str, gpus: str) -> str | None:
    """Why the tune's compiled programs are not for this run, or None."""
    from tfaccel._tf import installed_version

    if not Path(folder).is_dir():
        return f"the tune's folder {folder} is gone: XLA compiles as usual"
    if version != installed_version():
        return (
            f"the tune's are TensorFlow {version}'s, this is {installed_version()}'s: not "
            "loaded, XLA compiles as usual"
        )
    here = _gpus()
    if gpus != here:
        return f"the tune's were compiled for {gpus or 'no GPU'}: not loaded on {here or 'no GPU'}"
    return None


def _same_training(settings: Settings) -> Answer:
    """The same-training answer keeps the batch size the script trains at as it runs
    now (its own options included), not the number the tune measured at: that number
    is the script's own only for the command the tune ran."""
    note = "batch size: the script's own, as it trains (the same training)"
    return Answer(settings.replace(batch_size=None), None, (note,), settings.batch_size)


def _older(path: Path, settings: Settings, asked: bool) -> Answer:
    if asked or not settings.batch_size:
        return Answer(settings)
    note = (
        f"{path} is from an older tune, which chose batch {settings.batch_size} for samples "
        "per second alone: it is not applied, the script's own batch size is kept (tune "
        "again for a batch offer proven by a race; --batch-offer applies the old one)"
    )
    return Answer(settings.replace(batch_size=None), None, (note,))


def _with_offer(path: Path, settings: Settings, offer: Any, note: Any = None) -> Answer:
    from tfaccel.errors import ConfigFileError
    from tfaccel.optimize.settings import said, settings_from_dict

    if not isinstance(offer, dict):
        why = f" ({note})" if isinstance(note, str) and note else ""
        raise ConfigFileError(
            f"{path} holds no batch offer to apply",
            expected="a settings file whose tune offered a larger batch (see its batch_note)",
            received=f"batch_offer: null{why}",
            hint="tfaccel run without --batch-offer applies the same-training answer",
        )
    if offer.get("verdict") != "passed":
        raise ConfigFileError(
            f"{path}'s batch offer did not pass its race: {offer.get('why')}",
            expected="an offer whose race passed (verdict 'passed')",
            received=f"verdict {offer.get('verdict')!r}",
            hint="tfaccel run without --batch-offer applies the same-training answer",
        )
    size, lr = offer.get("batch_size"), offer.get("learning_rate")
    if not isinstance(size, int) or size < 1 or not isinstance(lr, dict):
        raise ConfigFileError(
            f"{path}'s batch offer is malformed",
            expected="batch_size (an integer) and learning_rate (an object)",
            received=f"batch_size {size!r}, learning_rate {lr!r}",
        )
    try:
        lr = lr_scaling.from_dict(lr).to_dict()
    except ValueError as exc:
        raise ConfigFileError(
            f"{path}'s batch offer is malformed",
            expected=lr_scaling.EXPECTED,
            received=str(exc),
        ) from None
    own = offer.get("from_batch_size")
    notes = [f"batch offer applied: batch {size} (from {own}): {offer.get('why')}"]
    epochs = offer.get("epochs_to_target")
    if isinstance(epochs, (int, float)) and epochs > 0:
        notes.append(
            f"{reached_after(size, 'that validation loss', epochs)}: a script that trains "
            "fewer epochs ends before it (more epochs, or stop on the validation loss)"
        )
    other = offer.get("other_settings") or {}
    if not isinstance(other, dict) or "batch_size" in other:
        raise ConfigFileError(
            f"{path}'s batch offer is malformed",
            expected="other_settings: an object of settings besides batch_size",
            received=f"other_settings {other!r}",
        )
    if other:
        notes.append(f"with the offer's own {said(other)} (measured at that batch)")
    merged = {**settings.to_dict(), **other, "batch_size": size}
    start = own if isinstance(own, int) and own > 0 else None
    at = offer.get("raced_fit")
    if at is not None and not isinstance(at, str):
        raise ConfigFileError(
            f"{path}'s batch offer is malformed",
            expected='raced_fit: where the raced fit is called ("train.py:42"), or null',
            received=f"raced_fit {at!r}",
        )
    return Answer(settings_from_dict(merged, str(path)), lr, tuple(notes), start, raced_fit=at)
