"""The FX graph being recorded for one frame: its inputs, nodes and the guards they need.

Tensor operations become `torch.fx` nodes whose `meta["example_value"]` is the fake result, so
every tracker knows shape, dtype and device without running a kernel. Graph inputs are the tensors
read from the frame (arguments, globals, module parameters and buffers), each remembered with its
source so the transformed code can fetch it again on every call.
"""

from __future__ import annotations

import contextlib
import keyword
import logging
import operator
import re
import types
import warnings
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
import torch.fx
import torch.utils._pytree as pytree
from torch._dispatch.python import enable_python_dispatcher
from torch._subclasses.fake_tensor import unset_fake_temporarily
from torch.fx.experimental.symbolic_shapes import DimDynamic, PendingUnbackedSymbolNotFound, compute_unbacked_bindings
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

from .. import config, process_state, torch_flags
from ..errors import BreakKind, ConstraintViolation, Unsupported
from ..guards.guard_set import GuardSet, memory_apart, storage_pattern
from ..guards.sources import ArrayTensorSource, AttrSource, Source
from ..shapes.dynamic import DynamicPolicy, may_be_dynamic
from ..shapes.fake import DATA_DEPENDENT_ERRORS, fakeify, has_symbols, is_symbolic, new_fake_mode, symbolic_number
from ..shapes.named_sources import dynamic_source
from ..variables.constants import constant
from ..variables.containers import ListVariable, SequenceVariable, SizeVariable, TupleVariable
from ..variables.global_contexts import STATE_FUNCTIONS
from ..variables.named_tuples import StructSeqVariable
from ..variables.numpy_arrays import NdarrayVariable, NumpyCall
from ..variables.symbolic import GraphValueVariable, SymNodeVariable
from ..variables.tensor import TensorVariable, unwrap
from ..variables.trace_rules import SCALAR_TENSOR_OPS, TENSOR_DATA_HINT, is_sparse_tensor, is_user_class
from .op_compliance import check_compliant
from .pinned_dtypes import pinned_arguments
from .side_effects import SideEffects

if TYPE_CHECKING:
    from ..variables.base import Variable
    from ..variables.global_contexts import GlobalContextVariable
    from ..variables.tensor import TensorVariable


_FAKE_LOG = logging.getLogger("torch._subclasses.fake_tensor")
# set on a tensor by torch._dynamo.mark_static_address: "guarded" (guard=True) or "unguarded"
_STATIC_ADDRESS = "_dynamo_static_input_type"


@dataclass
class GraphInput:
    source: Source
    node: torch.fx.Node
    example: Any  # the real tensor or int, dropped once the graph is compiled
    fake: Any  # its fake tensor or SymInt (for the shape guards)
    # made symbolic when created (a later specialisation may turn its sizes back into ints, and
    # the shape guards must then check those ints)
    symbolic: bool = False
    # the fake tensor's version counter when created (in-place changes bump it); None for an
    # inference tensor, which has none: it counts as changed
    version: int | None = 0
    # read from the frame, so guarded; False for one the compiled code makes anew on each call
    # (`fresh_tensor_input`), which no guard may read
    guarded: bool = True


class ActiveFrame:
    """The innermost frame being traced, set by `Frame.run` (held apart from `OutputGraph`, so a
    graph that keeps it keeps no trace state alive once tracing ends)."""

    __slots__ = ("frame", "modules")

    def __init__(self) -> None:
        self.frame: Any = None
        # the module calls being traced, outermost first: {key: (source name, class)}, the
        # `nn_module_stack` torch.compile's nodes carry (export's users read it)
        self.modules: dict[str, tuple[str, type]] = {}

    @contextlib.contextmanager
    def module_call(self, path: str, cls: type) -> Iterator[None]:
        """Nodes made inside name the module `path` (its class `cls`) in their module stack."""
        key = re.sub(r"[^a-zA-Z0-9_]", "_", path)
        outer = self.modules
        self.modules = {**outer, key: (path, cls)}
        try:
            yield
        finally:
            self.modules = outer


class TracedGraph(torch.fx.Graph):
    """An FX graph whose nodes record the user stack that made them, as torch.compile's do:
    `meta["stack_trace"]` in Python's traceback format, outermost call first, so
    `print_readable()`, AOTAutograd and Inductor point back at the user's source."""

    def __init__(self, active: ActiveFrame) -> None:
        super().__init__()
        self.active = active

    def create_node(self, *args: Any, **kwargs: Any) -> torch.fx.Node:
        node = super().create_node(*args, **kwargs)
        frame = self.active.frame
        if frame is not None:
            node.meta["stack_trace"] = frame.stack_trace()
        if node.op in ("call_function", "call_method", "call_module", "get_attr"):
            node.meta["nn_module_stack"] = self.active.modules
            if node.op != "get_attr":
                node.meta["source_fn_stack"] = [(node.name, node.target)]
        return node


# a flag switch node's meta key: the flag's value before it (`OutputGraph.switch`)
_FLAG_BEFORE = "stenograph_flag_before"


