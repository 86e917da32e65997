"""Trace policy: which callables are traced, recorded, folded, modelled or left to Python.

Every decision about *what to do with a value met while tracing* that depends only on the value
(its module, its name, its type) is a table or a predicate here; the trackers and the builder ask
this module instead of keeping lists of their own. Nothing here builds trackers or installs guards.

The order in which `builder.wrap` consults these rules for a callable (the first that answers wins):

1. stenograph's own marks: `allow_in_graph` (a graph op), `is_compiling` (folded), `graph_break`.
2. `is_literal`: numbers, strings, dtypes, devices, ranges, slices and tuples of them are constants.
3. Library handlers (`math`, ...) and `BUILTIN_PURE` / `BUILTIN_REFUSED` builtins are modelled by
   handler tables in `library.py` / `builtins.py`; a refused builtin breaks with its reason.
4. `is_graph_op`: torch operators (ATen overloads, torch C functions, public Python functions of
   the `TORCH_OP_MODULES`) become one `call_function` node, unless they are `STATEFUL_TORCH`
   (global RNG, grad mode, printing, I/O), which are never graph ops. `trace_constant` answers a few
   state readers at trace time, and `is_state_reader` decides which zero-argument C functions may be
   asked for real.
5. `is_tensor_method`: `torch.Tensor.add` taken from the class is called with the tensor first.
6. Classes: `TORCH_CLASSES` are modelled by trackers of their own, `is_user_class` classes are
   instantiated while tracing, `is_torch_module_class` classes (torch.nn layers) are built while
   tracing; any other class is a constant.
7. Python functions are inlined when called, unless `untraced_library` names the library they
   belong to (`NOT_TRACED` top-level packages, `NOT_TRACED_TORCH` torch packages,
   `NOT_TRACED_AUTOGRAD` modules, `NOT_TRACED_FUNCTIONS` single functions): those calls break
   the graph and run eagerly (the break writer asks the same rule to decide whether the callee
   is compiled as a frame of its own).
8. Any other object read from the frame is a user object (attributes traced through its class);
   a C callable unknown to these rules breaks.

Values, not calls:

- `is_trusted_module`: globals read from these modules (torch, math, operator, builtins) are not
  guarded, being assumed not to change at run time.
- `is_sparse_tensor`: tensors of `SPARSE_LAYOUTS` are not traced (torch.compile's rule): one read
  from the frame runs the frame eagerly, an operation making one breaks the graph.
- Tensor attributes: `TENSOR_METADATA` / `TENSOR_METADATA_METHODS` are answered from fake-tensor
  metadata as constants (`TENSOR_GUARDED_METADATA_METHODS` with a guard when read from an input),
  `TENSOR_PROPERTIES` are recorded as graph nodes, `TENSOR_DATA_METHODS` need real values and break.
"""

from __future__ import annotations

import contextlib
import sys
import types
import typing
from typing import Any

import torch

from .. import config
from ..marks import is_disabled
from .class_lookup import class_lookup

# -- constants ------------------------------------------------------------------------------------

LITERALS = (int, float, bool, str, bytes, complex, type(None), type(Ellipsis), type(NotImplemented))
# `torch.finfo`/`torch.iinfo` objects are immutable records of a dtype's limits, compared by value
TORCH_CONSTANTS = (torch.dtype, torch.device, torch.layout, torch.memory_format, torch.finfo, torch.iinfo)


def is_literal(value: Any) -> bool:
    """Values that are Python constants while tracing (compared by value, guarded by value)."""
    if isinstance(value, LITERALS) or isinstance(value, TORCH_CONSTANTS):
        return True
    if isinstance(value, (tuple, frozenset)) and type(value) in (tuple, frozenset):
        return all(is_literal(v) for v in value)
    if isinstance(value, (range, slice)):
        return True
    return is_numpy_constant(value)


