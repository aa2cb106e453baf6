"""The package version, in one place (pyproject's `version` reads the same number)."""

from __future__ import annotations

__version__ = "0.1.0"