class OutputGraph:
    """Accumulates one graph, its inputs and guards while a frame is traced."""

    def __init__(
        self, policy: DynamicPolicy | None = None, caller_handles: bool | None = None, *, breaks_allowed: bool = True
    ) -> None:
        self.active = ActiveFrame()
        self.graph = TracedGraph(self.active)
        # the frame's graph, where inputs go; `graph` is another one while a body is traced
        # (a torch.cond branch), which takes what it reads of the frame's graph as inputs
        self.root_graph = self.graph
        self.fake_mode = new_fake_mode()
        self.policy = policy
        self.caller_handles = caller_handles  # `FrameCall.caller_handles`
        # False under fullgraph=True: what the trace could capture or leave to a graph break, it
        # captures (a module's step counter: recompiles rather than an error)
        self.breaks_allowed = breaks_allowed
        self.guards = GuardSet()
        self.inputs: list[GraphInput] = []
        # (taker, giver) input nodes of each `taker.data = giver` (see `hand_over_storage`)
        self._handovers: list[tuple[torch.fx.Node, torch.fx.Node]] = []
        self._input_vars: dict[int, TensorVariable] = {}
        # while `torch.func.functional_call` is traced: by the id of each parameter or buffer it
        # replaces, the tensor replacing it and the source its name reaches it through
        # (`variables.functional_call`)
        self.tensor_overrides: dict[int, tuple[TensorVariable, Source]] = {}
        # sources of tensor inputs the trace used as dict keys or set members: whether a lookup
        # found one depends on which of them are one object (`guard_keyed_inputs_distinct`)
        self.keyed_inputs: set[Source] = set()
        # symbolic numbers by where they were read: a second read is the same input (all are
        # read together when the graph is called)
        self._symbolic_vars: dict[Source, Variable] = {}
        self._names: set[str] = set()
        # trackers of globals already read, by (id(globals dict), name)
        self.global_cache: dict[tuple[int, str], Variable] = {}
        self.side_effects = SideEffects()
        self._containers: dict[int, tuple[Any, Variable]] = {}  # lists/dicts/sets read from the frame
        # generator functions that are called for real (their body has a graph break)
        self.eager_generators: set = set()
        # generators suspended inside a try/with block when the frame returned: the code must
        # rebuild each (it escapes, and is closed when the caller drops it, as eagerly); taken
        # off by whoever builds from the trace
        self.unclosed_generators: list = []
        # contexts (inference mode, autocast) the trace entered, for real, and has not left
        self.open_contexts: list[GlobalContextVariable] = []
        # traced `warnings.catch_warnings()` blocks the trace is inside (`variables.warning_blocks`)
        self.warning_blocks = 0
        # bodies of functorch transforms (vmap, grad) the trace is inside (`variables.func_transforms`):
        # there an autograd.Function's apply runs through functorch's own rules
        self.transform_bodies = 0
        self.initial_flags = torch_flags.current()  # grad mode, deterministic algorithms, default dtype
        # the function-mode stack as the traced code changed it and sees it, made when first read
        # (`variables.function_modes.TracedModes`)
        self.function_modes: Any = None
        # graphs of higher-order ops' bodies (torch.cond branches), read by `get_attr` nodes
        self.submodules: dict[str, torch.fx.GraphModule] = {}
        # nested compile regions traced so far: region -> [(submodule name, graph structure)]
        self.regions: dict[Any, list[tuple[str, Any]]] = {}
        # the numbers the frame draws from Python's `random` (`variables.random_draws`)
        self.random_draws: Any = None
        # id of each NumPy array read from the frame -> (the array, its tracker): one graph input
        # however many names reach it (`variables.numpy_arrays`)
        self.array_inputs: dict[int, tuple[Any, Variable]] = {}
        self.guards.global_state()

    # -- inputs ---------------------------------------------------------------------------------

    def known_container(self, value: Any, source: Source) -> Variable | None:
        """The tracker of this very list/dict/set if the trace already read it another way
        (`f(log, log)`, or an argument that is also an object's attribute): one tracker, so a
        change through either name is seen through both; guarded to stay the same object."""
        known = self._containers.get(id(value))
        if known is None:
            return None
        if known[1].source is not None and known[1].source != source:
            self.guards.same_object(source, known[1].source)
        return known[1]

    def register_container(self, value: Any, var: Variable) -> Variable:
        if isinstance(value, dict) and var.source is not None:
            self._apart_from_written_objects(value, var.source)
        self._containers[id(value)] = (value, var)  # the value is held so its id stays unique
        return var

    def _apart_from_written_objects(self, value: dict, source: Source) -> None:
        """A dict read from the frame after the trace wrote attributes of an outside object: if
        it is that object's `__dict__` its tracker would miss the writes (F22), so the read breaks
        the graph; otherwise the two stay distinct objects (guarded)."""
        for writer, _, _ in self.side_effects.attributes.values():
            if writer.source is None:
                continue
            try:
                own = object.__getattribute__(writer.value_object, "__dict__")
            except AttributeError:
                continue
            if own is value:
                raise Unsupported(
                    f"{source.name()} is the __dict__ of {writer.source.name()}, whose attributes the trace changed"
                )
            self.side_effects.distinct_objects.add((source, AttrSource(writer.source, "__dict__")))

    def container_of(self, value: Any) -> Variable | None:
        """The tracker of a list/dict/set read from the frame, None when the trace has none."""
        known = self._containers.get(id(value))
        return None if known is None else known[1]

    def frame_containers(self) -> list[Variable]:
        """The trackers of the lists/dicts/sets read from the frame."""
        return [var for _, var in self._containers.values()]

    def guard_object_identities(self) -> None:
        """Code compiled for distinct containers applies each one's changes separately: a list
        it changed must not be, on a later call, the same object as another it read. Objects
        whose attributes were written: two sources the trace took for one object stay one, and
        two it took for two stay two (`SideEffects.pending_attribute` noted both)."""
        for var in self.side_effects.containers.values():
            for _, other in self._containers.values():
                if other is not var and other.source is not None and type(other) is type(var):
                    self.guards.distinct_objects(var.source, other.source)
        for source, other in self.side_effects.same_objects:
            self.guards.same_object(source, other)
        for source, other in self.side_effects.distinct_objects:
            self.guards.distinct_objects(source, other)

    def guard_mutated_tensors_distinct(self) -> None:
        """A graph that changes an input tensor in place was compiled for these tensors and this
        sharing of storage (the backend's functional graph reads the others' values from before
        the change): a call passing one tensor, or views of one, for two inputs compiles again."""
        tensors = [i for i in self.inputs if isinstance(i.fake, torch.Tensor) and i.guarded]
        if any(i.version is None or i.fake._version != i.version for i in tensors):
            # one check per call: the storage pattern also tells one object passed twice apart;
            # tensors without a plain storage (sparse, nested) are kept distinct by identity
            dense = [isinstance(i.example, torch.Tensor) and i.example.layout == torch.strided for i in tensors]
            plain = [i for i, d in zip(tensors, dense) if d]
            self.guards.storage_pattern([i.source for i in plain], [i.example for i in plain])
            # and where in the storage each of those that share one starts: the backend's graph
            # depends on whether they overlap (AOTAutograd merges overlapping ones into one base);
            # the static tensor guard checks sizes and strides only, the shape guards check the
            # offsets of symbolic inputs
            pattern = storage_pattern(*[i.example for i in plain])
            for k, i in enumerate(plain):
                if pattern.count(pattern[k]) > 1 and not i.symbolic:
                    self.guards.storage_offset_match(i.source, i.example.storage_offset())
            self.guards.all_distinct([i.source for i, d in zip(tensors, dense) if not d])

    def guard_arrays_apart(self) -> None:
        """NumPy array inputs overlapping in memory (views of one array, an array and the tensor
        it views) are distinct storages to the graph, so a write through one would not be seen
        through the other: refused, and guarded never to overlap on later calls. Only CPU
        tensors can share an array's memory (the guard runs on every call)."""
        arrays = [i for i in self.inputs if isinstance(i.source, ArrayTensorSource)]
        others = [
            i
            for i in self.inputs
            if i not in arrays
            and isinstance(i.example, torch.Tensor)
            and i.example.layout == torch.strided
            and i.example.device.type == "cpu"
        ]
        if not arrays or len(arrays) + len(others) < 2:
            return
        if not memory_apart(len(arrays), *(i.example for i in arrays + others)):
            raise Unsupported(
                f"NumPy arrays {', '.join(i.source.name() for i in arrays)} share memory with another input "
                "(torch would take them for separate storages)"
            )
        self.guards.memory_apart([i.source for i in arrays], [i.source for i in others])

    def guard_keyed_inputs_distinct(self) -> None:
        """Tensor inputs used as dict keys or set members were distinct objects (one object read
        two ways is one input, guarded to stay so): a call passing one tensor for two of them
        finds keys the trace did not, and compiles again."""
        self.guards.all_distinct(sorted(self.keyed_inputs, key=lambda s: s.name()))

    def real_object(self, var: Variable) -> Any:
        """The real object a tracker read from the frame stands for: a tensor input's tensor, a
        list/dict/set read from the frame; None for anything made while tracing."""
        if isinstance(var, TensorVariable):
            return next((i.example for i in self.inputs if i.node is var.node), None)
        return next((value for value, known in self._containers.values() if known is var), None)

    def real_value(self, var: GraphValueVariable) -> Any:
        """The value `var` has in this call: the graph so far run on the call's real inputs
        (copies of them, the RNG forked, so that running it changes nothing the call will see),
        as torch does for an `assume_constant_result` function given a tensor. Graphs calling
        submodules (traced bodies) are refused."""
        examples = {i.node: i.example for i in self.inputs}
        if var.node in examples:
            return examples[var.node]
        env: dict[torch.fx.Node, Any] = {}
        with unset_fake_temporarily(), torch.random.fork_rng(devices=[]):
            for node in self.root_graph.nodes:
                if node.op == "placeholder":
                    value = examples.get(node)
                    env[node] = value.clone() if isinstance(value, torch.Tensor) else value
                elif node.op in ("call_function", "call_method"):
                    args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), env.__getitem__)
                    if node.op == "call_method":
                        env[node] = getattr(args[0], node.target)(*args[1:], **kwargs)
                    else:
                        env[node] = node.target(*args, **kwargs)
                else:
                    raise Unsupported(f"the value of {var.describe()} while tracing (the graph has {node.op} nodes)")
                if node is var.node:
                    return env[node]
        raise Unsupported(f"the value of {var.describe()} while tracing (not computed by this graph)")

    def tensor_input(self, value: torch.Tensor, source: Source) -> TensorVariable:
        """The tracker for a tensor read from the frame; one placeholder per distinct tensor."""
        override = self.tensor_overrides.get(id(value))
        if override is not None:
            replacement, named = override
            if source != named:
                self.guards.same_object(source, named)  # reached another way (a tied alias)
            return replacement
        known = self._input_vars.get(id(value))
        if known is not None:
            # the same tensor reached another way (tied weights, an argument passed twice), or
            # read again the same way (`p.grad`, read twice)
            assert known.source is not None
            if known.source != source:
                self.guards.same_object(source, known.source)
            return known
        inner = _inner_tensor_names(value, source)
        dims = strides = None
        # an nn.Parameter keeps static sizes wherever it comes from (`force_parameter_static_shapes`),
        # a module's parameters and buffers in any case (`may_be_dynamic`), unless torch's
        # `dynamic_sources` setting names it
        static_parameter = isinstance(value, torch.nn.Parameter) and config.force_parameter_static_shapes
        static = static_parameter or not may_be_dynamic(source, True)
        if self.policy is not None and (not static or dynamic_source(source)):
            dims = self.policy.tensor_dims(source, value)
            strides = self.policy.stride_dims(source.name(), value)
        fake = fakeify(self.fake_mode, value, source, dims, strides)
        if dims and any(d is not DimDynamic.STATIC for d in dims):
            assert self.policy is not None
            self._apply_bounds(value, fake, source, self.policy.bounds(source.name(), value))
        self.guards.tensor_match(source, value, fake)
        if getattr(value, _STATIC_ADDRESS, None) == "guarded":
            self.guards.id_match(source, value)  # `mark_static_address(t, guard=True)`: this very tensor
        if inner is not None:
            self.guards.wrapper_layout(source, value)
            for name in inner:
                self.guards.tensor_match(AttrSource(source, name), getattr(value, name), getattr(fake, name, None))
        node = self._placeholder(source, fake, value)
        if hasattr(value, _STATIC_ADDRESS):
            node.meta["static_address"] = True  # backends announce it as a static input (CUDA graphs)
        var = TensorVariable(node, fake, source=source)
        if type(value) not in (torch.Tensor, torch.nn.Parameter):
            var.subclass = type(value)
        self._input_vars[id(value)] = var
        return var

    def fresh_tensor_input(self, value: torch.Tensor, source: Source) -> TensorVariable:
        """A tensor input the compiled code makes anew on each call through `source` (a
        `FreshCallSource`'s part): static, unguarded, a new tensor each time."""
        fake = self.fake_mode.from_tensor(value, static_shapes=True)
        return TensorVariable(self._placeholder(source, fake, value, guarded=False), fake)

    def made_tensor_input(self, value: torch.Tensor, fake: torch.Tensor, source: Source) -> TensorVariable:
        """A tensor the compiled code makes from other inputs before its graph on each call,
        through `source` (`NewParameterSource`), each use the same object: `fake` is made from
        their fakes (so it has their symbolic sizes), and no guard reads it."""
        return TensorVariable(self._placeholder(source, fake, value, guarded=False), fake, source=source)

    def hand_over_storage(self, taker: torch.fx.Node, giver: torch.fx.Node) -> bool:
        """Order the inputs for `taker.data = giver`, both inputs; False where no order serves.

        AOTAutograd writes each input's changed storage back after the graph, input by input, as
        the value it ended with; the taker's is the giver's storage, which must still be the
        giver's own when it is written. So every taker comes before its giver."""
        order = [i.node for i in self.inputs]
        if order.index(taker) > order.index(giver):
            order.remove(taker)
            order.insert(order.index(giver), taker)
        if any(order.index(t) > order.index(g) for t, g in self._handovers):
            return False
        self._handovers.append((taker, giver))
        if order != [i.node for i in self.inputs]:
            giver.prepend(taker)
            self.inputs.sort(key=lambda i: order.index(i.node))
        return True

    def symbolic_input(self, value: int | float, source: Source, *, unbacked: bool = False) -> Variable:
        """A dynamic int or float argument: a SymInt/SymFloat placeholder the ShapeEnv guards
        (`unbacked`: an unbacked SymInt, of whose value it guards only that it is a size)."""
        known = self._symbolic_vars.get(source)
        if known is not None:
            return known
        fake = symbolic_number(self.fake_mode, value, source, unbacked=unbacked)
        node = self._placeholder(source, fake, value)
        var = self._symbolic_vars[source] = SymNodeVariable(node, fake, source=source)
        return var

    def _placeholder(self, source: Source, fake: Any, example: Any, *, guarded: bool = True) -> torch.fx.Node:
        name = self._unique(_placeholder_name(source))
        last = self.inputs[-1].node if self.inputs else None
        if last is None:
            first = next(iter(self.root_graph.nodes), None)
            ctx = self.root_graph.inserting_before(first) if first is not None else _nullctx()
        else:
            ctx = self.root_graph.inserting_after(last)
        with ctx:
            node = self.root_graph.placeholder(name)
        node.meta["example_value"] = fake
        node.meta["source"] = source.name()
        node.meta["stenograph_source"] = source  # backends read it (e.g. static inputs for CUDA graphs)
        # an input's unbacked sizes (or unbacked int) are bound where it enters, as an op binds
        # those it makes: a backend that retraces the graph (AOTAutograd) knows where each comes from
        bindings = compute_unbacked_bindings(self.fake_mode.shape_env, fake)
        if bindings:
            node.meta["unbacked_bindings"] = bindings
        symbolic = is_symbolic(fake) or (isinstance(fake, torch.Tensor) and has_symbols(fake))
        version = 0
        if isinstance(fake, torch.Tensor):
            version = None if fake.is_inference() else fake._version
        self.inputs.append(GraphInput(source, node, example, fake, symbolic, version, guarded))
        return node

    def _apply_bounds(
        self, value: torch.Tensor, fake: torch.Tensor, source: Source, bounds: dict[int, tuple[int | None, int | None]]
    ) -> None:
        """`mark_dynamic(t, dim, min=, max=)`: constrain the dimension's symbol."""
        shape_env = self.fake_mode.shape_env
        for dim, (low, high) in bounds.items():
            actual = value.shape[dim]
            if (low is not None and actual < low) or (high is not None and actual > high):
                raise ConstraintViolation(
                    f"{source.name()} has size {actual} in dimension {dim}, outside the range "
                    f"mark_dynamic(..., {dim}, min={low}, max={high}) declared for it"
                )
            size = fake.shape[dim]
            if (low is not None or high is not None) and isinstance(size, torch.SymInt):
                expr = size.node.expr
                if expr.is_Symbol:
                    shape_env.constrain_symbol_range(expr, compiler_min=low or 0, compiler_max=high or int(1e18))

    def sym_size(self, tensor: TensorVariable, dim: int) -> Variable:
        """`x.size(dim)` of a tensor: a constant, or a graph value for a symbolic dimension."""
        size = tensor.fake.shape[dim]
        if not isinstance(size, torch.SymInt):
            return constant(int(size))
        cache = tensor.__dict__.setdefault("_size_nodes", {})
        if dim not in cache:
            node = self.graph.create_node("call_method", "size", (tensor.node, dim), {})
            node.meta["example_value"] = size
            cache[dim] = SymNodeVariable(node, size)
        return cache[dim]

    def _unique(self, name: str) -> str:
        candidate, i = name, 1
        while candidate in self._names:
            candidate = f"{name}_{i}"
            i += 1
        self._names.add(candidate)
        return candidate

    def add_submodule(self, gm: torch.fx.GraphModule, hint: str) -> torch.fx.Node:
        """Keep `gm` on the graph's root module; the `get_attr` node that reads it."""
        name = self._unique(hint)
        self.submodules[name] = gm
        return self.graph.get_attr(name)

    # -- global state ---------------------------------------------------------------------------

    def switch(self, flag: torch_flags.Flag, value: Any, *, called: bool = False) -> None:
        """Switch a process flag for the rest of the trace, and at the same point in the graph. A
        switch to the value already set is left out, unless the program `called` torch's setter
        itself (torch.compile records those calls). A switch right after another of the same
        flag, no operation between, replaces it (`set_grad_enabled(False)` then `(True)`: no
        node, as the two cancel), as torch.compile's graphs have them."""
        if flag.read() == value and not called:
            return
        before = flag.read()
        last = next(iter(reversed(self.graph.nodes)), None)
        replaced = last is not None and last.op == "call_function" and last.target is flag.setter and not last.users
        if replaced:
            before = last.meta[_FLAG_BEFORE]
            self.graph.erase_node(last)
        flag.write(value)
        if replaced and before == value:
            return  # the two switches cancel
        args, kwargs = flag.arguments(value)
        node = self.graph.create_node("call_function", flag.setter, args, kwargs)
        node.meta[_FLAG_BEFORE] = before

    def set_grad_enabled(self, mode: bool, *, called: bool = False) -> None:
        self.switch(torch_flags.GRAD, mode, called=called)

    def switches_flags(self) -> bool:
        """Whether the graph holds a switch of a process flag (`torch_flags`)."""
        return any(node.target in torch_flags.SETTERS for node in self.root_graph.nodes)

    def restore_flags(self) -> None:
        """End the graph in the state it started in (the transformed code sets the state the
        code left after it; a break may re-enter a grad-mode context)."""
        for flag, value in self.initial_flags.items():
            self.switch(flag, value)

    # -- operations -----------------------------------------------------------------------------

    def call(
        self,
        kind: str,
        target: Any,
        args: list[Variable],
        kwargs: dict[str, Variable],
        describe: str,
    ) -> Variable:
        """Record `target(*args, **kwargs)` as a node and wrap its fake result."""
        if not isinstance(target, NumpyCall):
            _refuse_arrays([*args, *kwargs.values()], describe)
        made_class = _made_subclass(kind, target, args, kwargs)
        if made_class is not None:  # `t.as_subclass(cls)`: a node naming the class by a function
            kind, target, args = "call_function", subclass_maker(made_class), args[:1]
        outputs = _graph_inputs_given_as_out(kwargs.get("out"))  # their shapes before the op
        if kind == "call_function":
            check_compliant(target, _unwrap_all(args)[1], _unwrap_all_kw(kwargs)[1])
        fake = self._fake_result(kind, target, args, kwargs, made_class, describe)
        if made_class is None:
            pinned = pinned_arguments(
                self.initial_flags[torch_flags.DEFAULT_DTYPE],
                target,
                args,
                kwargs,
                fake,
                lambda again, kw: self._fake_rerun(kind, target, again, kw, describe),
                self._scalar_tensor,
            )
            if pinned is not None:  # the same result, its dtype stated
                args, kwargs = pinned
        fx_args, _ = _unwrap_all(args)
        fx_kwargs, _ = _unwrap_all_kw(kwargs)
        if any(is_sparse_tensor(leaf) for leaf in pytree.tree_leaves(fake)):
            raise Unsupported(
                f"{describe} makes a sparse tensor, which graphs do not carry",
                hint="torch.compile does not trace sparse tensors either; without fullgraph it runs eagerly",
            )
        if any(_resized(shape, var.fake.shape) for var, shape in outputs):
            # AOTAutograd's functional graph cannot resize an input in place (torch.compile breaks too)
            raise Unsupported(f"{describe} resizes a graph input passed as out=", hint="let the op allocate its result")
        node = self.graph.create_node(*_spelled_out(kind, target, tuple(fx_args), fx_kwargs))
        # sizes or scalars the op made up (nonzero's length, item()) are bound to this node, so a
        # backend that retraces the graph (AOTAutograd) knows where each unbacked symbol comes from
        shape_env = self.fake_mode.shape_env
        if shape_env is not None and shape_env.pending_fresh_unbacked_symbols:
            if _keeps_numbers_read_inside(kind, target, args, kwargs):
                _ignore_values_read_inside(shape_env, fake)
        try:
            bindings = compute_unbacked_bindings(self.fake_mode.shape_env, fake)
        except PendingUnbackedSymbolNotFound as e:
            # a value made up inside the op and not returned: a tensor passed where it takes a
            # Python number (`x.addcdiv_(a, b, value=t)` reads `t.item()`), not captured
            self.graph.erase_node(node)
            raise Unsupported(
                f"{describe} reads a tensor's value as a Python number",
                hint=TENSOR_DATA_HINT,
                kind=BreakKind.DATA_DEPENDENT,
            ) from e
        if bindings:
            node.meta["unbacked_bindings"] = bindings
        result = self.wrap_result(node, fake, describe, _tensor_arguments([*args, *kwargs.values()]))
        if made_class is not None and isinstance(result, TensorVariable):
            result.subclass = made_class
        return result

    def _fake_result(
        self,
        kind: str,
        target: Any,
        args: list[Variable],
        kwargs: dict[str, Variable],
        made_class: type | None,
        describe: str,
    ) -> Any:
        """The operation run on the arguments' fake values (`Unsupported` where it raises)."""
        _, fake_args = _unwrap_all(args)
        _, fake_kwargs = _unwrap_all_kw(kwargs)
        try:
            # a user error (mismatched shapes) is reported by the eager run; keep fake tensor's
            # own error log quiet meanwhile
            _FAKE_LOG.disabled = True
            # the Python dispatcher runs composite ops' symbolic-aware decompositions (as
            # torch.compile does): without it some call `int()` on symbolic sizes, specialising them
            with self.fake_mode, enable_python_dispatcher():
                if made_class is not None:
                    # a fake cannot become an instance of the user's class: the trace holds an
                    # alias of the tensor, its tracker the class; the node makes the instance
                    fake = torch.ops.aten.alias.default(fake_args[0])
                elif kind == "call_method":
                    fake = getattr(fake_args[0], target)(*fake_args[1:], **fake_kwargs)
                else:
                    fake = target(*fake_args, **fake_kwargs)
        except DATA_DEPENDENT_ERRORS as e:
            raise Unsupported(
                f"{describe} depends on tensor data ({type(e).__name__})",
                hint="move data-dependent Python logic out of the compiled region, or use torch.where / torch.cond",
                kind=BreakKind.DATA_DEPENDENT,
            ) from e
        except Unsupported:
            raise
        except Exception as e:
            self.fake_mode.raise_interrupt()  # an interrupt torch's dispatch turned into this error
            refusal = Unsupported(f"{describe} raised {type(e).__name__} while tracing: {e}")
            refusal.breaks_inside_loops = True  # it most likely raises eagerly too (mismatched shapes)
            raise refusal from e
        finally:
            _FAKE_LOG.disabled = False
        return fake

    def _fake_rerun(
        self, kind: str, target: Any, args: list[Variable], kwargs: dict[str, Variable], describe: str
    ) -> Any:
        """The operation's fake result for other arguments, made sizes it records left out (the
        node binds those of the first run), and its warnings silent (the first run gave them)."""
        shape_env = self.fake_mode.shape_env
        pending = len(shape_env.pending_fresh_unbacked_symbols) if shape_env is not None else 0
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return self._fake_result(kind, target, args, kwargs, None, describe)
        finally:
            if shape_env is not None:
                del shape_env.pending_fresh_unbacked_symbols[pending:]

    def _scalar_tensor(self, value: complex | float, dtype: torch.dtype) -> Variable:
        """A 0-dim tensor holding a Python number, recorded (`pinned_dtypes`)."""
        return self.call("call_function", torch.tensor, [constant(value)], {"dtype": constant(dtype)}, "torch.tensor()")

    def wrap_result(
        self, node: torch.fx.Node, fake: Any, describe: str, arguments: dict[int, Variable] | None = None
    ) -> Variable:
        """The tracker for an operation's fake result. A tensor result that is one of the
        operation's own tensor `arguments` (by id of the fake: `x.add_(1)`, `out=x`,
        `x.contiguous()` of a contiguous x) is that argument's tracker, so `y is x` holds as in eager."""
        if fake is None:
            return constant(None)  # an op run for its effect (item assignment, in-place init): keep it
        if isinstance(fake, torch.Tensor):
            node.meta["example_value"] = fake
            same = (arguments or {}).get(id(fake))
            if same is not None:
                same.__dict__.pop("_size_nodes", None)  # an in-place op may have changed its shape
                return same
            return _result_tensor(node, fake, arguments)
        if is_symbolic(fake):
            node.meta["example_value"] = fake
            return SymNodeVariable(node, fake)
        if isinstance(fake, torch.Size):
            if not any(is_symbolic(s) for s in fake):
                self.graph.erase_node(node)
                return SizeVariable([constant(int(s)) for s in fake])
            node.meta["example_value"] = fake
            return SizeVariable([self._item(node, i, s) for i, s in enumerate(fake)])
        if isinstance(fake, (tuple, list)) and _is_traceable_structure(fake):
            node.meta["example_value"] = fake
            return self._wrap_items(node, fake, describe, arguments)
        if isinstance(fake, (bool, int, float)):
            # a Python value computed from static metadata (x.dim(), x.numel(), x.size(0))
            self.graph.erase_node(node)
            return constant(fake)
        if isinstance(fake, (torch.dtype, torch.device)):
            self.graph.erase_node(node)
            return constant(fake)
        self.graph.erase_node(node)
        raise Unsupported(f"{describe} returned {type(fake).__name__}, which cannot be traced")

    def _wrap_items(
        self, node: torch.fx.Node, fake: tuple | list, describe: str, arguments: dict[int, Variable] | None
    ) -> Variable:
        """A tuple/list result (e.g. `(output, None)`): each tensor or symbolic item becomes a
        `getitem` node, constants stay constants, nested tuples recurse."""
        items: list[Variable] = []
        for i, f in enumerate(fake):
            if isinstance(f, torch.Tensor) or is_symbolic(f) or isinstance(f, (tuple, list)):
                item = self.graph.create_node("call_function", operator.getitem, (node, i), {})
                item.meta["example_value"] = f
                items.append(
                    self._wrap_items(item, f, describe, arguments)
                    if isinstance(f, (tuple, list))
                    else self.wrap_result(item, f, describe, arguments)
                )
            else:
                items.append(constant(f))
        if isinstance(fake, list):
            return ListVariable(items)
        if type(fake).__module__ == "torch.return_types":
            return StructSeqVariable(items, type(fake))
        return TupleVariable(items)

    def _item(self, node: torch.fx.Node, index: int, fake: Any) -> Variable:
        if not is_symbolic(fake):
            return constant(fake)
        item = self.graph.create_node("call_function", operator.getitem, (node, index), {})
        item.meta["example_value"] = fake
        return SymNodeVariable(item, fake)

    # -- finishing ------------------------------------------------------------------------------

    def op_count(self) -> int:
        """Operations in the graph. Flag switches are bookkeeping, not operations, and so are
        the enter and exit nodes of contexts when the graph leaves none open (a graph break cut
        the block: the state the graph would switch to and back is entered again for real)."""
        bookkeeping = torch_flags.SETTERS | (set() if self.open_contexts else STATE_FUNCTIONS)
        return sum(
            1
            for n in self.graph.nodes
            if n.op in ("call_function", "call_method", "call_module") and n.target not in bookkeeping
        )


