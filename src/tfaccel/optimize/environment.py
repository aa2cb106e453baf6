"""The settings TensorFlow reads from the environment when its runtime starts (the
allocator, unified memory, XLA's flags) and the device memory options that must be set
before it initializes the GPU: set here before the runtime starts, refused after it
(`ConfigureOrderError`) unless the value is already what is asked."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from tfaccel import _compat
from tfaccel._tf import tf_internal
from tfaccel.errors import InputError
from tfaccel.optimize.report import Applied, AppliedStatus, ConfigureOrderError
from tfaccel.optimize.settings import (
    IMPLIED_XLA_OPTIONS,
    XLA_OPTIONS,
    Settings,
)

# Environment variables TensorFlow reads when its runtime starts.
ENV_ALLOCATOR = "TF_GPU_ALLOCATOR"


ENV_UNIFIED = "TF_FORCE_UNIFIED_MEMORY"


ENV_XLA = "XLA_FLAGS"


UNIFIED_COST = (
    "pages that do not fit in GPU memory live in host memory and migrate on access over "
    "PCIe (tens of GB/s, against several TB/s of HBM): steps that touch them run many "
    "times slower. Use it to make a too-large model run at all, not to make it fast"
)


def runtime_initialized() -> bool:
    """True once TensorFlow's eager context exists (devices can no longer be configured)."""
    try:
        context = tf_internal("python.eager.context")
    except ImportError:
        return False
    try:
        return context.context()._context_handle is not None
    except Exception:
        return False


def unified_memory_limit_mib(total_mib: int, factor: float) -> int:
    """The logical device size that oversubscribes `total_mib` by `factor`."""
    return int(total_mib * factor)


def set_env(name: str, value: str | None, initialized: bool, knob: str) -> AppliedStatus:
    current = os.environ.get(name)
    if current == value:
        return "unchanged"
    if initialized:
        raise ConfigureOrderError(
            f"{knob} can no longer change: TensorFlow already started its GPU runtime",
            expected=f"tfaccel.configure() before building any model or tensor, or "
            f"{name}={value} in the environment before starting Python",
            received=f"{name}={current!r}",
            hint="call tfaccel.configure() at the top of your script",
        )
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value
    return "applied"


# The flags configure() itself put into XLA_FLAGS in this process (only those go again).
_XLA_ADDED: list[str] = []


def xla_flags_with(
    current: str, options: tuple[str, ...], added: Iterable[str] = ()
) -> tuple[str, list[str]]:
    """(XLA_FLAGS, the flags added) for `options` (names in XLA_OPTIONS): the flags in
    `added` (configure's own, from before) go, the user's stay, in their order, the
    options' flags come last unless the user set them already. A user's flag that an
    option would override (the same flag, another value) is an error, not a guess."""
    gone = set(added)
    kept = [flag_text for flag_text in current.split() if flag_text not in gone]
    wanted = merged_flags(
        [flag for option in options for flag in XLA_OPTIONS[option] if flag not in kept]
    )
    for option in options:
        floor = _compat.xla_flags_floor(XLA_OPTIONS[option])
        if floor is not None:
            raise InputError(
                f"xla_options {option!r} needs TensorFlow >= {floor}; this is "
                f"{_compat.installed_version()}",
                expected=f"TensorFlow {floor} or newer, or the option left out",
                received=option,
                hint="an older XLA aborts the process on a flag it does not know, or "
                "ignores a pass it does not have",
            )
    for flag in wanted:
        name = flag.split("=", 1)[0]
        clash = [flag_text for flag_text in kept if flag_text.split("=", 1)[0] == name]
        if clash:
            raise InputError(
                f"XLA_FLAGS already sets {name} another way",
                expected=f"{flag} (from xla_options), or the option left out",
                received=" ".join(clash),
                hint="merge the two by hand in XLA_FLAGS, or drop the xla_options entry",
            )
    return " ".join(kept + wanted), wanted


def merged_flags(flags: list[str]) -> list[str]:
    """One flag a name: where two options set the same list-valued flag, one the
    whole list (`command_buffers`) and one a `-TYPE`/`+TYPE` edit of XLA's default list
    (`cublaslt`), the edit applied to the list (XLA would let the later one win)."""
    out: list[str] = []
    for flag in flags:
        name, _, value = flag.partition("=")
        same = next((i for i, have in enumerate(out) if have.partition("=")[0] == name), None)
        if same is None:
            out.append(flag)
        else:
            out[same] = f"{name}={_edited(out[same].partition('=')[2], value)}"
    return out


def _edited(first: str, second: str) -> str:
    """Two values of one list-valued XLA flag as one: a list with edits of it applied,
    or the edits together."""

    def is_edit(value: str) -> bool:
        return all(item[:1] in "+-" for item in value.split(","))

    if is_edit(first) and is_edit(second):
        return f"{first},{second}"
    if not is_edit(first) and not is_edit(second):
        raise ValueError(f"two XLA options set one flag two ways: {first!r}, {second!r}")
    items, edits = (second, first) if is_edit(first) else (first, second)
    kept = items.split(",")
    for edit in edits.split(","):
        kept = [item for item in kept if item != edit[1:]]
        if edit.startswith("+"):
            kept.append(edit[1:])
    return ",".join(kept)


