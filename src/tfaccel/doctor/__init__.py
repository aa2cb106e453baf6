"""`tfaccel doctor`: is TensorFlow using the GPU, and if not, exactly why.

>>> from tfaccel.doctor import run_doctor
>>> report = run_doctor()
>>> report.failed
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable

from tfaccel.doctor.checks import CHECKS, CheckFn, check_tf_sees_gpu
from tfaccel.doctor.context import DoctorContext
from tfaccel.doctor.model import Check, DoctorReport, Status

__all__ = ["Check", "DoctorContext", "DoctorReport", "Status", "run_doctor"]


def _safe(check: Callable[[], list[Check]], name: str) -> list[Check]:
    """Run one check; a crash becomes a warning row, never a crashed doctor."""
    try:
        return check()
    except Exception as exc:
        where = traceback.extract_tb(exc.__traceback__)[-1]
        return [
            Check(
                f"internal.{name}",
                f"{name} (could not run)",
                Status.WARN,
                f"this check crashed: {type(exc).__name__}: {exc} "
                f"({where.filename.rsplit('/', 1)[-1]}:{where.lineno})",
                fix="please report this at the tfaccel issue tracker with "
                "`tfaccel doctor --format markdown`",
            )
        ]


def run_doctor(
    ctx: DoctorContext | None = None,
    checks: tuple[CheckFn, ...] = CHECKS,
    progress: Callable[[str], None] | None = None,
) -> DoctorReport:
    """Run every check and return the report. Never raises for a broken environment."""
    ctx = ctx or DoctorContext()
    started = time.perf_counter()
    rows: list[Check] = []
    for check in checks:
        name = check.__name__.removeprefix("check_")
        if progress:
            progress(name)
        rows.extend(_safe(lambda check=check: check(ctx), name))  # type: ignore[misc]
    if progress:
        progress("tf_sees_gpu")
    rows.extend(_safe(lambda: check_tf_sees_gpu(ctx, rows), "tf_sees_gpu"))
    try:
        env = ctx.environment_summary()
    except Exception as exc:
        env = {"error": f"{type(exc).__name__}: {exc}"}
    return DoctorReport(tuple(rows), env, time.perf_counter() - started)
