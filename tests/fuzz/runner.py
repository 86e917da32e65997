"""Differential runner: one generated program run eagerly and compiled, every observable compared.

Each run execs the program's source into a fresh module, so eager and each backend have their own
code objects, globals and class. Per call it records the outcome (result or raised exception), the
arguments afterwards (in-place changes), the module's globals and class attributes, what was printed
and the RNG state; the compiled runs must match the eager run on all of them. A program whose state
does not change between calls must not compile again on the identical second call.
"""

from __future__ import annotations

import contextlib
import io
import linecache
import math
import re
import types
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch._dynamo.symbolic_convert import TensorifyState

import stenograph
from stenograph.testing import CompileCounterWithBackend

from .generator import Program

BACKENDS = ("eager", "aot_eager")


@dataclass
class Observed:
    """What one call of f left behind, in comparable form."""

    outcome: Any
    args: Any
    state: Any
    printed: str
    rng: bytes


@dataclass
class Run:
    calls: list[Observed] = field(default_factory=list)
    graphs_after: list[int] = field(default_factory=list)  # graphs compiled after each call
    warnings: list[str] = field(default_factory=list)


@dataclass
class Mismatch:
    """One difference between the eager and a compiled run of a program."""

    seed: int
    backend: str
    call: int
    what: str
    source: str

    def signature(self) -> str:
        """The kind of difference, without values: groups mismatches of one kind."""
        head, _, rest = self.what.partition(": ")
        raised = re.search(r"raised (\w+)", rest)
        if raised:
            return f"{head}: raised {raised.group(1)}"
        for words in ("tensor values differ", "sign of zero", "tensor torch", "new graph"):
            if words in rest:
                return f"{head}: {words}"
        return head

    def report(self) -> str:
        return (
            f"fuzz seed {self.seed}, backend {self.backend!r}, call {self.call}: {self.what}\n"
            f"--- program (run it with: python -m tests.fuzz --seed {self.seed} --programs 1) ---\n"
            f"{self.source}"
        )


class _Raised:
    """An exception as an outcome: its type and message."""

    def __init__(self, exc: BaseException) -> None:
        self.type = type(exc).__name__
        self.message = str(exc)

    def __repr__(self) -> str:
        return f"raised {self.type}({self.message!r})"


def load(program: Program, tag: str) -> types.ModuleType:
    """Exec the program into a fresh module; its source is registered for tracebacks."""
    filename = f"<fuzz-{program.seed}-{tag}>"
    linecache.cache[filename] = (len(program.source), None, program.source.splitlines(True), filename)
    module = types.ModuleType(f"fuzz_{program.seed}_{tag}")
    module.__file__ = filename
    exec(compile(program.source, filename, "exec"), module.__dict__)
    return module


def snapshot(value: Any, module: types.ModuleType, seen: dict[int, tuple[str, Any]] | None = None) -> Any:
    """A comparable copy of value: tensors cloned, containers rebuilt, objects by their state.

    Aliasing is kept: a value met again (an input returned, an object in two places) becomes
    ("alias", first path), so `y = x.add_(1); return y` is told apart from returning a copy.
    """
    # what was met, by id, with the object itself: held while `seen` lives (it is shared by the
    # snapshots of one call), so that no id is reused by an object made later (a state view)
    seen = {} if seen is None else seen
    # the classes whose instances are compared by their state: the object-model programs name
    # theirs in FUZZ_TYPES and read the state with fuzz_view; the others have C0
    objects = getattr(module, "FUZZ_TYPES", None) or (module.C0,)

    def walk(v: Any, path: str) -> Any:
        if isinstance(v, (torch.Tensor, np.ndarray, list, dict, set, *objects)):
            if id(v) in seen:
                return ("alias", seen[id(v)][0])
            seen[id(v)] = (path, v)
        if isinstance(v, objects) and hasattr(module, "fuzz_view"):
            return (type(v).__name__, walk(module.fuzz_view(v), f"{path}.state"))
        if isinstance(v, torch.Tensor):
            return ("tensor", v.detach().clone(), v.requires_grad)
        if isinstance(v, (np.ndarray, np.generic)):
            # kind, dtype and shape exactly; values as float64 (complex128) tensors, within tolerance
            wide = np.complex128 if v.dtype.kind == "c" else np.float64
            kind = "ndarray" if isinstance(v, np.ndarray) else f"numpy {type(v).__name__}"
            return (kind, v.dtype.name, np.shape(v), torch.from_numpy(np.array(v, dtype=wide)))
        if isinstance(v, (list, tuple)):
            return (type(v).__name__, [walk(e, f"{path}[{i}]") for i, e in enumerate(v)])
        if isinstance(v, dict):
            return ("dict", [(k, walk(e, f"{path}[{k!r}]")) for k, e in v.items()])
        if isinstance(v, (set, frozenset)):
            return (type(v).__name__, sorted(v, key=repr))
        if isinstance(v, objects):
            return ("C0", walk(dict(vars(v)), f"{path}.__dict__"))
        if isinstance(v, float):
            return ("float", v)
        if v is getattr(module, "_MISSING", None):
            return ("_MISSING",)
        if isinstance(v, (int, str, bool, type(None), torch.Size, torch.dtype)):
            return (type(v).__name__, v)
        return ("other", type(v).__name__, repr(v))

    return walk(value, "")


