"""Settings that change how stenograph captures and guards.

Read them as `stenograph.config.recompile_limit`; change them by assignment or, scoped, with
`config.patch(recompile_limit=2)` as a context manager or decorator. Unknown names and values of
the wrong type raise `InvalidConfig` instead of being silently ignored.
"""

from __future__ import annotations

import contextlib
import os
import sys
import types
from typing import Any

from .errors import InvalidConfig

# settings taking a fixed set of values of mixed types (checked by identity for bools and None)
_CHOICES: dict[str, tuple[Any, ...]] = {"native_guards": ("auto", None, True, False)}

# STENOGRAPH_NATIVE_GUARDS=auto|1|0 sets the default of `native_guards`
_NATIVE_ENV = "STENOGRAPH_NATIVE_GUARDS"
_NATIVE_ENV_VALUES = {"": "auto", "auto": "auto", "1": True, "true": True, "0": False, "false": False}


def _native_guards_default() -> Any:
    text = os.environ.get(_NATIVE_ENV, "").strip().lower()
    if text not in _NATIVE_ENV_VALUES:
        raise InvalidConfig(f"{_NATIVE_ENV}={text!r}: expected auto, 1 or 0")
    return _NATIVE_ENV_VALUES[text]


_DEFAULTS: dict[str, Any] = {
    # compiles per code object before the frame runs eagerly for good (one warning)
    "recompile_limit": 8,
    # print internal stacks with warnings and logs
    "verbose": False,
    # run eager beside each newly compiled graph once and raise if results differ
    "verify_correctness": False,
    # sizes and ints are static until they change (then automatic dynamic applies)
    "assume_static_by_default": True,
    # a size or int that changes between calls becomes symbolic on recompile
    "automatic_dynamic_shapes": True,
    # ints / floats are always constants (one compile per value), never symbolic: off by default,
    # as torch.compile's settings of the same names, so a number that changes goes dynamic
    "specialize_int": False,
    "specialize_float": False,
    # mutations of Python objects made while tracing are replayed after the graph runs
    "replay_side_effects": True,
    # an internal failure while compiling a frame runs it eagerly instead of raising
    "suppress_errors": True,
    # Tensor.item() becomes a graph value instead of a graph break
    "capture_scalar_outputs": False,
    # ops whose output size depends on tensor data (nonzero, x[mask], unique, masked_select) are
    # recorded with an unbacked size instead of breaking the graph
    "capture_dynamic_output_shape_ops": False,
    # a graph compiled inside a DistributedDataParallel forward is split at DDP's gradient buckets,
    # each piece compiled on its own so all-reduces overlap the backward (torch.compile's setting
    # of the same name; backends/ddp_split.py)
    "optimize_ddp": True,
    # deepest inlining of user calls before the call runs as an opaque eager call
    "inline_depth_limit": 64,
    # benchmark switches, off only to measure what they are worth:
    # Inductor is told which graph inputs are parameters/buffers (static for CUDA graphs)
    "mark_static_inputs": True,
    # entries compiled for CUDA graphs advance the CUDA-graph trees' call counter per call
    # (benchmarks/cudagraph_loops.py)
    "cudagraph_call_marks": True,
    # guard functions call native (C++) checks for tensors and modules, built on first need
    # (guards/native.py): "auto" (or None) when they build, False never, True always (raises
    # NativeGuardsUnavailable when they cannot be built); applies to guards built afterwards
    "native_guards": _native_guards_default(),
}

_ALIASES = {"cache_size_limit": "recompile_limit"}


