"""The knobs that replace a Keras function for the process (settings.KERAS_PATCHES),
one row each: how to set it, which one is in use, and how many of a model's layers it
acts on. Their modules are imported by name here, so that mypy and the layering test
see every one; a new such knob is its module, its `Knob` row and its row below.
LAYER_COUNTERS: every late knob that needs its layers in the model (these and
`rnn_algorithm`, set through the environment), how many of a model's layers it acts on."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tfaccel.optimize import attention, dropout, einsum, rnn_algorithm


@dataclass(frozen=True)
class Patch:
    """A knob that swaps a Keras function: `use(value)` sets it ("keras": Keras' own)
    and says what it did, `in_use()` names the current one, `count_layers(layers)`
    counts the layers of a model it would act on."""

    use: Callable[[str], str]
    in_use: Callable[[], str]
    count_layers: Callable[[list[Any]], int]


PATCHES: dict[str, Patch] = {
    "dropout": Patch(dropout.set_dropout, dropout.current_dropout, dropout.count_layers),
    "attention": Patch(
        attention.set_attention, attention.current_attention, attention.count_layers
    ),
    "einsum": Patch(einsum.set_einsum, einsum.current_einsum, einsum.count_layers),
}

LAYER_COUNTERS: dict[str, Callable[[list[Any]], int]] = {
    **{name: patch.count_layers for name, patch in PATCHES.items()},
    "rnn_algorithm": rnn_algorithm.count_layers,
}
