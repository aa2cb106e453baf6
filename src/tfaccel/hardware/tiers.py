"""The basic / recommended / extreme tier table (data/tiers.json), judged per parameter."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tfaccel import data

BELOW = "below basic"


@dataclass(frozen=True)
class TierRow:
    """One parameter of one GPU against the table."""

    parameter: str
    label: str
    value: float | None
    unit: str
    tier: str | None  # "basic" / "recommended" / "extreme" / "below basic"; None if unknown
    thresholds: dict[str, float]


@dataclass(frozen=True)
class TierVerdict:
    """Every row for one GPU and its overall tier (the lowest row that is known)."""

    gpu: str
    rows: tuple[TierRow, ...]
    overall: str | None


def _tier_of(value: float | None, thresholds: dict[str, float], order: list[str]) -> str | None:
    if value is None:
        return None
    reached = BELOW
    for tier in order:
        if value >= thresholds[tier]:
            reached = tier
    return reached


def judge(gpu: str, values: dict[str, Any]) -> TierVerdict:
    """Judge `values` ({parameter: number}) against the tier table."""
    table = data.load("tiers")
    order: list[str] = table["tiers"]
    rows = []
    for row in table["rows"]:
        raw = values.get(row["parameter"])
        value = float(raw) if raw is not None else None
        rows.append(
            TierRow(
                row["parameter"],
                row["label"],
                value,
                row["unit"],
                _tier_of(value, row["thresholds"], order),
                row["thresholds"],
            )
        )
    rank = {BELOW: -1, **{tier: i for i, tier in enumerate(order)}}
    known = [judged.tier for judged in rows if judged.tier is not None]
    overall = min(known, key=lambda tier: rank[tier]) if known else None
    return TierVerdict(gpu, tuple(rows), overall)


def judge_values(
    name: str,
    cuda_cores: int | None,
    memory_gb: float | None,
    bandwidth_gbs: float | None,
    compute_capability: str | None,
) -> TierVerdict:
    """Judge one GPU from its four figures."""
    capability = float(compute_capability) if compute_capability else None
    return judge(
        name,
        {
            "cuda_cores": cuda_cores,
            "memory_gb": memory_gb,
            "memory_bandwidth_gbs": bandwidth_gbs,
            "compute_capability": capability,
        },
    )