def is_numpy_constant(value: Any) -> bool:
    """A NumPy scalar or dtype (`np.int64(8)`, `np.dtype("float32")`): immutable, compared by value."""
    np = sys.modules.get("numpy")
    return np is not None and isinstance(value, (np.generic, np.dtype)) and type(value).__module__.startswith("numpy")


def is_dict_key_constant(value: Any) -> bool:
    """Dict keys a trace may hold as constants: literals, and objects hashed by identity (classes,
    markers such as `typing.Union`), and tuples of them, as in the type-keyed tables of validators
    and the `(type, type)` keys of torch.distributions' KL registry."""
    if is_literal(value):
        return True
    if type(value) in (tuple, torch.Size):  # a Size: a tuple of ints (`cache[x.shape]`)
        return all(is_dict_key_constant(item) for item in value)
    if isinstance(value, type):
        return type(value).__eq__ is type.__eq__ and type(value).__hash__ is type.__hash__
    if isinstance(value, types.BuiltinFunctionType) and isinstance(value.__self__, (types.ModuleType, type(None))):
        return True  # `torch.stack` keying a `__torch_function__` registry: one object per function
    if type(value) in (torch._ops.OpOverloadPacket, torch._ops.OpOverload):
        return True  # `torch.ops.aten.sum(.default)` keying an op table: one object per op, `==` is `is`
    # markers compared by identity (`typing.Union`): their class keeps object's __eq__ and __hash__
    return type(value).__eq__ is object.__eq__ and type(value).__hash__ is object.__hash__


def is_typing_marker(value: Any) -> bool:
    """`typing.Union`, `typing.Literal`, `list[int]` and kin: annotations that validators compare
    and look up, and type variables (`T` in `Callable[[T], Any]`); constants to a trace (guarded by
    identity)."""
    if isinstance(value, (typing.TypeVar, typing.ParamSpec)):
        return True
    return not isinstance(value, type) and type(value).__module__ in ("typing", "types") and callable(value)


def is_trusted_module(name: str) -> bool:
    """Library modules whose members are not guarded (assumed not to change at run time)."""
    return name == "torch" or name.startswith("torch.") or name in ("math", "operator", "builtins")


# -- libraries that are not traced ----------------------------------------------------------------

# libraries whose functions run eagerly at a graph break instead of being inlined: they do I/O,
# debugging, process or interpreter introspection, or live outside torch (numpy)
NOT_TRACED = frozenset({
    "logging", "pdb", "bdb", "cmd", "warnings", "traceback", "inspect", "threading", "multiprocessing",
    "subprocess", "os", "sys", "io", "socket", "unittest", "pytest", "_pytest", "numpy", "pandas",
    "asyncio", "tqdm", "time", "random", "builtins", "code", "faulthandler", "gc", "weakref",
    "stenograph",  # its own API (compile, reset, mark_dynamic) is runtime machinery, not model code
})  # fmt: skip

# torch packages that are runtime machinery rather than model code: the compiler front end's own
# helpers (with `torch._disable_dynamo`'s wrappers, such as `Optimizer.zero_grad`), function
# transforms (`torch.func.grad`, `torch.vmap`: interpreter stacks that tracing does not model), and
# the parts of torch.optim that are not an optimizer's step (LR schedulers, weight averaging) or
# whose step decides on values of its state or passes them where Python numbers go (L-BFGS's line
# search, RAdam's rectification, ASGD's averaging, Adagrad's, Adafactor's and Muon's step sizes) or
# takes sparse gradients. The other optimizers' `step` is traced (optimizers.py). The random number
# generators' seed and state functions (`torch.manual_seed`, `torch.seed`, `get_rng_state`, and
# CUDA's) read and set the generators through C calls: each is one graph break, called as it is.
# A real profiler met while tracing (one passed in, or made eagerly while another records) starts,
# steps and stops eagerly (`torch.profiler`; one made in the frame is traced away, profiler_ranges.py).
NOT_TRACED_TORCH = (
    "torch.random",
    "torch.cuda.random",
    "torch._dynamo",
    "torch._compile",
    "torch.optim.lr_scheduler",
    "torch.optim.swa_utils",
    "torch.optim.lbfgs",
    "torch.optim.sparse_adam",
    "torch.optim.adagrad",
    "torch.optim.radam",
    "torch.optim.asgd",
    "torch.optim._adafactor",
    "torch.optim._muon",
    "torch.utils.data",
    "torch.distributed",
    "torch._functorch",
    "torch.func",
    "torch.profiler",
)

