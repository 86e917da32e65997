"""The checks a cache entry needs, and their compilation into one Python function.

While tracing, every value read from the frame adds checks on its source (DESIGN decision 4).
`GuardSet.build()` renders them as straight-line Python with the compiled function's signature:
global state first, then type and identity checks, then values and tensor metadata, shallow
sources before deep ones. Intermediate objects (`self._modules['fc1']`) are bound to locals so
each is fetched once. Objects the checks compare against are bound in the function's globals;
user objects are held by weak reference so an entry never keeps a module or tensor alive.
"""

from __future__ import annotations

import collections
import inspect
import math
import types
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

from .. import frame_skips, function_mode_stack
from ..errors import UserError
from . import native
from .failures import GuardFailure
from .lowering import replacements
from .pyfunc import make_function, parameter_list
from .sources import MODULE_TABLES, GlobalsNamer, LocalSource, Source, SourceRenderer, written_key

# ranks: lower runs first
RANK_GLOBAL_STATE = 0
RANK_TYPE = 1
RANK_ID = 2
RANK_VALUE = 3
RANK_TENSOR = 4
RANK_SHAPE = 5

# process-wide switches a graph's results or its backend's choices depend on: (reader, what)
_GLOBAL_FLAGS = tuple(
    (getattr(torch._C, name), what)
    for name, what in (
        ("_get_deterministic_algorithms", "deterministic algorithms"),
        ("_get_deterministic_algorithms_warn_only", "deterministic algorithms' warn-only mode"),
        ("_get_cublas_allow_tf32", "TF32 in cuBLAS matmuls"),
        ("_get_cudnn_allow_tf32", "TF32 in cuDNN"),
    )
    if hasattr(torch._C, name)
)


def keys_with_tensors_marked(keys: Any) -> tuple:
    """A dict's keys with each tensor replaced by `torch.Tensor` (the class), for a guard
    comparing the other keys."""
    return tuple(torch.Tensor if isinstance(k, torch.Tensor) else k for k in keys)


@dataclass
class Check:
    """One boolean expression over `{v}` (the source's value) and bound helper names."""

    rank: int
    source: Source | None
    template: str
    text: str  # human-readable, for recompile reasons
    other: Source | None = None  # rendered as `{w}` when a check relates two sources
    refs: list[tuple[Source, str]] | None = None  # shape guards: `___S<k>___` -> source + suffix
    # what `lowering.py` reads to replace the check by a native one: "type" (detail: the class),
    # "empty", "absent" (the key), "lacks" (a module without an attribute: its name, class and
    # the class dicts of its MRO), "is" and "is not" (the object), "is ref" (a weak reference to
    # the object), "code" (the code object of a function), "equal" (the value compared with
    # `==`), "zero" (0.0 or -0.0, told apart by sign), "keys" (a dict's keys, a tuple), "tensor"
    # (`TensorFacts`); "native" for a check it made
    kind: str = ""
    detail: Any = None


def _reads_new_object(source: Source | None) -> bool:
    """Whether `source` reaches an object the compiled code makes anew on each call (or reads
    through one, `Source.made_anew`): what the trace saw of it holds by construction (made the
    same way from guarded inputs, distinct from every other object), so no check reads it."""
    while source is not None:
        if source.made_anew:
            return True
        source = source.base()
    return False


@dataclass(frozen=True)
class TensorFacts:
    """What `tensor_match` checks, as values: sizes and strides left to the shape guards are None."""

    cls: type
    dtype: torch.dtype
    device: torch.device
    requires_grad: bool
    sizes: tuple[int | None, ...]
    strides: tuple[int | None, ...]


def _slot_is_set(getter: Callable[[Any], Any], obj: Any) -> bool:
    """Whether a `__slots__` entry of `obj` holds a value (`getter`: the slot's `__get__`)."""
    try:
        getter(obj)
    except AttributeError:
        return False
    return True


def _check_metadata_guard(cls: type) -> None:
    """A class's `__metadata_guard__(cls, before, now)` is called by the guard with two contexts:
    one that cannot be raises here, naming the class, rather than on every call."""
    guard = inspect.getattr_static(cls, "__metadata_guard__", None)
    if guard is None:
        return
    if not isinstance(guard, classmethod):
        raise UserError(f"Tensor subclass method {cls.__qualname__}.__metadata_guard__ must be a classmethod")
    try:
        inspect.signature(cls.__metadata_guard__).bind(None, None)
    except TypeError:
        raise UserError(
            f"Tensor subclass method {cls.__qualname__}.__metadata_guard__ must take exactly two subclass "
            "metadata arguments"
        ) from None


@dataclass(frozen=True)
class _FlattensAs:
    """The check of `GuardSet.wrapper_layout`: called with the tensor, True while it flattens
    to these inner tensor names and an equal context, and each inner tensor is of the same class
    and, where that is a wrapper subclass too, flattens as it did (its context, a constant its
    `__torch_dispatch__` reads, is baked into the graph AOTAutograd traced through it)."""

    inner: list[str]
    context: Any
    inner_layouts: tuple[tuple[str, type, _FlattensAs | None], ...] = ()

    def __call__(self, tensor: Any) -> bool:
        inner, context = tensor.__tensor_flatten__()
        if list(inner) != self.inner:
            return False
        same = getattr(type(tensor), "__metadata_guard__", None)
        try:
            if not (same(self.context, context) if same is not None else context == self.context):
                return False
        except Exception:  # a context that cannot be compared: not known to be the same
            return False
        for name, cls, layout in self.inner_layouts:
            value = getattr(tensor, name)
            if type(value) is not cls or layout is not None and not layout(value):
                return False
        return True