def module_state(module: types.ModuleType) -> dict[str, Any]:
    """The globals f may write and C0's class attributes (an object-model program's fuzz_state)."""
    if hasattr(module, "fuzz_state"):
        return module.fuzz_state()
    state = {k: v for k, v in vars(module).items() if k.startswith("G_")}
    state["C0.k"] = module.C0.k
    return state


def same(a: Any, b: Any, path: str) -> str | None:
    """None when a (compiled) and b (eager) agree, else where and how they differ."""
    if isinstance(b, torch.Tensor):
        if not isinstance(a, torch.Tensor):
            return f"{path}: {type(a).__name__} != tensor"
        if a.shape != b.shape or a.dtype != b.dtype:
            return f"{path}: tensor {a.dtype}{list(a.shape)} != {b.dtype}{list(b.shape)}"
        if not torch.allclose(a, b, rtol=1e-4, atol=1e-5, equal_nan=True):
            return f"{path}: tensor values differ (max diff {(a - b).abs().nan_to_num(0.0).max().item():.3g})"
        return None
    if isinstance(b, float):
        if not isinstance(a, float):
            return f"{path}: {_short(a)} != {b!r}"
        if math.isnan(b) and math.isnan(a):
            return None
        if a == b == 0.0 and math.copysign(1.0, a) != math.copysign(1.0, b):
            return f"{path}: {a!r} != {b!r} (sign of zero)"
        if not math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-6):
            return f"{path}: {a!r} != {b!r}"
        return None
    if isinstance(b, tuple) and b and isinstance(b[0], str) and (b[0] == "ndarray" or b[0].startswith("numpy ")):
        return _same_numpy(a, b, path)
    if isinstance(b, tuple) and isinstance(a, tuple) and b and a and isinstance(b[0], str) and a[0] != b[0]:
        return f"{path}: {_short(a)} != {_short(b)}"  # snapshots of different kinds (alias / tensor / ...)
    if isinstance(b, (tuple, list)):
        if type(a) is not type(b) or len(a) != len(b):
            return f"{path}: {_short(a)} != {_short(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            diff = same(x, y, f"{path}.{i}")
            if diff:
                return diff
        return None
    if isinstance(b, dict):
        if not isinstance(a, dict) or list(a) != list(b):
            return f"{path}: {_short(a)} != {_short(b)}"
        for k in b:
            diff = same(a[k], b[k], f"{path}[{k!r}]")
            if diff:
                return diff
        return None
    if type(a) is not type(b) or a != b:
        return f"{path}: {_short(a)} != {_short(b)}"
    return None