class _nullctx:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _made_subclass(kind: str, target: Any, args: list[Variable], kwargs: dict[str, Variable]) -> type | None:
    """The user's tensor class `t.as_subclass(cls)` makes, or None for another operation."""
    if kind != "call_method" or target != "as_subclass" or kwargs or len(args) != 2 or not args[1].is_constant():
        return None
    cls = args[1].as_constant()
    return cls if isinstance(cls, type) and issubclass(cls, torch.Tensor) and is_user_class(cls) else None


def call_with_keywords(fn: Any, args: tuple, kwargs: dict[str, Any]) -> Any:
    """`fn(*args, **kwargs)`, or the method named `fn` of `args[0]`: the node target of a call
    with a keyword argument named like a Python keyword (`t.random_(from=-10)`), which the
    code FX generates could not spell as `name=value`."""
    if isinstance(fn, str):
        return getattr(args[0], fn)(*args[1:], **kwargs)
    return fn(*args, **kwargs)


def _inner_tensor_names(value: torch.Tensor, source: Source) -> list[str] | None:
    """The inner tensors' names of a traceable wrapper subclass (None for other tensors). One
    whose `__tensor_flatten__` (or an inner tensor it names) fails cannot be fakeified or
    guarded: an instance still being built (its own `__init__` compiled as a frame, its
    attributes not set yet). The frame runs eagerly instead."""
    if not is_traceable_wrapper_subclass(value):
        return None
    try:
        names = list(value.__tensor_flatten__()[0])
        for name in names:
            getattr(value, name)
        return names
    except Exception as e:  # noqa: BLE001 - the user's class: whatever it raises, the input cannot be read
        raise Unsupported(
            f"{source.name()}: {type(value).__qualname__}.__tensor_flatten__ failed ({type(e).__name__}: {e}); "
            "a tensor subclass instance not fully initialised cannot be an input"
        ) from None