# the attribute marking a function of stenograph's own that compiled code may meet and trace (the
# runner of a hook a graph registered)
TRACED_OWN_CODE = "__stenograph_traced__"

# the helpers the graphs of torch's compiled autograd call (`call_hook`, `call_backward`,
# `unwrap_maybe_dynamic_int`): plain Python over tensors, traced when such a graph is compiled
TRACED_DYNAMO_HELPERS = "torch._dynamo.external_utils"

# autograd's entry points (`torch.autograd.grad`, `backward`, `Function.apply`, `autograd.functional`,
# forward AD, saved-tensor hooks): they run a backward pass or build autograd nodes and hooks, which a
# forward graph cannot hold; and the profiler's ranges entered while a profiler records (made at a
# graph break, profiler_ranges.py). Only these modules: `torch.autograd.grad_mode` (no_grad and its
# kin) is modelled by tracing.
NOT_TRACED_AUTOGRAD = frozenset({
    "torch.autograd",
    "torch.autograd.function",
    "torch.autograd.functional",
    "torch.autograd.forward_ad",
    "torch.autograd.graph",
    "torch.autograd.profiler",
})  # fmt: skip


# single functions that run eagerly as one call although their module is traced: DDP's bookkeeping
# before and after its module's forward, calls into its C++ reducer and logger (traced, each would
# be a graph break of its own, five a step); the module's forward between them is still captured
NOT_TRACED_FUNCTIONS = {
    ("torch.nn.parallel.distributed", "DistributedDataParallel._pre_forward"): "DDP's bookkeeping",
    ("torch.nn.parallel.distributed", "DistributedDataParallel._post_forward"): "DDP's bookkeeping",
}

# the classes of an untraced library whose methods are traced all the same: inspect's signatures,
# their parameters and bound arguments are plain Python over their own fields (binding arguments,
# filling defaults), unlike the rest of inspect (frames, source files, introspection of objects)
TRACED_CLASSES_OF_UNTRACED = {"inspect": frozenset({"Signature", "Parameter", "BoundArguments"})}


def untraced_library(fn: Any) -> str | None:
    """The library `fn` belongs to when it is one whose calls break the graph, else None. A
    Python function whose code lies in one of torch's untraced packages belongs to it too, when
    `functools.wraps` gave it another `__module__` (`torch._disable_dynamo`'s wrapper of
    `Optimizer.zero_grad`, which says `torch.optim.optimizer`)."""
    if getattr(fn, "_wrapped_by_lr_sched", False):
        return None  # an LR scheduler's wrapper of `optimizer.step` (it marks the step as called)
    if getattr(fn, TRACED_OWN_CODE, False):
        return None
    module = getattr(fn, "__module__", None) or ""
    single = NOT_TRACED_FUNCTIONS.get((module, getattr(fn, "__qualname__", None)))
    if single is not None:
        return single
    traced_classes = TRACED_CLASSES_OF_UNTRACED.get(module)
    if traced_classes is not None and str(getattr(fn, "__qualname__", "")).split(".")[0] in traced_classes:
        return None
    top = module.split(".")[0]
    if top in NOT_TRACED and not (top == "unittest" and config.enable_trace_unittest):
        return top
    if module in NOT_TRACED_AUTOGRAD:
        return module
    code_module = (fn.__globals__.get("__name__") or "") if isinstance(fn, types.FunctionType) else ""
    if TRACED_DYNAMO_HELPERS in (module, code_module):
        return None
    for name in (module, code_module):
        for prefix in NOT_TRACED_TORCH:
            if name == prefix or name.startswith(prefix + "."):
                return prefix
    if isinstance(fn, types.FunctionType) and fn.__name__ in STATEFUL_TORCH and module.split(".")[0] == "torch":
        # torch's Python setters of process state (`set_default_device`, `save`): one break
        # each, called as they are
        return "torch's process-state setter"
    return None