def _same_numpy(a: Any, b: Any, path: str) -> str | None:
    """Snapshots of a NumPy array or scalar: kind, dtype and shape exactly, values within the
    precision of the dtype (single precision to 1e-3: a float32 power or sum in another order)."""
    if not isinstance(a, tuple) or a[:3] != b[:3]:
        return f"{path}: {_short(a[:3] if isinstance(a, tuple) else a)} != {_short(b[:3])}"
    tolerance = 1e-3 if b[1] in ("float32", "complex64") else 1e-6
    if not torch.allclose(a[3], b[3], rtol=tolerance, atol=tolerance, equal_nan=True):
        return f"{path}: {b[0]} values differ (max diff {(a[3] - b[3]).abs().nan_to_num(0.0).max().item():.3g})"
    return None


def _short(value: Any) -> str:
    text = " ".join(repr(value).split())
    return text if len(text) <= 160 else text[:157] + "..."


def run(program: Program, backend: str | None) -> Run:
    """Call the program's f `program.calls` times, eagerly (backend None) or compiled."""
    module = load(program, backend or "ref")
    fn = module.f
    counter = None
    if backend is not None:
        counter = CompileCounterWithBackend(backend)
        fn = stenograph.compile(module.f, backend=counter)
    result = Run()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", stenograph.StenographWarning)
        for call in range(program.calls):
            module.before_call(call)
            args, kwargs = module.make_args(call)
            torch.manual_seed(1000 + (call if call != 1 else 0))
            out = io.StringIO()
            try:
                with contextlib.redirect_stdout(out):
                    value = fn(*args, **kwargs)
                outcome = value
            except Exception as exc:  # noqa: BLE001 - the program's own errors are an outcome
                outcome = _Raised(exc)
            seen: dict[int, tuple[str, Any]] = {}
            observed = Observed(
                outcome=repr(outcome) if isinstance(outcome, _Raised) else snapshot(outcome, module, seen),
                args=snapshot((args, kwargs), module, seen),
                state=snapshot(module_state(module), module),
                printed=out.getvalue(),
                rng=torch.get_rng_state().numpy().tobytes(),
            )
            result.calls.append(observed)
            result.graphs_after.append(counter.frame_count if counter else 0)
    result.warnings = [str(w.message).splitlines()[0] for w in caught if w.category is stenograph.StenographWarning]
    return result


def compare(program: Program, ref: Run, got: Run, backend: str) -> list[Mismatch]:
    """The differences of a compiled run from the eager one (at most one per call)."""
    found = []
    for call, (e, c) in enumerate(zip(ref.calls, got.calls)):
        checks = [
            ("result", same(c.outcome, e.outcome, "result")),
            ("arguments after the call", same(c.args, e.args, "args")),
            ("globals / class attributes", same(c.state, e.state, "state")),
            ("printed", None if c.printed == e.printed else f"{c.printed!r} != {e.printed!r}"),
            ("RNG state", None if c.rng == e.rng else "torch RNG state differs after the call"),
        ]
        for what, diff in checks:
            if diff:
                found.append(Mismatch(program.seed, backend, call, f"{what}: {diff}", program.source))
                break
    if program.stable and len(got.graphs_after) > 1 and got.graphs_after[1] != got.graphs_after[0] and not found:
        extra = got.graphs_after[1] - got.graphs_after[0]
        what = f"recompiled on an identical call: {extra} new graph(s)"
        found.append(Mismatch(program.seed, backend, 1, what, program.source))
    return found


def check_program(program: Program, backends: tuple[str, ...] = BACKENDS) -> tuple[list[Mismatch], list[str]]:
    """Mismatches of every backend against eager, and the StenographWarnings the runs gave."""
    ref = run(program, None)
    mismatches, warned = [], []
    for backend in backends:
        # torch keeps the floats its tensorify pass asked to specialise in a process-wide set that
        # only torch._dynamo.reset() clears; cleared here so that a program's outcome does not
        # depend on the programs run before it (FINDINGS.md, F4)
        TensorifyState.clear()
        with stenograph.config.patch(suppress_errors=False):
            try:
                got = run(program, backend)
            except Exception as exc:  # noqa: BLE001 - an internal error is a finding
                what = f"internal error: {type(exc).__name__}: {exc}"
                mismatches.append(Mismatch(program.seed, backend, -1, what, program.source))
                continue
            finally:
                stenograph.reset()
        mismatches += compare(program, ref, got, backend)
        warned += got.warnings
    return mismatches, warned