def _spelled_out(kind: str, target: Any, args: tuple, kwargs: dict[str, Any]) -> tuple[str, Any, tuple, dict]:
    """A node's (kind, target, args, kwargs), through `call_with_keywords` where a keyword
    argument's name is a Python keyword."""
    if not any(keyword.iskeyword(name) for name in kwargs):
        return kind, target, args, kwargs
    return "call_function", call_with_keywords, (target, args, dict(kwargs)), {}


# the attribute naming the class a `subclass_maker` function makes (read by backends/subclass_graphs)
MADE_SUBCLASS_ATTR = "__stenograph_made_subclass__"


def subclass_maker(cls: type) -> Any:
    """The graph node's target for `t.as_subclass(cls)`: a function named after the class, which
    FX binds in the graph's code (a local class has no importable name); one per class."""
    maker = _subclass_makers.get(cls)
    if maker is None:
        ref = weakref.ref(cls)  # the class's entry in the weak table must not keep it alive

        def maker(t: torch.Tensor) -> torch.Tensor:
            return t.as_subclass(ref())

        maker.__name__ = maker.__qualname__ = f"as_{cls.__name__}"
        setattr(maker, MADE_SUBCLASS_ATTR, ref)
        _subclass_makers[cls] = maker
    return maker


_subclass_makers: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
process_state.register_containers("graph.subclass_makers", _subclass_makers, memo=True)