def flattens_as(tensor: Any) -> _FlattensAs:
    """How a traceable wrapper subclass instance flattens, its inner tensors' included."""
    _check_metadata_guard(type(tensor))
    inner, context = tensor.__tensor_flatten__()
    layouts = []
    for name in inner:
        value = getattr(tensor, name)
        layouts.append((name, type(value), flattens_as(value) if is_traceable_wrapper_subclass(value) else None))
    return _FlattensAs(list(inner), context, tuple(layouts))


@dataclass
class GuardSet:
    """Checks collected while tracing one frame."""

    checks: list[Check] = field(default_factory=list)
    _seen: set = field(default_factory=set)
    bindings: dict[str, Any] = field(default_factory=dict)
    # weak references whose death makes the entry unusable
    watched: list[weakref.ref] = field(default_factory=list)
    # class -> the name its `__dict__` is bound to (each read of it makes a new proxy)
    _class_dicts: dict[type, str] = field(default_factory=dict)
    # closure cells reached as themselves (a method found on a class has no path to its cells):
    # id -> (cell, its function weakly, its index), how another process finds the cell again
    cells: dict[int, tuple[Any, weakref.ref, int]] = field(default_factory=dict)
    # code objects made by exec (a dataclass's `__init__`, no file to find them in): id -> their
    # function weakly, how another process finds the code again
    code_owners: dict[int, weakref.ref] = field(default_factory=dict)
    _mode_keys: tuple = ()  # the function-mode stack as guarded (`frame_skips.function_modes`)

    def bind(self, obj: Any, hint: str = "obj") -> str:
        """A global name in the guard function holding `obj` (strongly: only for non-user objects)."""
        equal_ok = isinstance(obj, (torch.device, torch.dtype))
        for name, value in self.bindings.items():
            if value is obj or (equal_ok and type(value) is type(obj) and value == obj):
                return name
        name = f"___{hint}{len(self.bindings)}"
        self.bindings[name] = obj
        return name

    def closure_cell(self, cell: Any, fn: types.FunctionType, index: int) -> None:
        """`cell`, reached as itself by some source, is cell `index` of `fn`'s closure."""
        self.cells[id(cell)] = (cell, weakref.ref(fn), index)

    def _add(
        self,
        rank: int,
        source: Source | None,
        template: str,
        text: str,
        other: Source | None = None,
        kind: str = "",
        detail: Any = None,
    ) -> None:
        """One check (once): templates are written only here, by the named kinds of guard below;
        code elsewhere asks for a guard by its name."""
        key = (source, template, other)
        if key in self._seen or _reads_new_object(source) or _reads_new_object(other):
            return
        self._seen.add(key)
        self.checks.append(Check(rank, source, template, text, other, kind=kind, detail=detail))

    def checks_source(self, source: Source) -> bool:
        """Whether some check reads `source` (its value is a fact the trace relies on)."""
        return any(check.source == source or check.other == source for check in self.checks)

    def same_object(self, source: Source, other: Source) -> None:
        """Two sources reach one object (e.g. tied weights): the graph has one input for both."""
        self._add(RANK_ID, source, "{v} is {w}", f"{source.name()} is {other.name()}", other)

    def method_result(self, source: Source, method: str, value: bool | int) -> None:
        """`source.method()` answers `value` (tensor metadata outside the tensor guard)."""
        self._add(RANK_VALUE, source, f"{{v}}.{method}() == {value!r}", f"{source.name()}.{method}() == {value!r}")

    def distinct_objects(self, source: Source, other: Source) -> None:
        self._add(RANK_ID, source, "{v} is not {w}", f"{source.name()} is not {other.name()}", other)

    # -- kinds of guard -------------------------------------------------------------------------

    def type_match(self, source: Source, value: Any) -> None:
        name = self.bind(type(value), "type")
        text = f"type({source.name()}) is {type(value).__qualname__}"
        self._add(RANK_TYPE, source, f"type({{v}}) is {name}", text, kind="type", detail=type(value))

    def id_match(self, source: Source, value: Any) -> None:
        """`source` must be this very object; held weakly when it can be."""
        expr, ref = self._held(value)
        text = f"{source.name()} is the same object"
        if ref is not None:
            self.watched.append(ref)
            self._add(RANK_ID, source, f"{{v}} is {expr}", text, kind="is ref", detail=ref)
        else:
            self._add(RANK_ID, source, f"{{v}} is {expr}", text, kind="is", detail=value)

    def code_match(self, source: Source, fn: types.FunctionType) -> None:
        """The function at `source` runs `fn`'s code (a closure made anew on each call is the
        same function: its cells and defaults are guarded through their own sources)."""
        code = self.bind(fn.__code__, "code")
        if fn.__code__.co_filename.startswith("<"):
            self.code_owners[id(fn.__code__)] = weakref.ref(fn)
        text = f"{source.name()}.__code__ is {fn.__qualname__}'s"
        self._add(RANK_ID, source, f"{{v}}.__code__ is {code}", text, kind="code", detail=fn.__code__)

    def globals_match(self, source: Source, module_globals: dict) -> None:
        """`source` is this very globals dict of a module."""
        held = self.bind(module_globals, "globals")
        text = f"{source.name()} is the globals of {module_globals['__name__']}"
        self._add(RANK_ID, source, f"{{v}} is {held}", text)

    def _held(self, value: Any) -> tuple[str, weakref.ref | None]:
        """An expression for `value` in guard code: through a weak reference when the object
        takes one (a guard must not keep it alive), else the object itself."""
        try:
            ref = weakref.ref(value)
        except TypeError:
            return self.bind(value, "obj"), None
        return f"{self.bind(ref, 'ref')}()", ref

    def constant_match(self, source: Source, value: Any) -> None:
        """Specialisation on a Python constant: type and value must both match."""
        if value is None or value is True or value is False or value is Ellipsis:
            text = f"{source.name()} is {value!r}"
            self._add(RANK_VALUE, source, f"{{v}} is {value!r}", text, kind="is", detail=value)
            return
        if isinstance(value, (torch.dtype, torch.device, torch.layout, torch.memory_format)):
            name = self.bind(value, "const")
            self._add(RANK_VALUE, source, f"{{v}} == {name}", f"{source.name()} == {value!r}")
            return
        self.type_match(source, value)
        floating = isinstance(value, float) or _numpy_floating(value)
        if floating and math.isnan(value):
            self._add(RANK_VALUE, source, "{v} != {v}", f"{source.name()} is nan")
        elif floating and value == 0.0:
            # 0.0 == -0.0, but math.copysign, atan2 and 1/x tell them apart
            sign = self.bind(math.copysign, "fn")
            self._add(
                RANK_VALUE,
                source,
                f"{{v}} == 0.0 and {sign}(1.0, {{v}}) == {math.copysign(1.0, value)!r}",
                f"{source.name()} == {value!r}",
                kind="zero",
                detail=value,
            )
        elif _has_signed_zero_or_nan(value):
            # a tuple or complex holding -0.0 or nan: `==` cannot tell those apart
            same = self.bind(same_literal, "fn")
            const = self.bind(value, "const")
            self._add(RANK_VALUE, source, f"{same}({{v}}, {const})", f"{source.name()} == {_short(value)}")
        elif isinstance(value, (int, float, str, bytes, complex)) and _repr_roundtrips(value):
            text = f"{source.name()} == {_short(value)}"
            self._add(RANK_VALUE, source, f"{{v}} == {value!r}", text, kind="equal", detail=value)
        else:
            name = self.bind(value, "const")
            text = f"{source.name()} == {_short(value)}"
            self._add(RANK_VALUE, source, f"{{v}} == {name}", text, kind="equal", detail=value)

    def ordinary_float(self, source: Source) -> None:
        """A float made symbolic must stay finite and non-zero: symbolic arithmetic treats nan
        as equal to itself and -0.0 as 0.0, so those values get an entry of their own."""
        finite = self.bind(math.isfinite, "fn")
        self._add(RANK_VALUE, source, f"{finite}({{v}}) and {{v}} != 0.0", f"{source.name()} is finite and non-zero")

    def not_identical(self, source: Source, value: Any) -> None:
        """`source` is not the object `value` (an `is` the trace decided False)."""
        if value is None or value is True or value is False or value is Ellipsis:
            text = f"{source.name()} is not {value!r}"
            self._add(RANK_ID, source, f"{{v}} is not {value!r}", text, kind="is not", detail=value)
            return
        expr, ref = self._held(value)
        what = "the same object" if ref is not None else _short(value)
        self._add(RANK_ID, source, f"{{v}} is not {expr}", f"{source.name()} is not {what}")

    def attribute_absent(self, source: Source, obj: Any, name: str) -> None:
        """`obj` (reached by `source`) has no attribute `name`: a `hasattr` or a `getattr`
        default the trace relied on. Setting it later, on the object or its class, recompiles."""
        text = f"{source.name()} has no attribute {name!r}"
        module_getattr = torch.nn.Module.__getattr__
        cls = type(obj)
        if isinstance(obj, torch.nn.Module) and cls.__getattr__ is module_getattr:
            # Module.__getattr__ raises a formatted AttributeError (microseconds): look where it
            # looks, and in the class dicts along the MRO, directly
            class_dicts = self._class_dicts_of(cls.__mro__)
            parts = [f"{name!r} not in {{v}}.__dict__"]
            parts += [f"{name!r} not in {{v}}.{table}" for table in MODULE_TABLES]
            parts += [f"{name!r} not in {bound}" for bound in class_dicts]
            template = f"type({{v}}) is {self.bind(cls, 'type')} and " + " and ".join(parts)
            detail = (name, cls, tuple(self.bindings[bound] for bound in class_dicts))
            self._add(RANK_VALUE, source, template, text, kind="lacks", detail=detail)
            return
        if isinstance(obj, type) and type(obj).__getattribute__ is type.__getattribute__:
            # hasattr on a class raises and catches inside (hundreds of ns): look in the dicts
            # of its MRO and its metaclass's MRO instead
            class_dicts = self._class_dicts_of((*obj.__mro__, *type(obj).__mro__))
            if class_dicts:  # else only immutable types: the name can never be added
                self._add(RANK_VALUE, source, " and ".join(f"{name!r} not in {d}" for d in class_dicts), text)
            return
        self._add(RANK_VALUE, source, f"not hasattr({{v}}, {name!r})", text)

    def slot_set(self, source: Source, slot: Any, name: str) -> None:
        """The `__slots__` entry `name` of the object at `source` holds a value (a slot the trace
        deletes): read through the slot's own descriptor, so the class's hooks do not run."""
        getter = self.bind(slot.__get__, "slot")
        template = f"{self.bind(_slot_is_set, 'fn')}({getter}, {{v}})"
        self._add(RANK_VALUE, source, template, f"{source.name()} has its slot {name!r} set")

    def _class_dicts_of(self, classes: tuple[type, ...]) -> list[str]:
        """Names bound to the `__dict__`s of `classes` that a name could be added to later, each
        class's once: an immutable type's (`object`, `type`, most builtins) cannot change."""
        names = []
        for klass in dict.fromkeys(classes):
            if klass.__flags__ & _IMMUTABLE_TYPE:
                continue
            if klass not in self._class_dicts:
                self._class_dicts[klass] = self.bind(klass.__dict__, "classdict")
            names.append(self._class_dicts[klass])
        return names

    def bound_class_dicts(self) -> Iterator[tuple[type, Any]]:
        """Each class whose `__dict__` a check holds, with the proxy it holds."""
        for klass, name in self._class_dicts.items():
            yield klass, self.bindings[name]

    def key_absent(self, source: Source, key: Any, text: str) -> None:
        """`key not in source` (an instance `__dict__` that must not shadow a class attribute, a
        dict read from the frame that lacked the key the trace looked up)."""
        self._add(RANK_VALUE, source, f"{self._key(key)} not in {{v}}", text, kind="absent", detail=key)

    def key_present(self, source: Source, key: Any, text: str) -> None:
        """`key in source` (an instance `__dict__` holding an attribute the trace deleted, a dict
        read from the frame holding the key the trace read)."""
        self._add(RANK_VALUE, source, f"{self._key(key)} in {{v}}", text)

    def _key(self, key: Any) -> str:
        """A constant dict key in a check: written out, or bound (a class, a marker hashed by
        identity, a tuple holding one)."""
        return repr(key) if written_key(key) else self.bind(key, "key")

    def set_members_match(self, source: Source, value: set) -> None:
        """A set read from the frame: same type and members (compared with a frozen copy, since
        the set itself may change)."""
        self.type_match(source, value)
        members = self.bind(frozenset(value), "const")
        self._add(RANK_VALUE, source, f"{{v}} == {members}", f"{source.name()} == {_short(value)}")

    def tensor_match(self, source: Source, tensor: torch.Tensor, fake: torch.Tensor | None = None) -> None:
        """dtype, device, shape, stride and requires_grad of a tensor input.

        Sizes and strides that are symbolic in `fake` are left to the shape guards.
        """
        t = self.bind(type(tensor), "type")
        dtype = self.bind(tensor.dtype, "dtype")
        shape = tuple(tensor.shape)
        stride = tuple(tensor.stride())
        fake_shape = tuple(fake.shape) if fake is not None else shape
        fake_stride = tuple(fake.stride()) if fake is not None else stride
        if all(type(s) is int for s in fake_shape + fake_stride):
            layout = f"{{v}}.shape == {shape!r} and {{v}}.stride() == {stride!r}"
            shown = f"size={list(shape)} stride={list(stride)}"
            checked_sizes, checked_strides = shape, stride
        else:
            parts = [f"{{v}}.dim() == {len(shape)}"]
            parts += [f"{{v}}.size({i}) == {s}" for i, s in enumerate(fake_shape) if type(s) is int]
            parts += [f"{{v}}.stride({i}) == {s}" for i, s in enumerate(fake_stride) if type(s) is int]
            layout = " and ".join(parts)
            shown = f"size={[str(s) for s in fake_shape]} stride={[str(s) for s in fake_stride]}"
            checked_sizes = tuple(s if type(s) is int else None for s in fake_shape)
            checked_strides = tuple(s if type(s) is int else None for s in fake_stride)
        # `is_cpu` is one attribute read; comparing devices builds a torch.device object
        if tensor.device.type == "cpu":
            on_device = "{v}.is_cpu"
        else:
            on_device = f"{{v}}.device == {self.bind(tensor.device, 'device')}"
        template = (
            f"type({{v}}) is {t} and {{v}}.dtype is {dtype} and {on_device}"
            f" and {layout} and {{v}}.requires_grad is {tensor.requires_grad}"
        )
        if _runs_own_torch_function(type(tensor)):
            # the reads would run the class's `__torch_function__`, which eager never runs here
            template = f"{self.bind(_without_subclass_functions, 'plain')}(lambda: {template})"
        text = f"{source.name()}: {type(tensor).__name__} {tensor.dtype} {tensor.device} {shown} " + (
            f"requires_grad={tensor.requires_grad}"
        )
        facts = TensorFacts(
            type(tensor), tensor.dtype, tensor.device, tensor.requires_grad, checked_sizes, checked_strides
        )
        self._add(RANK_TENSOR, source, template, text, kind="tensor", detail=facts)

    def wrapper_layout(self, source: Source, tensor: torch.Tensor) -> None:
        """A traceable wrapper subclass (`__tensor_flatten__`) flattens as it did: the same inner
        tensors and an equal context (by its class's `__metadata_guard__` where it has one),
        which the graph AOTAutograd traced through it depends on."""
        layout = flattens_as(tensor)
        check = self.bind(layout, "flattens")
        nested = [name for name, _, inner_layout in layout.inner_layouts if inner_layout is not None]
        text = f"{source.name()} flattens to {layout.inner} with context {layout.context!r}" + (
            f" (and so do its wrapper subclasses {nested})" if nested else ""
        )
        self._add(RANK_VALUE, source, f"{check}({{v}})", text)

    def shape_relations(self, guards: list[tuple[str, list[tuple[Source, str]]]]) -> None:
        """Guards from the ShapeEnv: expressions over input sizes, with `___S<k>___` standing
        for reference k, a (source, suffix) pair such as (L['x'], ".size()[0]")."""
        for template, refs in guards:
            text = template
            for k, (source, suffix) in enumerate(refs):
                text = text.replace(f"___S{k}___", source.name() + suffix)
            check = Check(RANK_SHAPE, refs[0][0] if refs else None, template, text, refs=refs)
            self.checks.append(check)

    def dict_keys_match(self, source: Source, value: dict) -> None:
        """The dict's keys, in its own order: read by dict's (or OrderedDict's) `keys`, not by
        a subclass's `keys` or `__iter__`, which may answer anything (and answered alike on
        every call, would recompile on every call)."""
        self.type_match(source, value)
        own_keys = collections.OrderedDict.keys if isinstance(value, collections.OrderedDict) else dict.keys
        keys = tuple(own_keys(value))
        if any(isinstance(k, torch.Tensor) for k in keys):
            # tensor keys compare by identity (their own guards, by position): held here as
            # their class, neither kept alive nor compared with `==` (elementwise for tensors)
            pattern = keys_with_tensors_marked(keys)
            marked, name = self.bind(keys_with_tensors_marked, "fn"), self.bind(pattern, "keys")
            reader = self.bind(own_keys, "fn")
            text = f"keys of {source.name()} == {pattern!r}"
            self._add(RANK_VALUE, source, f"{marked}({reader}({{v}})) == {name}", text)
            return
        name = self.bind(keys, "keys")
        text = f"keys of {source.name()} == {keys!r}"
        cls = type(value)
        base = collections.OrderedDict if own_keys is collections.OrderedDict.keys else dict
        if cls.keys is own_keys and cls.__iter__ is base.__iter__:
            self._add(RANK_VALUE, source, f"tuple({{v}}) == {name}", text, kind="keys", detail=keys)
        else:
            reader = self.bind(own_keys, "fn")
            self._add(RANK_VALUE, source, f"tuple({reader}({{v}})) == {name}", text)

    def length_match(self, source: Source, value: Any) -> None:
        self.type_match(source, value)
        self._add(RANK_VALUE, source, f"len({{v}}) == {len(value)}", f"len({source.name()}) == {len(value)}")

    def all_distinct(self, sources: list[Source]) -> None:
        """The objects at `sources` are pairwise distinct (one set of ids, not n² checks)."""
        sources = [s for s in sources if not _reads_new_object(s)]
        if len(sources) < 2:
            return
        ids = ", ".join(f"id(___S{k}___)" for k in range(len(sources)))
        template = f"len({{{ids}}}) == {len(sources)}"
        text = f"{sources[0].name()}, {sources[1].name()}, ... are {len(sources)} distinct objects"
        self.checks.append(Check(RANK_SHAPE, sources[0], template, text, refs=[(s, "") for s in sources]))

    def storage_pattern(self, sources: list[Source], tensors: list[torch.Tensor]) -> None:
        """Which of the tensors at `sources` share storage stays as in `tensors` (a graph that
        changes an input in place was compiled for exactly this aliasing)."""
        if len(sources) < 2:
            return
        fn = self.bind(storage_pattern, "storages")
        pattern = storage_pattern(*tensors)
        args = ", ".join(f"___S{k}___" for k in range(len(sources)))
        template = f"{fn}({args}) == {pattern!r}"
        text = f"{sources[0].name()}, {sources[1].name()}, ... share storage as {pattern!r} (the same index: shared)"
        self.checks.append(Check(RANK_SHAPE, sources[0], template, text, refs=[(s, "") for s in sources]))

    def memory_apart(self, arrays: list[Source], others: list[Source]) -> None:
        """The NumPy arrays at `arrays` share memory with no other array and no tensor at
        `others` (torch sees each array's tensor as a storage of its own, so a write through one
        would go unseen through another)."""
        fn = self.bind(memory_apart, "apart")
        sources = arrays + others
        args = ", ".join(f"___S{k}___" for k in range(len(sources)))
        text = f"NumPy arrays {', '.join(s.name() for s in arrays)} share memory with no other input"
        template = f"{fn}({len(arrays)}, {args})"
        self.checks.append(Check(RANK_SHAPE, sources[0], template, text, refs=[(s, "") for s in sources]))

    def storage_offset_match(self, source: Source, offset: int) -> None:
        """The tensor at `source` starts at `offset` in its storage (inputs sharing a storage:
        whether they overlap changes the backend's graph)."""
        text = f"{source.name()}.storage_offset() == {offset}"
        self._add(RANK_SHAPE, source, f"{{v}}.storage_offset() == {offset}", text)

    def mapping_entry(self, source: Source, key: str, value: str | None) -> None:
        """`source.get(key)` gives `value` (an environment variable read while tracing, None when
        unset): setting, changing or removing it recompiles."""
        text = f"{source.name()}.get({key!r}) == {value!r}"
        if value is None:
            self._add(RANK_VALUE, source, f"{{v}}.get({key!r}) is None", text)
        else:
            self._add(RANK_VALUE, source, f"{{v}}.get({key!r}) == {value!r}", text)

    def falsy(self, source: Source, what: str) -> None:
        """The object is empty (e.g. a module's hook dict)."""
        self._add(RANK_ID, source, "not {v}", f"{source.name()} is empty ({what})", kind="empty")

    def global_state(self) -> None:
        """Grad mode, inference mode, default dtype, deterministic algorithms, TF32 and autocast
        change what a graph computes (or which kernels and checks its backend picks)."""
        grad = self.bind(torch.is_grad_enabled, "fn")
        self._add(
            RANK_GLOBAL_STATE,
            None,
            f"{grad}() is {torch.is_grad_enabled()}",
            f"grad mode is {'enabled' if torch.is_grad_enabled() else 'disabled'}",
        )
        inference = self.bind(torch.is_inference_mode_enabled, "fn")
        on = torch.is_inference_mode_enabled()
        self._add(RANK_GLOBAL_STATE, None, f"{inference}() is {on}", f"inference mode is {'on' if on else 'off'}")
        dd = self.bind(torch.get_default_dtype, "fn")
        dtype = self.bind(torch.get_default_dtype(), "dtype")
        self._add(RANK_GLOBAL_STATE, None, f"{dd}() is {dtype}", f"default dtype is {torch.get_default_dtype()}")
        for read, what in _GLOBAL_FLAGS:
            on = read()
            self._add(RANK_GLOBAL_STATE, None, f"{self.bind(read, 'fn')}() is {on}", f"{what} is {on}")
        self._autocast_state()
        self._function_modes()

    def _function_modes(self) -> None:
        """A torch-function mode (a `torch.device` context) changes what torch calls do, and code
        traced without one must not run under one (`frame_skips`)."""
        modes = self._mode_keys = frame_skips.function_modes()
        if not modes:
            depth = self.bind(torch._C._len_torch_function_stack, "fn")
            self._add(RANK_GLOBAL_STATE, None, f"{depth}() == 0", "no torch function mode is active")
        else:
            self.state_query(frame_skips.function_modes, "torch function modes", modes)
            # whether modes are consulted at all (`DisableTorchFunction` turns them off); a bool,
            # which a guard compares in a tenth of the time of torch's state enum
            off = torch._C._is_torch_function_all_disabled()
            self.state_query(torch._C._is_torch_function_all_disabled, "torch functions all disabled", off)

    def _autocast_state(self) -> None:
        """Autocast changes the dtypes ops compute in (AOTAutograd bakes them into the graph)."""
        any_on = torch._C._is_any_autocast_enabled()
        if not any_on:
            check = self.bind(torch._C._is_any_autocast_enabled, "fn")
            self._add(RANK_GLOBAL_STATE, None, f"{check}() is False", "autocast is off")
            return
        enabled = self.bind(torch.is_autocast_enabled, "fn")
        get_dtype = self.bind(torch.get_autocast_dtype, "fn")
        for device in ("cpu", "cuda"):
            on = torch.is_autocast_enabled(device)
            self._add(RANK_GLOBAL_STATE, None, f"{enabled}({device!r}) is {on}", f"autocast on {device} is {on}")
            if on:
                dtype = torch.get_autocast_dtype(device)
                name = self.bind(dtype, "dtype")
                self._add(
                    RANK_GLOBAL_STATE, None, f"{get_dtype}({device!r}) is {name}", f"autocast {device} dtype is {dtype}"
                )

    def state_query(self, fn: Callable[[], Any], name: str, value: Any) -> None:
        """A global-state reader (`torch._C._len_torch_dispatch_stack`) asked at trace time must
        give the same answer on each call."""
        call = f"{self.bind(fn, 'fn')}()"
        if value is None or isinstance(value, bool):
            self._add(RANK_GLOBAL_STATE, None, f"{call} is {value!r}", f"{name}() is {value!r}")
        else:
            expected = self.bind(value, "const")
            self._add(RANK_GLOBAL_STATE, None, f"{call} == {expected}", f"{name}() == {_short(value)}")

    # -- code generation ------------------------------------------------------------------------

    def ordered(self) -> list[Check]:
        return sorted(
            self.checks,
            key=lambda c: (
                2 if c.refs is not None else c.source is not None,
                max(c.source.depth() if c.source else 0, c.other.depth() if c.other else 0),
                c.rank,
            ),
        )

    def source_text(
        self, on_fail: Callable[[int, str], str], checks: list[Check] | None = None
    ) -> tuple[list[str], GlobalsNamer]:
        """Body lines of the guard function for `checks` (default: `ordered()`); `on_fail(i,
        value)` is what failing check i returns (`value` is the expression of the checked value,
        or "None"). A native check's line ends with its text as a comment."""
        namer = GlobalsNamer()
        renderer = SourceRenderer(namer)
        lines: list[str] = []
        for index, check in enumerate(self.ordered() if checks is None else checks):
            if check.refs is not None:
                condition = check.template
                for k, (source, suffix) in enumerate(check.refs):
                    condition = condition.replace(f"___S{k}___", renderer.render(source, lines) + suffix)
                value = "None"
            else:
                # each checked object is fetched once, into a local the later checks reuse
                value = renderer.bind(check.source, lines) if check.source is not None else "None"
                condition = check.template.replace("{v}", value)
                if check.other is not None:
                    condition = condition.replace("{w}", renderer.render(check.other, lines))
            described = check.text.splitlines() if check.kind == "native" else []
            comment = "  # " + described[0] if described else ""
            lines.append(f"if not ({condition}): return {on_fail(index, value)}{comment}")
            lines += [f"# {line}" for line in described[1:]]
        return lines, namer

    def build(self, code: types.CodeType, like: types.FunctionType | None, label: str) -> types.FunctionType:
        """The guard function: True when every check passes, False otherwise (never raises, but
        for RecursionError: a check run out of depth deep in a recursion has not failed, and
        taking it for a miss would compile a duplicate entry there).

        Checks the native extension can make are made by it when `config.native_guards` allows
        (decided here, once: the function itself never asks)."""
        checks = self.ordered()
        extension = native.checks_module()
        native_names: dict[str, Any] = {}
        if extension is not None:
            checks = self._lowered(checks, extension, native_names)
        lines, namer = self.source_text(lambda index, value: "False", checks)
        body = (
            ["try:"]
            + ["    " + line for line in lines]
            + ["    return True", "except RecursionError:", "    raise", "except Exception:", "    return False"]
        )
        namespace = {**self.bindings, **namer.bindings(), **native_names, **_SHAPE_GUARD_NAMES}
        guard = make_function("___guard", parameter_list(code), body, namespace, like=like, label=f"guard for {label}")
        return function_mode_stack.without_handlers(guard) if self._under_handlers() else guard

    def _lowered(self, checks: list[Check], extension: types.ModuleType, names: dict[str, Any]) -> list[Check]:
        """`checks` with the native replacements `lowering.py` finds put in place; the native
        objects they call are added to `names`."""
        placed, absorbed = replacements(checks, extension, self.bindings)
        lowered = []
        for check in checks:
            replacement = placed.get(id(check))
            if replacement is None:
                if id(check) not in absorbed:
                    lowered.append(check)
                continue
            name = f"___{replacement.hint}{len(names)}"
            names[name] = replacement.native
            # a check called with nothing (a RootCheck) has no value for the function to fetch
            source, call = (check.source, f"{name}({{v}})") if replacement.takes_value else (None, f"{name}()")
            native = replace(check, source=source, template=call, text=replacement.text, kind="native", detail=None)
            lowered.append(native)
        return lowered

    def build_explainer(self, code: types.CodeType, like: types.FunctionType | None, label: str) -> types.FunctionType:
        """A twin of the guard function returning the first failing check as a `GuardFailure`
        (its text and the value the call passed), or None."""
        checks = self.ordered()
        lines, namer = self.source_text(
            lambda index, value: f"___failure(___checks[{index}], ___actual({value}), ___mismatch({index}, {value}))"
        )
        body = (
            ["try:"]
            + ["    " + line for line in lines]
            + [
                "    return None",
                "except Exception as e:",
                "    return ___failure(f'{type(e).__name__} while checking guards: {e}', None)",
            ]
        )
        namespace = {
            **self.bindings,
            **namer.bindings(),
            "___checks": [c.text for c in checks],
            "___actual": _describe_actual,
            "___mismatch": lambda index, value: _tensor_mismatch(checks[index], value),
            "___failure": GuardFailure,
            **_SHAPE_GUARD_NAMES,
        }
        explain = make_function(
            "___explain", parameter_list(code), body, namespace, like=like, label=f"guard reasons for {label}"
        )
        return function_mode_stack.without_handlers(explain) if self._under_handlers() else explain

    def _under_handlers(self) -> bool:
        """Whether the frame was traced under a mode with a handler: the checks read tensors,
        which would call the handler (the compiled code runs without it: `function_mode_stack`)."""
        return any(type(key) is type for key in self._mode_keys)


