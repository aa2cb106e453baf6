"""`tfaccel profile`: capture a training run's trace and turn it into numbers and advice.

from tfaccel.profile import trace, ProfileCallback
with trace("logs/profile"):
    model.fit(ds, steps_per_epoch=10)
model.fit(ds, callbacks=[ProfileCallback("logs/profile", start_step=20, steps=10)])
"""

from __future__ import annotations

from typing import Any

__all__ = ["ProfileCallback", "StepAnnotations", "start", "stop", "trace"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from tfaccel.profile import capture

        return getattr(capture, name)
    raise AttributeError(name)