def _result_tensor(node: torch.fx.Node, fake: torch.Tensor, arguments: dict[int, Variable] | None) -> TensorVariable:
    """An operation's new tensor; one computed from a tensor subclass instance (or made one by
    `as_subclass`) has the class that instance's `__torch_function__` gives it at run time."""
    var = TensorVariable(node, fake)
    made = not type(fake).__module__.startswith("torch.")  # `as_subclass(Cls)` of a fake is a Cls
    operands = (arguments or {}).values()
    if made or any(isinstance(a, TensorVariable) and (a.subclass or a.from_subclass) for a in operands):
        var.from_subclass = True
    return var


def _is_traceable_structure(value: Any) -> bool:
    """Tensors, symbolic numbers and plain constants, in (nested) tuples and lists."""
    if isinstance(value, (tuple, list)):
        return all(_is_traceable_structure(v) for v in value)
    return isinstance(value, (torch.Tensor, bool, int, float, type(None))) or is_symbolic(value)


def _placeholder_name(source: Source) -> str:
    text = source.name()
    text = re.sub(r"^L\[['\"](.*?)['\"]\]", r"\1", text)
    text = re.sub(r"^G\[['\"](.*?)['\"]\]", r"\1", text)
    text = re.sub(r"[^0-9a-zA-Z_]+", "_", text).strip("_")
    if not text or text[0].isdigit():
        text = "arg_" + text
    if text == "self":  # a tensor method's own `self`: the graph module's forward takes a `self`
        text = "self_"
    return text


