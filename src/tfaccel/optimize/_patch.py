"""One function of Keras' TensorFlow backend that a configure knob replaces, for the
process (tfaccel.optimize.dropout, tfaccel.optimize.einsum).

Keras' layers look the function up in its module at each call, so models built before
or after alike use the replacement; Keras' own is kept at the first patch, so that
"keras" restores it. The replacements are wrapped once so that AutoGraph leaves them
as they are (plain TensorFlow ops; converting them would only warn about imports).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tfaccel import _compat
from tfaccel._tf import import_tensorflow
from tfaccel.errors import InputError


class BackendPatch:
    """`keras.src.backend.tensorflow.<module>.<attr>`, replaced by name.

    `kinds`: each name -> (its function, None for Keras' own; the configure report's
    one-line description). `needed`: what the module must have for the replacements.
    """

    def __init__(
        self,
        knob: str,
        module: str,
        attr: str,
        needed: tuple[str, ...],
        kinds: dict[str, tuple[Callable[..., Any] | None, str]],
    ) -> None:
        self.knob, self.module_name, self.attr = knob, module, attr
        self.needed = needed
        self.kinds = kinds
        self._keras: Callable[..., Any] | None = None
        self._module: Any = None  # the module, once checked
        self._wrapped: dict[str, Callable[..., Any]] = {}

    def module(self) -> Any:
        """Keras' TensorFlow-backend module, checked (once) for what the replacements
        use: `flat_einsum` asks for it at every call."""
        if self._module is not None:
            return self._module
        import importlib

        import keras

        if keras.backend.backend() != "tensorflow":
            raise InputError(
                f"configure({self.knob}=...) needs Keras' TensorFlow backend",
                expected="KERAS_BACKEND=tensorflow",
                received=f"backend {keras.backend.backend()!r}",
            )
        name = f"keras.src.backend.tensorflow.{self.module_name}"
        mod = importlib.import_module(name)
        missing = [attr for attr in (self.attr, *self.needed) if not hasattr(mod, attr)]
        if missing:
            raise InputError(
                "this Keras version's TensorFlow backend has no " + ", ".join(missing),
                expected=f"a Keras with these in {name} (verified on {_compat.KERAS_VERIFIED})",
                received=f"keras {keras.__version__}",
                hint=f"configure({self.knob}='keras') leaves Keras' {self.attr} as it is",
            )
        self._module = mod
        return mod

    def keras_own(self) -> Callable[..., Any]:
        """Keras' function, as it was before the first patch."""
        if self._keras is None:
            self._keras = getattr(self.module(), self.attr)
        return self._keras

    def _implementation(self, name: str) -> Callable[..., Any]:
        if name not in self.kinds:
            raise InputError(
                f"unknown {self.knob}", expected=" | ".join(self.kinds), received=repr(name)
            )
        own = self.keras_own()
        implementation = self.kinds[name][0]
        if implementation is None:
            return own
        if name not in self._wrapped:
            tf = import_tensorflow()
            self._wrapped[name] = tf.autograph.experimental.do_not_convert(implementation)
        return self._wrapped[name]

    def set(self, name: str) -> str:
        """Make Keras call `name`'s function; returns its one-line description."""
        implementation = self._implementation(name)
        setattr(self.module(), self.attr, implementation)
        return self.kinds[name][1]

    def current(self) -> str:
        """The name in use ("keras" when tfaccel never changed it)."""
        try:
            installed = getattr(self.module(), self.attr)
        except InputError:
            return "keras"
        for name, impl in self._wrapped.items():
            if installed is impl:
                return name
        return "keras"