# `Py_TPFLAGS_IMMUTABLETYPE`: the type's attributes cannot be set or deleted
_IMMUTABLE_TYPE = 1 << 8

# names the ShapeEnv's printed guard expressions may use (e.g. `torch.sym_float`, `math.floor`)
_SHAPE_GUARD_NAMES = {"torch": torch, "math": math}


def _short(value: Any) -> str:
    """repr for guard descriptions, cut so a long tuple does not flood a log or warning."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _describe_actual(value: Any) -> str | None:
    """The value a failing check saw, for recompile reasons (None: none to show)."""
    if value is None:
        return None
    if isinstance(value, torch.Tensor):
        return (
            f"{type(value).__name__} {value.dtype} {value.device} size={list(value.shape)} "
            f"stride={list(value.stride())} requires_grad={value.requires_grad}"
        )
    text = repr(value)
    return text if len(text) < 80 else text[:77] + "..."


def _tensor_mismatch(check: Check, value: Any) -> str | None:
    """What differs between a tensor check's facts and the tensor a call passed, worded as
    torch.compile words it (None for other checks)."""
    facts = check.detail
    if check.kind != "tensor" or not isinstance(facts, TensorFacts) or not isinstance(value, torch.Tensor):
        return None
    source = check.source
    name = source.local_name if isinstance(source, LocalSource) else source.name() if source is not None else "?"
    prefix = f"tensor {name!r} "
    if value.dtype != facts.dtype:
        return prefix + f"dtype mismatch. expected {facts.dtype}, actual {value.dtype}"
    if value.device != facts.device:
        return prefix + f"device mismatch. expected {facts.device}, actual {value.device}"
    if value.requires_grad != facts.requires_grad:
        return prefix + f"requires_grad mismatch. expected requires_grad={int(facts.requires_grad)}"
    if value.dim() != len(facts.sizes):
        return prefix + f"rank mismatch. expected {len(facts.sizes)}, actual {value.dim()}"
    for what, wanted, got in (("size", facts.sizes, value.shape), ("stride", facts.strides, value.stride())):
        for i, (want, have) in enumerate(zip(wanted, got)):
            if want is not None and want != have:
                return prefix + f"{what} mismatch at index {i}. expected {want}, actual {have}"
    return None


def _has_signed_zero_or_nan(value: Any) -> bool:
    if type(value) is float:
        return value != value or value == 0.0
    if type(value) is complex:
        return _has_signed_zero_or_nan(value.real) or _has_signed_zero_or_nan(value.imag)
    if type(value) is tuple:
        return any(_has_signed_zero_or_nan(v) for v in value)
    return False


def same_literal(a: Any, b: Any) -> bool:
    """`a == b` for literals, except that -0.0 differs from 0.0 and nan equals nan."""
    if type(a) is not type(b):
        return False
    if type(a) is float:
        return (a != a and b != b) or (a == b and math.copysign(1.0, a) == math.copysign(1.0, b))
    if type(a) is complex:
        return same_literal(a.real, b.real) and same_literal(a.imag, b.imag)
    if type(a) is tuple:
        return len(a) == len(b) and all(same_literal(x, y) for x, y in zip(a, b))
    return bool(a == b)


def _repr_roundtrips(value: Any) -> bool:
    try:
        return eval(repr(value), {"__builtins__": {}}) == value  # noqa: S307 - repr of a literal
    except Exception:
        return False


def _numpy_floating(value: Any) -> bool:
    """A NumPy float scalar (`np.float32`, which is no Python float): NaN and the sign of zero
    are guarded as a float's are."""
    return type(value).__module__ == "numpy" and getattr(getattr(value, "dtype", None), "kind", None) == "f"