def is_untraced_library(fn: Any) -> bool:
    return untraced_library(fn) is not None


# inspect.CO_GENERATOR, CO_COROUTINE, CO_ITERABLE_COROUTINE, CO_ASYNC_GENERATOR
_GENERATOR_OR_COROUTINE = 0x20 | 0x80 | 0x100 | 0x200


def compiles_as_own_frame(fn: Any) -> bool:
    """Whether Python function `fn`, called eagerly by compiled code (at a graph break, or from a
    frame that runs eagerly), is compiled as a frame of its own, as torch.compile's hook compiles
    the frames it does not skip: not a disabled function, an untraced library's, a generator,
    coroutine or async generator function, or `@contextmanager`'s wrapper (compiled, it could
    only return a generator that generated code cannot rebuild)."""
    code = getattr(fn, "__code__", None)
    return (
        isinstance(code, types.CodeType)
        and not is_disabled(fn)
        and not is_untraced_library(fn)
        and code.co_filename != contextlib.__file__
        and not code.co_flags & _GENERATOR_OR_COROUTINE
    )


def skipped_with_callees_compiled(fn: Any) -> bool:
    """Whether Python function `fn` is torch's own that compiled code calls as it is (an untraced
    library's: `torch._dynamo.testing`'s helpers, `torch.autograd.functional.jacobian`) and not a
    disabled one: torch.compile's hook skips its frame but compiles the user functions it calls,
    so it runs with its own calls routed (the torch functions they reach run as they are)."""
    code = getattr(fn, "__code__", None)
    return (
        isinstance(fn, types.FunctionType)
        and is_trusted_module(fn.__globals__.get("__name__") or "")
        and is_untraced_library(fn)
        and not is_disabled(fn)
        and isinstance(code, types.CodeType)
        and not code.co_flags & _GENERATOR_OR_COROUTINE
    )


# -- torch functions: graph ops, state, constants -------------------------------------------------

# Python modules whose plain functions are recorded as one node instead of being inlined
TORCH_OP_MODULES = (
    "torch.nn.functional",
    "torch.functional",
    "torch.nn.init",
    "torch._C._nn",
    "torch._C._fft",
    "torch._C._linalg",
    "torch._C._special",
    "torch._C._nested",
    "torch.fft",
    "torch.linalg",
    "torch.special",
)

# torch functions of global state (RNG, grad mode, defaults, threads, printing, files): never a
# graph op, whatever module they live in
STATEFUL_TORCH = frozenset({
    "manual_seed",
    "seed",
    "set_grad_enabled",
    "set_default_device",
    "set_printoptions",
    "save",
    "load",
    "set_num_threads",
    "set_rng_state",
    "get_rng_state",
    "initial_seed",
    "synchronize",
})  # fmt: skip


# the C side of torch.compile's frame evaluation and guards: `torch._C._dynamo.eval_frame.unsupported`
# is torch's test helper that it never traces, a graph break by design
_COMPILER_INTERNALS = "torch._C._dynamo"