class _Config(types.ModuleType):
    """Module subclass so `config.x = v` is validated while `import config` keeps working.

    Each setting (and each alias) is an entry of the module's `__dict__`, as in a plain module:
    reads cost one attribute lookup, `dir(config)` lists them, and `unittest.mock.patch.object`
    finds them there and restores them by assignment (it deletes what it found elsewhere).
    """

    def _canonical(self, name: str) -> str:
        name = _ALIASES.get(name, name)
        if name not in _DEFAULTS:
            known = ", ".join(sorted([*_DEFAULTS, *_ALIASES]))
            raise InvalidConfig(f"stenograph.config has no setting {name!r}; known: {known}")
        return name

    def __getattr__(self, name: str) -> Any:
        # reached only for names missing from `__dict__`: never a setting
        if name.startswith("__"):
            raise AttributeError(name)
        return self.__dict__[self._canonical(name)]

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("_") and name not in _ALIASES:
            super().__setattr__(name, value)
            return
        key = self._canonical(name)
        if key in _CHOICES:
            if not any(value is c or (type(value) is str and value == c) for c in _CHOICES[key]):
                choices = ", ".join(repr(c) for c in _CHOICES[key])
                raise InvalidConfig(f"stenograph.config.{name} must be one of {choices}, got {value!r}")
            self._store(key, value)
            return
        expected = type(_DEFAULTS[key])
        if type(value) is not expected and not (expected is float and type(value) is int):
            raise InvalidConfig(
                f"stenograph.config.{name} must be {expected.__name__}, got {type(value).__name__} ({value!r})"
            )
        if expected is int and value < 0:
            raise InvalidConfig(f"stenograph.config.{name} must be >= 0, got {value}")
        self._store(key, value)

    def __delattr__(self, name: str) -> None:
        """`del config.x` restores the default (pytest's monkeypatch undoes a patch this way)."""
        if name.startswith("_") and name not in _ALIASES:
            super().__delattr__(name)
            return
        key = self._canonical(name)
        self._store(key, _DEFAULTS[key])

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(_DEFAULTS) | set(_ALIASES) | {"patch", "to_dict", "get_config_copy"})

    def _store(self, key: str, value: Any) -> None:
        """Set a setting and the aliases that name it."""
        self.__dict__[key] = value
        for alias, target in _ALIASES.items():
            if target == key:
                self.__dict__[alias] = value

    def patch(self, name_or_changes: str | dict | None = None, value: Any = None, /, **changes: Any) -> Any:
        """Change settings for a `with` block or a decorated function, then restore them.

        As torch's config modules: `patch(x=1)`, `patch("x", 1)` or `patch({"x": 1})`."""
        if isinstance(name_or_changes, str):
            changes = {name_or_changes: value, **changes}
        elif isinstance(name_or_changes, dict):
            changes = {**name_or_changes, **changes}
        elif name_or_changes is not None:
            raise InvalidConfig(f"config.patch() takes a setting's name or a dict, not {name_or_changes!r}")
        for name in changes:
            self._canonical(name)
        return _Patch(self, changes)

    def to_dict(self) -> dict[str, Any]:
        """The current value of every setting (aliases not repeated)."""
        return {key: self.__dict__[key] for key in _DEFAULTS}

    def get_config_copy(self) -> dict[str, Any]:
        """torch's config modules' name for `to_dict()`."""
        return self.to_dict()


class _Patch(contextlib.ContextDecorator):
    def __init__(self, cfg: _Config, changes: dict[str, Any]) -> None:
        self._cfg = cfg
        self._changes = changes
        self._saved: list[dict[str, Any]] = []

    def __enter__(self) -> _Patch:
        self._saved.append(self._cfg.to_dict())
        for name, value in self._changes.items():
            setattr(self._cfg, name, value)
        return self

    def __exit__(self, *exc: object) -> None:
        for key, value in self._saved.pop().items():
            self._cfg._store(key, value)


_module = sys.modules[__name__]
_config = _Config(__name__, __doc__)
_config.__dict__.update({k: v for k, v in _module.__dict__.items() if k in ("__file__", "__spec__", "__loader__")})
for _key, _value in _DEFAULTS.items():
    _config._store(_key, _value)
sys.modules[__name__] = _config