def _graph_inputs_given_as_out(out: Variable | None) -> list[tuple[TensorVariable, tuple]]:
    """The graph inputs among an op's `out=` tensors, with their shapes before the op."""
    given = out.items if isinstance(out, SequenceVariable) else [out]
    return [
        (var, tuple(var.fake.shape))
        for var in given
        if isinstance(var, TensorVariable) and var.node.op == "placeholder"
    ]


def _resized(before: tuple, after: torch.Size) -> bool:
    """Whether an op resized its `out=` tensor, its sizes compared once the op has run: a symbolic
    size that the op's own size check pinned to this call's value reads the same on both sides.
    Two symbols that differ (out's own size, and the one the op computed) are guarded equal where
    they are equal in this call."""
    if len(before) != len(after):
        return True
    return not all(str(b) == str(a) or bool(b == a) for b, a in zip(before, after))


def _tensor_arguments(args: list[Variable]) -> dict[int, Variable]:
    """id of each tensor argument's fake -> its tracker (items of tuple/list arguments too)."""
    found: dict[int, Variable] = {}
    for arg in args:
        if isinstance(arg, TensorVariable):
            found.setdefault(id(arg.fake), arg)
        elif isinstance(arg, SequenceVariable):
            for key, var in _tensor_arguments(arg.items).items():
                found.setdefault(key, var)
    return found


