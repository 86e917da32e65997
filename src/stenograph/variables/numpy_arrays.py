"""NumPy code traced as tensor code, through `torch._numpy` (NumPy's API written in torch).

An ndarray in the trace is a tensor in the graph. An array read from the frame is a graph input
made by `torch.from_numpy` (it shares the array's memory, so writes in the graph reach the
array); a NumPy scalar read from the frame is a 0-d input of its dtype (`scalar_input`), so new
values reuse the graph; `t.numpy()` is an alias of `t`; a NumPy function, ndarray method or operator applied to
arrays is one node, a `NumpyCall`, which runs its `torch._numpy` counterpart on
`torch._numpy.ndarray`s wrapping the node's tensors. The tracker (`NdarrayVariable`) remembers
that the value is an array: its metadata answers as NumPy's does (`dtype` a NumPy dtype,
`strides` in bytes), and where it leaves the graph it becomes an ndarray again, sharing the
graph output's memory.

Each call is traced only once NumPy and the node's own call agree on stand-ins of its operands
(`numpy_oracle`: result types, dtypes, values, and which operands each result is or shares memory
with); that answer also says which 0-d results are NumPy scalars. Where NumPy and the trace could
disagree, the call is refused (a graph break: the code runs eagerly): a disagreement on the
stand-ins, integer division and powers (their errors depend on the values), arrays of dtypes
torch lacks and read-only arrays, arrays beside tensors in operators, reads of an array's values
(`bool(a)`, `a.tolist()` outside `capture_scalar_outputs`). `numpy.random` draws run eagerly
unless `config.use_numpy_random_stream` is off: torch's generator draws other numbers than NumPy's.
"""

from __future__ import annotations

import functools
import importlib
import math
import operator
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from torch.utils import _pytree as pytree

from .. import config
from ..errors import BreakKind, Unsupported
from ..guards.sources import ArrayTensorSource
from .base import Variable
from .constants import constant
from .containers import ListVariable, SequenceVariable, SliceVariable, TupleVariable
from .numpy_oracle import ArrayKind, Oracle, StandIn
from .symbolic import GraphValueVariable, SymNodeVariable
from .tensor import TRACED_METHODS, TensorMethodVariable, TensorVariable
from .trace_rules import TENSOR_DATA_HINT

if TYPE_CHECKING:
    from ..guards.sources import Source
    from ..interpreter.frame import Frame

# the dtypes an array may have to be traced: those torch.from_numpy shares and torch._numpy knows
_DTYPES = frozenset(
    {"bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64", "complex64", "complex128"}
)
# NumPy's namespaces torch._numpy mirrors: NumPy module -> torch._numpy module
_NAMESPACES = {
    "numpy": "torch._numpy",
    "numpy.linalg": "torch._numpy.linalg",
    "numpy.fft": "torch._numpy.fft",
    "numpy.random": "torch._numpy.random",
}
# ndarray attributes torch._numpy computes (as properties): recorded as nodes
_COMPUTED_ATTRIBUTES = frozenset({"T", "real", "imag", "mT"})
# ndarray methods whose result is the array's values as Python objects
_VALUE_READS = frozenset({"tolist", "item", "__bool__", "__int__", "__float__", "__index__", "__len__"})


def numpy() -> Any:
    """NumPy, where the process has imported it (no array exists otherwise), else None."""
    return sys.modules.get("numpy")


def is_ndarray(value: Any) -> bool:
    np = numpy()
    return np is not None and type(value) is np.ndarray


def tensor_of_array(array: Any) -> torch.Tensor | None:
    """The tensor sharing a writable ndarray's memory: a graph input's value, read on each call.
    None where torch cannot share it (a read-only array, one of another dtype or layout): the
    tensor guard then fails, so the frame is traced again and refused."""
    try:
        if not array.flags.writeable or array.dtype.name not in _DTYPES:
            return None
        return torch.from_numpy(array)
    except (AttributeError, TypeError, ValueError):
        return None


def array_of(tensor: torch.Tensor) -> Any:
    """The ndarray a graph output standing for an array becomes (sharing its memory)."""
    return tensor.numpy(force=True)


