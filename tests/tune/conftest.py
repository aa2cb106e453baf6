"""The search's tests run on fake trials: they decide as on the Keras tfaccel was verified
on, whatever Keras is installed (a floor run of the suite has an older one)."""

from __future__ import annotations

import pytest

from tfaccel import _compat


@pytest.fixture(autouse=True)
def verified_keras(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_compat, "keras_version", lambda: _compat.KERAS_VERIFIED)