def apply_xla_options(settings: Settings, initialized: bool) -> Applied:
    current = os.environ.get(ENV_XLA, "")
    options = settings.effective_xla_options
    flags, added = xla_flags_with(current, options, _XLA_ADDED)
    status: AppliedStatus
    if flags.split() == current.split():
        status = "unchanged"
    else:
        status = set_env(ENV_XLA, flags or None, initialized, f"xla_options={list(options)}")
    _XLA_ADDED[:] = added
    every = merged_flags([flag for option in options for flag in XLA_OPTIONS[option]])
    detail = " ".join(every) or "XLA's defaults"
    # the options a knob added (IMPLIED_XLA_OPTIONS) beyond those asked for, and why
    notes = [
        f"{', '.join(added)}: for {knob}"
        for knob, opts in IMPLIED_XLA_OPTIONS.items()
        if getattr(settings, knob)
        and (added := [option for option in opts if option not in settings.xla_options])
    ]
    if notes:
        detail += f" ({'; '.join(notes)})"
    return Applied("xla_options", list(options), status, detail)


def set_xla_options(options: Iterable[str]) -> Applied:
    """Only XLA's options (names in XLA_OPTIONS), for tools that set nothing else (`tfaccel
    bench --xla-options`); before TensorFlow starts, like configure()."""
    settings = Settings(xla_options=tuple(options))
    return apply_xla_options(settings, runtime_initialized())


def apply_memory(
    tf: Any, settings: Settings, gpus: list[Any], initialized: bool, total_mib: int | None
) -> list[Applied]:
    rows: list[Applied] = []
    if settings.memory == "unified":
        status = set_env(ENV_UNIFIED, "1", initialized, "memory='unified'")
        rows.append(Applied("memory", "unified", status, f"{ENV_UNIFIED}=1; cost: " + UNIFIED_COST))
    if not gpus:
        if settings.memory != "default":
            rows.append(Applied("memory", settings.memory, "skipped", "no GPU visible"))
        return rows
    limit = None
    if settings.memory == "limit":
        limit = settings.memory_limit_mib
    elif settings.memory == "unified" and total_mib:
        limit = unified_memory_limit_mib(total_mib, settings.unified_oversubscription)
    for gpu in gpus:
        want_growth = settings.memory == "growth"
        have_growth = bool(tf.config.experimental.get_memory_growth(gpu))
        if want_growth != have_growth:
            if initialized:
                raise ConfigureOrderError(
                    "memory growth can no longer change: TensorFlow already initialized the GPU",
                    expected="tfaccel.configure() before building any model or tensor",
                    received=f"memory growth is {have_growth}, asked {want_growth}",
                )
            tf.config.experimental.set_memory_growth(gpu, want_growth)
        if limit is not None:
            current = tf.config.get_logical_device_configuration(gpu)
            same = current and len(current) == 1 and current[0].memory_limit == limit
            if not same:
                if initialized:
                    raise ConfigureOrderError(
                        "the GPU memory limit can no longer change: TensorFlow already "
                        "initialized the GPU",
                        expected="tfaccel.configure() first",
                        received=f"limit {limit} MiB",
                    )
                tf.config.set_logical_device_configuration(
                    gpu, [tf.config.LogicalDeviceConfiguration(memory_limit=limit)]
                )
    if settings.memory == "growth":
        rows.append(
            Applied(
                "memory",
                "growth",
                "applied",
                f"on {len(gpus)} GPU(s): memory is taken as needed instead of all at start",
            )
        )
    elif limit is not None:
        rows.append(Applied("memory", settings.memory, "applied", f"{limit:,} MiB per GPU"))
    return rows


def gpu_total_mib() -> int | None:
    try:
        from tfaccel.hardware.nvml import driver_info

        info = driver_info()
        return info.gpus[0].memory_total_mib if info.gpus else None
    except Exception:
        return None


def mps_running() -> bool:
    try:
        from tfaccel.hardware.capabilities import mps_state

        pipes, procs = mps_state(os.environ)
        return bool(pipes or procs)
    except Exception:
        return False


MPS_WARNING = (
    "MPS is running: every process sharing the GPU would try to take all its memory; "
    "use memory='growth' or memory='limit' with memory_limit_mib"
)


def apply_allocator(settings: Settings, initialized: bool) -> Applied:
    alloc = None if settings.allocator == "default" else settings.allocator
    status = set_env(ENV_ALLOCATOR, alloc, initialized, f"allocator={settings.allocator!r}")
    how = (
        "cudaMallocAsync: the driver's stream-ordered pool"
        if alloc
        else "TensorFlow's BFC allocator"
    )
    return Applied("allocator", settings.allocator, status, how)