def numpy_dtype(dtype: torch.dtype) -> Any:
    """NumPy's dtype for a torch dtype; Unsupported for one NumPy lacks (bfloat16)."""
    name = str(dtype).removeprefix("torch.")
    if name not in _DTYPES:
        raise Unsupported(f"a NumPy array of torch dtype {name}, which NumPy has not")
    return numpy().dtype(name)


class NumpyCall:
    """A graph target running `torch._numpy`'s (or `operator`'s) function at `path` on the arrays
    the graph holds as tensors: tensors in become torch._numpy arrays, arrays out become tensors.
    One object per path (`numpy_call`); it pickles as its path."""

    def __init__(self, module: str, path: str) -> None:
        target: Any = importlib.import_module(module)
        for part in path.split("."):
            target = getattr(target, part)
        self.fn = target.fget if isinstance(target, property) else target
        self.module_name = module
        self.path = path
        self.__name__ = self.__qualname__ = "numpy_" + path.replace(".", "_")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # the arguments themselves, not tensors in lists: torch._numpy reads `[t1, t2]` as a
        # sequence of arrays, but not a sequence of its own arrays
        array = importlib.import_module("torch._numpy").ndarray
        args = tuple(array(a) if isinstance(a, torch.Tensor) else a for a in args)
        kwargs = {k: array(v) if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
        result = self.fn(*args, **kwargs)
        return pytree.tree_map_only(array, lambda a: a.tensor, result)

    def __reduce__(self) -> tuple:
        return numpy_call, (self.module_name, self.path)

    def __repr__(self) -> str:
        return f"NumpyCall({self.module_name}.{self.path})"


@functools.cache
def numpy_call(module: str, path: str) -> NumpyCall:
    return NumpyCall(module, path)


class NdarrayVariable(GraphValueVariable):
    """A NumPy array: a tensor in the graph (`node`, `fake`), an ndarray to the program."""

    fake: torch.Tensor
    # a 0-d result NumPy gives as a scalar (`np.sum(a)`, `a[0]` of a vector): immutable, rebuilt
    # as a NumPy scalar
    scalar: bool = False

    def is_tensor(self) -> bool:
        return True

    def python_type(self) -> type:
        return numpy_dtype(self.fake.dtype).type if self.scalar else numpy().ndarray

    def describe(self) -> str:
        shape = "x".join(str(s) for s in self.fake.shape) or "0-d"
        return f"ndarray {self.node.name} ({shape}, {str(self.fake.dtype).removeprefix('torch.')})"

    def reconstruct(self, rebuild: Any) -> str:
        # built once: two names for one array stay one object (`b = np.asarray(a)`)
        array = f"{rebuild.writer.bind(array_of, 'array_of')}({rebuild.graph_value(self.node)})"
        return rebuild.build_once(self, lambda: f"{array}[()]" if self.scalar else array)

    def truth(self, frame: Frame) -> bool:
        raise _value_read(f"bool() of {self.describe()}")

    def length(self, frame: Frame) -> int:
        if self.fake.dim() == 0:
            raise Unsupported(f"len() of {self.describe()}: eager raises TypeError (an unsized object)")
        return int(self.fake.shape[0])

    def unpack(self, frame: Frame) -> list[Variable]:
        return [self.getitem(frame, constant(i)) for i in range(self.length(frame))]

    def getitem(self, frame: Frame, key: Variable) -> Variable:
        return record(frame, "operator", "getitem", [self, key], {}, "ndarray indexing", reference=operator.getitem)

    def setitem(self, frame: Frame, key: Variable, value: Variable) -> None:
        if self.scalar:
            raise Unsupported(f"item assignment to {self.describe()}, a NumPy scalar: eager raises TypeError")
        record(
            frame, "operator", "setitem", [self, key, value], {}, "ndarray item assignment", reference=operator.setitem
        )

    def unary_op(self, frame: Frame, op: Any) -> Variable | None:
        if op is operator.not_:
            raise _value_read(f"`not` on {self.describe()}")
        return record(frame, "operator", op.__name__, [self], {}, f"operator {op.__name__}", reference=op)

    def getattr(self, frame: Frame, name: str) -> Variable:
        fake = self.fake
        static = all(type(s) is int for s in (*fake.shape, *fake.stride()))
        if name == "shape":
            return TupleVariable([frame.output.sym_size(self, d) for d in range(fake.dim())])  # type: ignore[arg-type]
        if name == "ndim":
            return constant(fake.dim())
        if name == "dtype":
            return constant(numpy_dtype(fake.dtype))
        if name == "itemsize":
            return constant(fake.element_size())
        if name == "size":
            if static:
                return constant(math.prod(fake.shape))
            return frame.output.call("call_method", "numel", [self.as_tensor()], {}, "ndarray.size")
        if name in ("strides", "nbytes") and static:
            if name == "nbytes":
                return constant(math.prod(fake.shape) * fake.element_size())
            return constant(tuple(s * fake.element_size() for s in fake.stride()))
        if name in _COMPUTED_ATTRIBUTES:
            reference = operator.attrgetter(name)
            return record(frame, "torch._numpy", f"ndarray.{name}", [self], {}, f"ndarray.{name}", reference=reference)
        if callable(getattr(importlib.import_module("torch._numpy").ndarray, name, None)):
            return NdarrayMethodVariable(self, name)
        raise Unsupported(f"attribute {name!r} of {self.describe()} (torch._numpy has no counterpart)")

    def call_method(self, frame: Frame, name: str, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        return self.getattr(frame, name).call(frame, args, kwargs)

    def as_tensor(self) -> TensorVariable:
        """The graph's tensor for this array, as a tensor tracker for the graph's own operations
        (not an object of the program: `torch.from_numpy` makes a new one, `as_torch`)."""
        return TensorVariable(self.node, self.fake)


class NdarrayMethodVariable(Variable):
    """`array.method`, bound: calling it records torch._numpy's method."""

    def __init__(self, array: NdarrayVariable, name: str) -> None:
        self.array = array
        self.name = name

    def describe(self) -> str:
        return f"ndarray.{self.name}"

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if self.name in ("tolist", "item") and not args and not kwargs:
            # the values as Python numbers, as the tensor's are (captured or refused alike)
            return TensorMethodVariable(self.array.as_tensor(), self.name).call(frame, [], {})
        if self.name in _VALUE_READS:
            raise _value_read(f"ndarray.{self.name}() of {self.array.describe()}")
        name = self.name

        def reference(array: Any, *args: Any, **kwargs: Any) -> Any:
            return getattr(array, name)(*args, **kwargs)

        path, describe = f"ndarray.{name}", f"ndarray.{name}()"
        return record(frame, "torch._numpy", path, [self.array, *args], kwargs, describe, reference=reference)

    def reconstruct(self, rebuild: Any) -> str:
        return f"{rebuild.expr(self.array)}.{self.name}"


class _NumpyCallable(Variable):
    """A NumPy function or class: the object itself, rebuilt as it is."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.value_object = fn

    def python_type(self) -> type:
        return type(self.fn)

    def reconstruct(self, rebuild: Any) -> str:
        return rebuild.writer.bind(self.fn, "fn")


class NumpyFunctionVariable(_NumpyCallable):
    """A NumPy function torch._numpy has (`np.sum`, `np.linalg.norm`): a call records it."""

    def __init__(self, fn: Any, module: str, name: str) -> None:
        super().__init__(fn)
        self.module = module
        self.name = name

    def describe(self) -> str:
        return f"{self.module.replace('torch._numpy', 'numpy')}.{self.name}"

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if not config.trace_numpy:
            raise Unsupported(f"call to {self.describe()}: NumPy is not traced (config.trace_numpy is off)")
        if self.module.endswith(".random") and config.use_numpy_random_stream:
            raise Unsupported(
                f"call to {self.describe()}: NumPy's random draws run eagerly, so that they are NumPy's numbers",
                hint="set config.use_numpy_random_stream = False to draw them from torch's generator in the graph",
            )
        return record(frame, self.module, self.name, args, kwargs, f"{self.describe()}()", reference=self.fn)


class NumpyFoldedVariable(_NumpyCallable):
    """A NumPy function or class pure on constants (`np.dtype("float")`, `np.issubdtype`,
    `np.finfo`, `np.float32(2.5)`): called while tracing, its result a constant."""

    def describe(self) -> str:
        return f"numpy.{getattr(self.fn, '__name__', self.fn)}"

    def as_constant(self) -> Any:
        return self.fn  # a class for `isinstance`, `dtype=`

    def getattr(self, frame: Frame, name: str) -> Variable:
        return frame.wrap(getattr(self.fn, name), None)  # NumPy's own classes and functions: fixed

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        values = [static_value(a) for a in [*args, *kwargs.values()]]
        if any(v is _UNKNOWN for v in values):
            raise Unsupported(f"call to {self.describe()} with arguments that are not constants")
        try:
            return constant(self.fn(*values[: len(args)], **dict(zip(kwargs, values[len(args) :]))))
        except Exception as e:
            raise Unsupported(f"call to {self.describe()} raised {type(e).__name__}: it runs eagerly") from e


_UNKNOWN = object()


def static_value(var: Variable) -> Any:
    """The Python value of a tracker known while tracing (a constant, a class, a function), or
    `_UNKNOWN`."""
    if var.is_constant():
        return var.as_constant()
    value = var.value_object
    return value if isinstance(value, type) else _UNKNOWN


def lookup(value: Any) -> Variable | None:
    """The tracker of a NumPy function torch._numpy has or a folded one, None for other values."""
    np = numpy()
    if np is None:
        return None
    if value is np.dtype or value is np.finfo or value is np.iinfo:
        return NumpyFoldedVariable(value)
    if isinstance(value, type) and issubclass(value, np.generic) and value.__module__ == "numpy":
        return NumpyFoldedVariable(value)  # a scalar type: `np.float32(2.5)`, `dtype=np.int64`
    if not callable(value) or isinstance(value, type):
        return None
    if any(value is fn for fn in (np.issubdtype, np.result_type, np.can_cast, np.promote_types)):
        return NumpyFoldedVariable(value)
    found = _counterparts().get(id(value))
    if found is None or found[0] is not value:
        return None
    return NumpyFunctionVariable(value, found[1], found[2])


@functools.cache
def _counterparts() -> dict[int, tuple[Any, str, str]]:
    """id of each NumPy function torch._numpy mirrors -> (it, torch._numpy module, name)."""
    found: dict[int, tuple[Any, str, str]] = {}
    for numpy_name, ours in _NAMESPACES.items():
        mirror = importlib.import_module(ours)
        namespace = importlib.import_module(numpy_name)
        for name in dir(mirror):
            fn = getattr(namespace, name, None)
            if name.startswith("_") or fn is None or isinstance(fn, type) or not callable(fn):
                continue
            if callable(getattr(mirror, name)):
                found.setdefault(id(fn), (fn, ours, name))
    return found


def array_input(frame: Frame, array: Any, source: Source) -> NdarrayVariable:
    """The tracker of an ndarray read from the frame: one graph input per array, the tensor
    sharing its memory, guarded on its type and (through that tensor) its dtype and layout."""
    known = frame.output.array_inputs.get(id(array))
    if known is not None:
        var = known[1]
        if var.source is not None and var.source != source:
            frame.output.guards.same_object(source, var.source)
        assert isinstance(var, NdarrayVariable)
        return var
    if not config.trace_numpy:
        raise Unsupported(f"NumPy array {source.name()}: NumPy is not traced (config.trace_numpy is off)")
    tensor = tensor_of_array(array)
    if tensor is None:
        raise Unsupported(
            f"NumPy array {source.name()} ({array.dtype}, "
            f"{'writable' if array.flags.writeable else 'read-only'}): torch cannot share its memory"
        )
    frame.output.guards.type_match(source, array)
    view = frame.output.tensor_input(tensor, ArrayTensorSource(source, tensor_of_array))
    var = NdarrayVariable(view.node, view.fake, source=source)
    frame.output.array_inputs[id(array)] = (array, var)
    return var


def is_traced_scalar(value: Any) -> bool:
    """A NumPy scalar of a dtype the graph carries (`np.int64(3)`, `np.float32(2.5)`, `np.bool_`),
    while NumPy is traced."""
    np = numpy()
    return (
        np is not None
        and config.trace_numpy
        and isinstance(value, np.generic)
        and type(value).__module__ == "numpy"
        and value.dtype.name in _DTYPES
    )


def tensor_of_scalar(scalar: Any) -> torch.Tensor:
    """The 0-d tensor holding a NumPy scalar's value in its dtype: a graph input's value, read on
    each call (a new array each time, so the graph never writes to anything of the program's)."""
    return torch.from_numpy(numpy().array(scalar))


def scalar_input(frame: Frame, scalar: Any, source: Source) -> NdarrayVariable:
    """The tracker of a NumPy scalar read from the frame: a 0-d graph input, as torch.compile
    takes it, so a new value of the same type runs the same graph. Guarded on its type (which
    fixes its dtype); where the program reads its value in Python (`if n > 3`, `range(n)`) the
    graph breaks, and the code after the break sees the value, guarded."""
    frame.output.guards.type_match(source, scalar)
    view = frame.output.tensor_input(tensor_of_scalar(scalar), ArrayTensorSource(source, tensor_of_scalar))
    var = NdarrayVariable(view.node, view.fake, source=source)
    var.scalar = True
    return var


def record(
    frame: Frame,
    module: str,
    path: str,
    args: list[Variable],
    kwargs: dict[str, Variable],
    describe: str,
    *,
    reference: Callable[..., Any],
) -> Variable:
    """One node calling torch._numpy's (or `operator`'s) `path` on the arguments, once NumPy's
    `reference` and the node's call agree on stand-ins of them (`numpy_oracle`); its arrays are
    array trackers, its 0-d results scalars where NumPy's are."""
    np = numpy()
    checked = not (module.endswith(".random") and not config.use_numpy_random_stream)  # torch's draws
    oracle = Oracle(np)
    stand_ins: dict[int, StandIn] = {}
    if checked:
        operands = [_operand(a, stand_ins, describe) for a in args]
        keyword_operands = {k: _operand(v, stand_ins, describe) for k, v in kwargs.items()}
        expected = oracle.numpy_answer(reference, operands, keyword_operands, describe)
        _refuse_value_dependent_errors(path, args, expected, describe)
        if path in _TRUE_DIVISIONS and isinstance(expected, (np.ndarray, np.generic)) and not kwargs:
            # torch._numpy divides integers in torch's default dtype; NumPy casts them first
            module, path, kwargs = "torch._numpy", "true_divide", {"dtype": constant(expected.dtype.name)}
    takes_tensors = path in _ARRAYS_OF_TENSORS
    called = [_argument(a, describe, takes_tensors) for a in args]
    called_kwargs = {k: _argument(v, describe, takes_tensors) for k, v in kwargs.items()}
    target = numpy_call(module, path)
    kinds = None
    if checked:
        torch_operands = [_operand(a, stand_ins, describe) for a in called]
        torch_keywords = {k: _operand(v, stand_ins, describe) for k, v in called_kwargs.items()}
        kinds = oracle.kinds(expected, target, torch_operands, torch_keywords, describe)
    result = frame.output.call("call_function", target, called, called_kwargs, describe)
    trackers = {id(stand_in): var for var in [*args, *kwargs.values()] if (stand_in := stand_ins.get(id(var)))}
    return _as_arrays(frame, result, [*args, *kwargs.values()], kinds, describe, trackers)


def _refuse_value_dependent_errors(path: str, args: list[Variable], expected: Any, describe: str) -> None:
    """Integer operations whose errors depend on the values, which no stand-in shows: torch
    raises on an integer division by zero where NumPy gives 0, NumPy raises on a negative integer
    exponent where torch computes."""
    first = expected[0] if isinstance(expected, tuple) and expected else expected  # `divmod`'s pair
    dtype = getattr(first, "dtype", None)
    if dtype is None or dtype.kind not in "iu":
        return
    if path in _INTEGER_DIVISIONS:
        raise Unsupported(f"{describe} of integers: torch raises on a division by zero, NumPy gives 0")
    exponent = args[1] if len(args) > 1 else None
    if path in _POWERS and isinstance(exponent, (NdarrayVariable, TensorVariable)):
        raise Unsupported(f"{describe} of integers: NumPy raises on a negative exponent, torch computes it")


_INTEGER_DIVISIONS = frozenset(
    {"floordiv", "ifloordiv", "mod", "imod", "floor_divide", "remainder", "fmod", "divmod", "ndarray.__divmod__"}
)
_POWERS = frozenset({"pow", "ipow", "power"})


# the division paths whose integer operands torch._numpy divides in torch's default dtype
_TRUE_DIVISIONS = frozenset({"truediv", "true_divide", "divide"})


def _operand(var: Variable, stand_ins: dict[int, StandIn], describe: str) -> Any:
    """What the stand-in runs take for a tracker: a `StandIn` for an array or tensor (one per
    tracker), the value of a constant, the current value of a symbolic number."""
    if isinstance(var, (NdarrayVariable, TensorVariable)):
        made = stand_ins.get(id(var))
        if made is None:
            shape = tuple(_hint(s, var, describe) for s in var.fake.shape)
            scalar = isinstance(var, NdarrayVariable) and var.scalar
            made = stand_ins[id(var)] = StandIn(numpy_dtype(var.fake.dtype).name, shape, scalar)
        return made
    if isinstance(var, SequenceVariable) and type(var) in (ListVariable, TupleVariable):
        return (list if type(var) is ListVariable else tuple)(_operand(i, stand_ins, describe) for i in var.items)
    if isinstance(var, SliceVariable):
        return slice(*(_operand(p, stand_ins, describe) for p in var.parts))
    if isinstance(var, SymNodeVariable):
        return _hint(var.fake, var, describe)
    value = static_value(var)
    if value is _UNKNOWN:
        raise Unsupported(f"{describe} given {var.describe()}, with which NumPy's answer cannot be checked")
    return value


def _hint(value: Any, var: Variable, describe: str) -> Any:
    if not isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return value
    hint = value.node.hint
    if hint is None:
        raise Unsupported(f"{describe} given {var.describe()}, of a size with no value while tracing")
    return hint


# the functions that make an array of a tensor (NumPy reads a CPU tensor without grad as an
# array); a ufunc hands its result on a tensor back to torch, a reduction calls the tensor's method
_ARRAYS_OF_TENSORS = frozenset({"asarray", "array", "ones_like", "zeros_like", "full_like", "empty_like"})


def _argument(var: Variable, describe: str, takes_tensors: bool) -> Variable:
    """An argument as the node takes it: dtypes as their names, NumPy scalars as numbers,
    tensors as they are where NumPy makes an array of them."""
    if isinstance(var, TensorVariable):
        fake = var.fake
        if not takes_tensors or fake.requires_grad or fake.device.type != "cpu" or var.subclass or var.from_subclass:
            raise Unsupported(f"{describe} given {var.describe()}: NumPy's answer is not an array of it")
        return var
    if isinstance(var, SequenceVariable) and type(var) in (ListVariable, TupleVariable):
        return type(var)([_argument(item, describe, takes_tensors) for item in var.items])
    value = static_value(var)
    if value is _UNKNOWN:
        return var
    np = numpy()
    if isinstance(value, np.generic):
        return constant(value.item())
    if isinstance(value, np.dtype) or isinstance(value, type) and _names_a_dtype(value):
        return constant(np.dtype(value).name)
    return var


def _names_a_dtype(kind: type) -> bool:
    np = numpy()
    if kind in (bool, int, float, complex):
        return True
    if not issubclass(kind, np.generic):
        return False
    try:
        return np.dtype(kind).name in _DTYPES
    except TypeError:  # an abstract kind (`np.integer`)
        return False


def _as_arrays(
    frame: Frame, result: Variable, operands: list[Variable], kinds: Any, describe: str, trackers: dict[int, Variable]
) -> Variable:
    """The tracker of a torch._numpy result, shaped as NumPy's (`kinds`: its containers, an
    `ArrayKind` for each array; None where unchecked, torch's random draws: new arrays). An array
    NumPy gives back itself (`np.asarray(a)`, `a += 1`) is that operand's tracker; one NumPy makes
    anew where torch's shares an operand's memory is copied; a tensor operand's tensor made an
    array (`np.asarray(t)`) is a new object sharing its memory."""
    if isinstance(result, (TupleVariable, ListVariable)) and type(result) in (TupleVariable, ListVariable):
        if kinds is None:
            kinds = [None] * len(result.items)
        made = [_as_arrays(frame, item, operands, kind, describe, trackers) for item, kind in zip(result.items, kinds)]
        return ListVariable(made) if isinstance(kinds, list) else TupleVariable(made)
    if not isinstance(result, TensorVariable):
        return result
    kind = kinds if isinstance(kinds, ArrayKind) else ArrayKind(scalar=False)
    itself = trackers.get(id(kind.operand)) if kind.operand is not None else None
    if isinstance(itself, NdarrayVariable) and itself.scalar == kind.scalar:
        return itself
    if kind.copy:
        result = frame.output.call("call_method", "clone", [result], {}, describe)
    elif any(o.fake is result.fake for o in operands if isinstance(o, (NdarrayVariable, TensorVariable))):
        result = frame.output.call("call_function", torch.detach, [result], {}, describe)
    assert isinstance(result, TensorVariable)
    array = NdarrayVariable(result.node, result.fake)
    array.scalar = kind.scalar
    return array


def as_torch(frame: Frame, array: NdarrayVariable, describe: str) -> TensorVariable:
    """`torch.from_numpy(a)`: a new tensor sharing the array's memory."""
    made = frame.output.call("call_function", torch.detach, [array.as_tensor()], {}, describe)
    assert isinstance(made, TensorVariable)
    return made


def binary(frame: Frame, op: Any, plain: Any, a: Variable, b: Variable) -> Variable:
    """`op(a, b)` where one side is an array. An array beside a tensor is refused: eager answers
    through the tensor's operator for some operators and dtypes, NumPy's for others (whose result
    torch's `__array_wrap__` makes a tensor, of NumPy's dtype: `t += a` makes a new tensor), or
    raises TypeError."""
    if isinstance(a, TensorVariable) or isinstance(b, TensorVariable):
        return _tensor_and_scalar(frame, op, plain, a, b)
    if isinstance(a, NdarrayVariable) and a.scalar:
        op = plain  # a NumPy scalar is immutable: `s += 1` makes a new one
    return record(frame, "operator", op.__name__, [a, b], {}, f"operator {op.__name__}", reference=op)


# the operators a tensor takes a NumPy scalar in as a Python number, as eager does: name ->
# the method the tensor answers with where the scalar is on the left (`n - t` is `t.__rsub__(n)`)
_SCALAR_OPERATORS = {
    "add": "__radd__",
    "sub": "__rsub__",
    "mul": "__rmul__",
    "truediv": "__rtruediv__",
    "lt": "__gt__",
    "le": "__ge__",
    "eq": "__eq__",
    "ne": "__ne__",
    "gt": "__lt__",
    "ge": "__le__",
}


def _tensor_and_scalar(frame: Frame, op: Any, plain: Any, a: Variable, b: Variable) -> Variable:
    """`t op n` or `n op t` of a tensor and a NumPy scalar: eager's tensor operator takes the
    scalar as a Python number (an `np.integer` as an int, any other as a float: `np.bool_` too),
    so the result has the dtype the number would give. The scalar's 0-d tensor is cast to that
    dtype where its own would differ (`int_t * np.float64(x)` is float32, not float64): the
    kernel then reads the same value eager's does. Other operators, and an array beside a
    tensor, are refused: eager answers through the tensor for some and through NumPy for others."""
    tensor, scalar = (a, b) if isinstance(a, TensorVariable) else (b, a)
    reflected = _SCALAR_OPERATORS.get(plain.__name__)
    if not (isinstance(scalar, NdarrayVariable) and scalar.scalar and isinstance(tensor, TensorVariable)) or (
        reflected is None
    ):
        raise Unsupported(f"operator {op.__name__} on {a.describe()} and {b.describe()}: an array beside a tensor")
    np = numpy()
    kind = numpy_dtype(scalar.fake.dtype)
    if kind.kind == "c":
        raise Unsupported(f"operator {op.__name__} with {scalar.describe()}: eager drops its imaginary part, warning")
    number = torch.int64 if issubclass(kind.type, np.integer) else torch.float64  # a Python number's
    dtype = torch.result_type(tensor.fake, 1 if number is torch.int64 else 1.0)
    if torch.result_type(tensor.fake, torch.empty((), dtype=number)) == dtype:
        dtype = number  # the dtype promotion leaves it to the tensor: the kernel reads the number
    describe = f"operator {op.__name__}"
    operand = scalar.as_tensor()
    if scalar.fake.dtype != dtype:
        operand = frame.output.call("call_method", "to", [operand, constant(dtype)], {}, describe)
    if tensor is a:
        return frame.output.call("call_function", op, [tensor, operand], {}, describe)
    return frame.output.call("call_method", reflected, [tensor, operand], {}, describe)


def torch_conversion(frame: Frame, fn: Any, args: list[Variable], kwargs: dict[str, Variable]) -> list[Variable]:
    """The arguments of a torch function given arrays: `torch.from_numpy(a)`, `torch.as_tensor`,
    `torch.asarray` and `torch.tensor` take an array's tensor; other functions are refused (eager
    raises TypeError for most)."""
    if fn not in (torch.from_numpy, torch.as_tensor, torch.asarray, torch.tensor) or any(
        isinstance(a, NdarrayVariable) for a in [*args[1:], *kwargs.values()]
    ):
        raise Unsupported(f"torch.{getattr(fn, '__name__', fn)} given a NumPy array")
    if fn is torch.from_numpy and (len(args) != 1 or kwargs):
        raise Unsupported("torch.from_numpy() takes one array")
    array = args[0]
    assert isinstance(array, NdarrayVariable)
    describe = f"torch.{fn.__name__}()"
    if not array.scalar:
        return [as_torch(frame, array, describe), *args[1:]]
    if fn is torch.from_numpy:
        raise Unsupported(f"torch.from_numpy() of {array.describe()}, a NumPy scalar: eager raises TypeError")
    # a new tensor on each conversion, as eager makes one of a scalar (no array to share)
    return [frame.output.call("call_method", "clone", [array.as_tensor()], {}, describe), *args[1:]]


def tensor_numpy(frame: Frame, tensor: TensorVariable, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    """`t.numpy()`: an array sharing the tensor's memory (`force=True`: detached, on the CPU)."""
    if not config.trace_numpy or numpy() is None:
        raise Unsupported("Tensor.numpy() leaves torch (NumPy is not traced)")
    force = (kwargs.get("force") or (args[0] if args else None) or constant(False)).as_constant()
    fake = tensor.fake
    if tensor.subclass is not None or tensor.from_subclass:
        raise Unsupported(f"Tensor.numpy() of {tensor.describe()}, a tensor subclass instance")
    if not force and (fake.requires_grad or fake.device.type != "cpu" or fake.is_conj() or fake.is_neg()):
        raise Unsupported(f"Tensor.numpy() of {tensor.describe()}: eager raises (it needs force=True)")
    numpy_dtype(fake.dtype)
    view = frame.output.call("call_function", torch.detach, [tensor], {}, "Tensor.numpy()")
    if force and fake.device.type != "cpu":
        view = frame.output.call("call_method", "cpu", [view], {}, "Tensor.numpy(force=True)")
    if force and (fake.is_conj() or fake.is_neg()):
        view = frame.output.call("call_method", "resolve_conj", [view], {}, "Tensor.numpy(force=True)")
        view = frame.output.call("call_method", "resolve_neg", [view], {}, "Tensor.numpy(force=True)")
    assert isinstance(view, GraphValueVariable)
    return NdarrayVariable(view.node, view.fake)


def _value_read(what: str) -> Unsupported:
    return Unsupported(f"{what} reads the array's values", hint=TENSOR_DATA_HINT, kind=BreakKind.DATA_DEPENDENT)


TRACED_METHODS["numpy"] = tensor_numpy
