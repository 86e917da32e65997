"""NumPy's own answer to a call, asked while tracing before the call is trusted to torch._numpy.

torch._numpy follows NumPy closely but not everywhere: result dtypes differ in corners (the sum
of a uint8 array, `np.round` of a bool array), some of its kernels do not exist for a dtype that
NumPy handles, and a NumPy scalar keeps its dtype where torch._numpy sees a Python number. So
each traced NumPy call is first run for real, twice, on stand-ins of its arrays (arrays of the
same dtype and shape; a read-only broadcast of one value for large ones): by NumPy, and by the
node's own `torch._numpy` call on tensors. Where one raises and the other does not, or their
results differ in structure, type (array, NumPy scalar, Python number) or dtype, the call is
refused; otherwise NumPy's answer says what the traced result is (a 0-d array or a scalar, a
tuple or a list).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch._subclasses.fake_tensor import unset_fake_temporarily

from ..errors import Unsupported

# stand-ins up to this many elements are real arrays; larger ones broadcast one value
_REAL_STAND_IN_LIMIT = 1 << 20


class StandIn:
    """An array operand of a call (or a tensor NumPy reads as one), one per tracker, so that an
    operand passed twice is one object on both sides."""

    def __init__(self, dtype: str, shape: tuple[int, ...], scalar: bool) -> None:
        self.dtype = dtype
        self.shape = shape
        self.scalar = scalar  # a NumPy scalar to NumPy (its methods give scalars), a 0-d tensor to torch


class ArrayKind:
    """What NumPy gives where the trace has a tensor: an array, or a NumPy scalar (`scalar`);
    `operand`: the stand-in NumPy gave back itself (`np.asarray(a)`, `a += 1`); `copy`: NumPy's
    array is new memory where torch's shares an operand's (`a.astype(a.dtype)`, `a.flatten()`)."""

    def __init__(self, scalar: bool, operand: StandIn | None = None, copy: bool = False) -> None:
        self.scalar = scalar
        self.operand = operand
        self.copy = copy


class Oracle:
    """The two real runs of one call, on stand-ins made once per operand."""

    def __init__(self, numpy: Any) -> None:
        self.np = numpy
        self._arrays: dict[int, Any] = {}
        self._tensors: dict[int, torch.Tensor] = {}
        self._stand_ins: dict[int, StandIn] = {}
        self._values = numpy.random.default_rng(0)  # NumPy's global generator is left alone

    def numpy_answer(
        self, reference: Callable[..., Any], args: list[Any], kwargs: dict[str, Any], describe: str
    ) -> Any:
        """NumPy's result on the stand-ins; Unsupported where NumPy raises (eager raises too)."""
        try:
            with self.np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return reference(*self._numpy_side(args), **self._numpy_side(kwargs))
        except Exception as e:
            raise Unsupported(f"{describe}: NumPy raises {type(e).__name__} for these operands ({e})") from e

    def kinds(
        self, expected: Any, mirror: Callable[..., Any], args: list[Any], kwargs: dict[str, Any], describe: str
    ) -> Any:
        """`expected`'s structure, with an `ArrayKind` for each array or NumPy scalar, after
        checking that `mirror` (the node's call) gives the same on tensors; Unsupported if not."""
        try:
            with unset_fake_temporarily(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                actual = mirror(*self._torch_side(args), **self._torch_side(kwargs))
        except Exception as e:
            raise Unsupported(f"{describe}: torch._numpy raises {type(e).__name__} where NumPy does not ({e})") from e
        return self._compare(expected, actual, describe)

    def _compare(self, expected: Any, actual: Any, describe: str) -> Any:
        np = self.np
        if isinstance(expected, (tuple, list)) and isinstance(actual, (tuple, list)) and len(expected) == len(actual):
            return type(expected)(self._compare(e, a, describe) for e, a in zip(expected, actual))
        if isinstance(expected, (np.ndarray, np.generic)) and isinstance(actual, torch.Tensor):
            same_dtype = str(actual.dtype).removeprefix("torch.") == expected.dtype.name
            if same_dtype and tuple(actual.shape) == np.shape(expected) and self._same_values(expected, actual):
                return self._memory(expected, actual, describe)
        elif expected is None and actual is None:
            return None
        elif type(expected) in (bool, int, float, complex) and type(actual) is type(expected) and expected == actual:
            return expected
        raise Unsupported(
            f"{describe}: torch._numpy's result differs from NumPy's ({_shown(actual)}, NumPy: {_shown(expected)})"
        )

    def _memory(self, expected: Any, actual: torch.Tensor, describe: str) -> ArrayKind:
        """Which operands the result is, or shares memory with, for NumPy and for torch: where
        NumPy's is new memory and torch's is not, the trace copies it; where NumPy's shares an
        operand's and torch's does not, writes through one would not reach the other: refused."""
        if isinstance(expected, self.np.generic):
            return ArrayKind(scalar=True)
        itself = next((self._stand_ins[key] for key, array in self._arrays.items() if array is expected), None)
        numpy_shares = {key for key, array in self._arrays.items() if self.np.may_share_memory(expected, array)}
        torch_shares = {key for key, tensor in self._tensors.items() if _overlap(actual, tensor)}
        if numpy_shares == torch_shares:
            return ArrayKind(scalar=False, operand=itself)
        if not numpy_shares:
            return ArrayKind(scalar=False, copy=True)
        raise Unsupported(f"{describe}: NumPy's result shares an operand's memory, torch._numpy's does not")

    def _same_values(self, expected: Any, actual: torch.Tensor) -> bool:
        """The values agree too (on the same stand-ins): a dtype alone misses a Python number
        NumPy compares exactly and torch._numpy casts first (`uint8_array < -1`)."""
        np = self.np
        got = actual.detach().resolve_conj().resolve_neg().numpy()
        if expected.dtype.kind in "fc":
            tolerance = 1e-2 if expected.dtype.itemsize <= 4 and expected.dtype.kind == "f" else 1e-5
            return bool(np.allclose(got, expected, rtol=tolerance, atol=tolerance, equal_nan=True))
        return bool(np.array_equal(got, expected))

    def _numpy_side(self, value: Any) -> Any:
        if isinstance(value, StandIn):
            return self._array(value)[()] if value.scalar else self._array(value)
        return _mapped(value, self._numpy_side)

    def _torch_side(self, value: Any) -> Any:
        if isinstance(value, StandIn):
            self._array(value)
            return self._tensors[id(value)]
        return _mapped(value, self._torch_side)

    def _array(self, stand_in: StandIn) -> Any:
        array = self._arrays.get(id(stand_in))
        if array is None:
            np, shape = self.np, stand_in.shape
            size = 1
            for s in shape:
                size *= s
            made = self._values_of(stand_in.dtype, shape if size <= _REAL_STAND_IN_LIMIT else ())
            # torch's copy is taken now, before NumPy's run can change the array in place
            tensor = torch.from_numpy(made.copy())
            if size > _REAL_STAND_IN_LIMIT:  # one value, broadcast: read-only to both
                made, tensor = np.broadcast_to(made, shape), tensor.expand(shape)
            self._arrays[id(stand_in)], self._tensors[id(stand_in)] = made, tensor
            self._stand_ins[id(stand_in)] = stand_in
            array = made
        return array

    def _values_of(self, dtype: str, shape: tuple[int, ...]) -> Any:
        """Values that make no call raise for its dtype alone: no zeros among integers (torch
        raises on an integer division by zero), nonzero floats."""
        rng, np = self._values, self.np
        if dtype == "bool":
            return rng.random(shape) > 0.5
        if dtype.startswith(("int", "uint")):
            return rng.integers(1, 4, shape).astype(dtype)
        values = rng.standard_normal(shape) + 2.0
        if dtype.startswith("complex"):
            values = values + 1j * (rng.standard_normal(shape) + 2.0)
        return np.asarray(values).astype(dtype)


def _overlap(tensor: torch.Tensor, other: torch.Tensor) -> bool:
    """Whether two tensors' storages overlap (a view of the other, or the same tensor)."""
    a, b = tensor.untyped_storage(), other.untyped_storage()
    return a.data_ptr() < b.data_ptr() + b.nbytes() and b.data_ptr() < a.data_ptr() + a.nbytes()


def _mapped(value: Any, side: Callable[[Any], Any]) -> Any:
    if type(value) in (list, tuple):
        return type(value)(side(v) for v in value)
    if type(value) is dict:
        return {k: side(v) for k, v in value.items()}
    if type(value) is slice:
        return slice(side(value.start), side(value.stop), side(value.step))
    return value


def _shown(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor of {str(value.dtype).removeprefix('torch.')}"
    dtype = getattr(value, "dtype", None)
    return f"{type(value).__name__} of {dtype}" if dtype is not None else type(value).__name__