def memory_apart(arrays: int, *tensors: torch.Tensor | None) -> bool:
    """Whether the memory of each of the first `arrays` tensors (the tensors of NumPy array
    inputs: each made anew, with a storage of its own however the arrays overlap) overlaps none
    of the others'. None (an array torch cannot share) is never apart."""
    if any(t is None for t in tensors):
        return False
    spans = [(t.untyped_storage().data_ptr(), t.untyped_storage().nbytes()) for t in tensors]  # type: ignore[union-attr]
    for k in range(arrays):
        start, size = spans[k]
        for j, (other, other_size) in enumerate(spans):
            if j != k and start < other + other_size and other < start + size:
                return False
    return True


def storage_pattern(*tensors: torch.Tensor) -> tuple[int, ...]:
    """For each tensor, the index of the first tensor with the same storage."""
    first: dict[int, int] = {}
    return tuple(first.setdefault(t.untyped_storage().data_ptr(), i) for i, t in enumerate(tensors))


def _runs_own_torch_function(cls: type) -> bool:
    """A tensor subclass whose own `__torch_function__` runs on every metadata read."""
    own = getattr(cls, "__torch_function__", None)
    if own is None or own is torch._C._disabled_torch_function_impl:
        return False
    return getattr(own, "__func__", own) is not torch.Tensor.__torch_function__.__func__


def _without_subclass_functions(check: Callable[[], bool]) -> bool:
    """`check()` with tensor subclasses' `__torch_function__` off: a guard's reads of a subclass
    input's dtype, device, sizes and requires_grad as torch.Tensor answers them, without running
    the user's method (a counting or logging one would see calls eager never makes)."""
    with torch._C.DisableTorchFunctionSubclass():
        return check()