def is_graph_op(value: Any) -> bool:
    """Whether calling `value` should be recorded as one graph node."""
    if isinstance(value, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return True
    if not isinstance(value, (types.BuiltinFunctionType, types.FunctionType)):
        return False  # (nor read the names of other objects: their own `__getattr__` may raise)
    name = getattr(value, "__name__", "")
    if name in STATEFUL_TORCH:
        return False
    module = getattr(value, "__module__", None) or ""
    if isinstance(value, (types.BuiltinFunctionType, types.BuiltinMethodType)):
        if module.startswith(_COMPILER_INTERNALS):
            return False  # torch.compile's own C helpers, never graph nodes (`unsupported`: a break)
        owner = getattr(value, "__self__", None)
        owner_name = getattr(owner, "__name__", "") if owner is not None else ""
        return module.startswith("torch") or owner_name.startswith("torch._C")
    if isinstance(value, types.FunctionType):
        # their private helpers (`F._canonical_mask`) are inlined: called with constants they
        # fold away instead of leaving a node that returns None
        return module in TORCH_OP_MODULES and not name.startswith("_")
    return False


def is_tensor_method(value: Any) -> bool:
    """`torch.Tensor.add` and friends, called through the class."""
    if isinstance(value, (types.MethodDescriptorType, types.WrapperDescriptorType)):
        return getattr(value, "__objclass__", None) in (torch._C.TensorBase, torch.Tensor)
    return isinstance(value, types.FunctionType) and getattr(value, "__module__", "") == "torch._tensor"


_TRACE_CONSTANTS: dict[Any, Any] = {
    torch.is_grad_enabled: torch.is_grad_enabled,
    torch.get_default_dtype: torch.get_default_dtype,
    torch.is_autocast_enabled: torch.is_autocast_enabled,
    torch.jit.is_scripting: lambda *_: False,
    torch.jit.is_tracing: lambda *_: False,
    torch._C._get_tracing_state: lambda *_: None,
    torch.is_inference_mode_enabled: torch.is_inference_mode_enabled,
    # switched inside graphs (`torch_flags`): the value the trace set, or the guarded one at entry
    torch._C._get_deterministic_algorithms: torch._C._get_deterministic_algorithms,
    torch._C._get_deterministic_algorithms_warn_only: torch._C._get_deterministic_algorithms_warn_only,
}


def trace_constant(fn: Any) -> Any:
    """For functions of global state or no state at all, the function that answers them at trace
    time (guards cover the state); None for others."""
    return _TRACE_CONSTANTS.get(fn)


#: Names of torch C functions that only read state, safe to ask again in a guard.
STATE_READER_PREFIXES = ("get_", "is_", "are_", "has_", "len_")


def is_state_reader(fn: Any) -> bool:
    """A torch C function called with no arguments that only reads global state."""
    return getattr(fn, "__name__", "").lstrip("_").startswith(STATE_READER_PREFIXES)


#: torch's Python functions of no arguments that only read the autograd engine's state: asked
#: at trace time, their answers guarded (an untraced library's function would break the graph)
PYTHON_STATE_READERS = (torch.autograd._is_checkpoint_valid,)


def is_python_state_reader(fn: Any) -> bool:
    """One of `PYTHON_STATE_READERS` (by identity: callables need not be hashable)."""
    return any(fn is reader for reader in PYTHON_STATE_READERS)


# -- classes --------------------------------------------------------------------------------------

# `torch.Tensor(data)` and the typed legacy constructors (`torch.LongTensor([1, 2])`), by the
# dtype they build (None: the default dtype, which every entry guards)
LEGACY_TENSOR_CONSTRUCTORS: dict[type, torch.dtype | None] = {
    torch.Tensor: None,
    torch.FloatTensor: torch.float32,
    torch.DoubleTensor: torch.float64,
    torch.HalfTensor: torch.float16,
    torch.BFloat16Tensor: torch.bfloat16,
    torch.LongTensor: torch.int64,
    torch.IntTensor: torch.int32,
    torch.ShortTensor: torch.int16,
    torch.CharTensor: torch.int8,
    torch.ByteTensor: torch.uint8,
    torch.BoolTensor: torch.bool,
}

# torch classes with trackers of their own (sizes, devices, dtype limits, grad-mode and autocast
# contexts, profiler ranges and profilers, `nn.Parameter` and legacy tensor constructors called in
# the frame)
TORCH_CLASSES = (
    torch.Size,
    torch.device,
    torch.finfo,
    torch.iinfo,
    torch.no_grad,
    torch.enable_grad,
    torch.set_grad_enabled,
    torch.inference_mode,
    torch.autocast,
    torch._C.DisableTorchFunctionSubclass,
    torch.autograd.profiler.record_function,
    torch.profiler.profile,
    torch.autograd.profiler.profile,
    torch.nn.Parameter,
    *LEGACY_TENSOR_CONSTRUCTORS,
)


# `Py_TPFLAGS_HEAPTYPE`: the class was made at run time (a class statement, `type(...)`)
_HEAP_TYPE = 1 << 9


def is_builtin_class(klass: type) -> bool:
    """A class of Python's own (int, dict, ValueError): a static type in `builtins`. A class a
    program made is a heap type, even one whose `__module__` says "builtins" (a class statement
    run by `exec` with globals lacking `__name__`)."""
    return getattr(klass, "__module__", None) == "builtins" and not klass.__flags__ & _HEAP_TYPE


# torch modules of plain Python classes whose instances programs make and use as they would
# their own (pytree specs, `OrderedSet`, probability distributions and their constraints and
# transforms): traced as a user's classes are
_TRACED_TORCH_CLASS_MODULES = frozenset({"torch.utils._pytree", "torch.utils._ordered_set"})
_TRACED_TORCH_CLASS_PACKAGES = ("torch.distributions.",)


def is_user_class(value: type) -> bool:
    """Classes whose instances may be created while tracing (not builtins, not torch's)."""
    module = getattr(value, "__module__", "") or ""
    if issubclass(value, BaseException):
        return True  # exceptions are raised and caught inside traced code
    if module in _TRACED_TORCH_CLASS_MODULES or module.startswith(_TRACED_TORCH_CLASS_PACKAGES):
        return True
    return not is_builtin_class(value) and not (module == "torch" or module.startswith("torch."))


def is_frozen_dataclass(cls: type) -> bool:
    """A class made by `@dataclasses.dataclass(frozen=True)` (or derived from one)."""
    params = getattr(cls, "__dataclass_params__", None)
    return params is not None and params.frozen


def is_namedtuple_class(cls: Any) -> bool:
    """A `collections.namedtuple` / `typing.NamedTuple` class."""
    return isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields") and hasattr(cls, "_make")


def is_structseq_class(cls: Any) -> bool:
    """A `torch.return_types` class (a C struct sequence: built from one sequence)."""
    return isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "n_sequence_fields")