def _refuse_arrays(args: list[Variable], describe: str) -> None:
    """A NumPy array or scalar given to a torch operation, which would take it as a tensor: eager
    refuses an array (TypeError) and reads a NumPy scalar as a Python number, whose dtype
    promotion differs from a 0-d tensor's (`int_t.add(np.float64(2))` is float32). Operators and
    conversions that take them are traced in `variables.numpy_arrays`; other calls run eagerly."""
    for arg in args:
        if isinstance(arg, NdarrayVariable):
            raise Unsupported(f"{describe} given {arg.describe()}: eager does not take it as a tensor")
        if isinstance(arg, SequenceVariable):
            _refuse_arrays(arg.items, describe)


def _unwrap_all(args: list[Variable]) -> tuple[list[Any], list[Any]]:
    pairs = [unwrap(a) for a in args]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def _unwrap_all_kw(kwargs: dict[str, Variable]) -> tuple[dict[str, Any], dict[str, Any]]:
    pairs = {k: unwrap(v) for k, v in kwargs.items()}
    return {k: p[0] for k, p in pairs.items()}, {k: p[1] for k, p in pairs.items()}


def _keeps_numbers_read_inside(kind: str, target: Any, args: list[Variable], kwargs: dict[str, Variable]) -> bool:
    """Whether numbers the op read from its 0-d tensor arguments may stay inside it: for the ops
    of SCALAR_TENSOR_OPS, and with `capture_scalar_outputs` for any op, but never where autograd
    records one whose derivative reads the number too (AOTAutograd tracing its backward would
    have to decide on a number it cannot know: the graph breaks, and the op runs eagerly)."""
    known = isinstance(target, (str, types.BuiltinFunctionType)) and target in SCALAR_TENSOR_OPS
    if known and SCALAR_TENSOR_OPS[target] and torch.is_grad_enabled():
        fakes = pytree.tree_leaves((_unwrap_all(args)[1], _unwrap_all_kw(kwargs)[1]))
        if any(isinstance(fake, torch.Tensor) and fake.requires_grad for fake in fakes):
            return False
    return known or config.capture_scalar_outputs


def _ignore_values_read_inside(shape_env: Any, fake: Any) -> None:
    """A number an op read from a tensor argument itself (a 0-d tensor passed as
    `torch._foreach_addcmul`'s Scalar `value`) is not one of its results: it cannot size anything
    the op returned (a decision on it would have raised while the fake op ran), and the real op
    reads it again when the graph runs. Such symbols are let go, as
    torch.compile lets go of those of the ops it knows take Scalars, but only where the op's
    results hold no new symbol at all (a result sized by one is left to the usual binding)."""
    if not compute_unbacked_bindings(shape_env, fake, peek=True):
        shape_env.ignorable_fresh_unbacked_symbols.extend(shape_env.pending_fresh_unbacked_symbols)