def is_plain_function_class(cls: type) -> bool:
    """An autograd.Function subclass using torch's own `apply`, with forward, backward (and
    `setup_context`, if it has its own) written in Python as static methods."""
    if not (isinstance(cls, type) and issubclass(cls, torch.autograd.Function)):
        return False
    apply, _ = class_lookup(cls, "apply")
    methods = [class_lookup(cls, name)[0] for name in ("forward", "backward")]
    if has_own_setup_context(cls):
        methods.append(class_lookup(cls, "setup_context")[0])
    return apply is torch.autograd.Function.__dict__["apply"] and all(
        isinstance(f, staticmethod) and hasattr(f.__func__, "__code__") for f in methods
    )


def has_own_setup_context(cls: type) -> bool:
    """The `forward(*args)` + `setup_context(ctx, inputs, output)` form of an autograd.Function."""
    setup, _ = class_lookup(cls, "setup_context")
    return setup is not torch.autograd.function._SingleLevelFunction.__dict__["setup_context"]


def is_torch_module_class(value: type) -> bool:
    """torch.nn's own layer classes, built while tracing like user classes are."""
    return issubclass(value, torch.nn.Module) and value.__module__.startswith("torch.nn.modules.")


# -- builtins -------------------------------------------------------------------------------------

# builtins with no effects: evaluated directly when every argument is a constant
BUILTIN_PURE = frozenset({
    abs, all, any, ascii, bin, bool, chr, complex, divmod, float, format, frozenset, hash, hex, int, len,
    max, min, oct, ord, pow, repr, round, slice, sorted, str, sum, tuple, list, dict, set, range,
    reversed, enumerate, zip, map, filter, isinstance, issubclass, type, callable, object,
})  # fmt: skip

# builtins with effects outside the program: the call breaks the graph, with this reason
BUILTIN_REFUSED = {
    print: "call to print",
    input: "call to input",
    open: "call to open",
    breakpoint: "call to breakpoint",
    exec: "call to exec",
    eval: "call to eval",
    globals: "call to globals",
    locals: "call to locals",
}

# -- tensors graphs do not carry ------------------------------------------------------------------

# sparse layouts: torch.compile refuses tensors of these layouts (a backend's code assumes strided
# memory, Inductor's fails on them at run time), as inputs (the frame runs eagerly) and as an
# operation's result (a graph break at the operation). Export refuses them too, unlike torch's
# with `capture_sparse_compute` (an exported graph returned a sparse operand for its `to_dense()`)
SPARSE_LAYOUTS = frozenset({torch.sparse_coo, torch.sparse_csr, torch.sparse_csc, torch.sparse_bsr, torch.sparse_bsc})


def is_sparse_tensor(value: Any) -> bool:
    """Whether `value` is a tensor of a sparse layout (`SPARSE_LAYOUTS`)."""
    return isinstance(value, torch.Tensor) and value.layout in SPARSE_LAYOUTS


# -- tensor attributes and methods ----------------------------------------------------------------

# attributes answered from metadata, as constants
TENSOR_METADATA = frozenset({
    "dtype",
    "device",
    "ndim",
    "requires_grad",
    "is_cuda",
    "is_cpu",
    "is_sparse",
    "is_quantized",
    "layout",
    "is_meta",
    "is_mps",
    "is_nested",
    "itemsize",
})  # fmt: skip
# attributes that are tensors computed from the tensor: recorded as getattr nodes
TENSOR_PROPERTIES = frozenset({"T", "mT", "H", "mH", "real", "imag"})
# methods answered from metadata without a node
TENSOR_METADATA_METHODS = frozenset({
    "size",
    "dim",
    "ndimension",
    "numel",
    "nelement",
    "stride",
    "is_contiguous",
    "is_floating_point",
    "is_complex",
    "element_size",
    "get_device",
    "__len__",
    "is_signed",
})  # fmt: skip
# metadata the tensor guards do not cover: answered from metadata, guarded when read from an input
TENSOR_GUARDED_METADATA_METHODS = frozenset({"storage_offset", "is_conj", "is_neg", "is_inference"})
# methods whose result is the tensor's data in Python form: they break the graph with this reason
TENSOR_DATA_METHODS = {
    "item": "Tensor.item() reads the tensor's value",
    "tolist": "Tensor.tolist() reads the tensor's values",
    "__bool__": "bool(tensor) reads the tensor's value",
    "__int__": "int(tensor) reads the tensor's value",
    "__float__": "float(tensor) reads the tensor's value",
    "__index__": "using a tensor as an index reads its value",
    "data_ptr": "Tensor.data_ptr() is a memory address",
}
TENSOR_DATA_HINT = "keep this out of the compiled function, or express it with tensor ops (torch.where)"
# pointwise ops taking a Python number (a Scalar) that is often a 0-d tensor (an optimizer's
# `addcmul_(a, b, value=t)`, `_foreach_lerp_(xs, ys, t)`, `_foreach_pow(t, xs)`), by torch function
# or Tensor method name: the op reads the tensor itself, and its results' dtype and shape do not
# depend on the number, so it stays in the graph called with the tensor (eager's very call) without
# `capture_scalar_outputs`. Each maps to whether its derivative reads the number as well (autograd's
# formula makes it a C++ double, which a backend tracing the backward cannot know)
SCALAR_TENSOR_OPS: dict[Any, bool] = {
    torch.addcmul: False,
    torch.addcdiv: False,
    "addcmul": False,
    "addcmul_": False,
    "addcdiv": False,
    "addcdiv_": False,
    torch._foreach_pow: True,
    torch._foreach_lerp: True,
    torch._foreach_lerp_: True,
}
