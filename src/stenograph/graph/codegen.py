"""Generating the transformed function: fetch graph inputs, call the compiled graph, replay
side effects, then either rebuild the return value or — at a graph break — rebuild the frame's
stack and locals, run the one unsupported instruction eagerly and tail-call the resume function.

The transformed function is Python source with the original signature (DESIGN decision 9), e.g.

    def ___transformed(self, x):
        ___v0 = self._modules['fc1']
        ___out = ___graph(x, ___v0._parameters['weight'], ___v0._parameters['bias'])
        return (___out[0], 3)

Inputs are re-read through their sources on every call, so parameters updated by an optimizer or
replaced by assignment are always the ones used.
"""

from __future__ import annotations

import functools
import types
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from .. import config, torch_flags
from ..errors import SideEffectsNotReplayed
from ..guards.guard_set import _repr_roundtrips
from ..guards.pyfunc import make_function, parameter_list
from ..guards.sources import GlobalsNamer, SourceRenderer
from ..variables.base import Variable
from ..variables.constants import TraceId, trace_id_leaves
from ..variables.generators import unclosed_refusal
from .eager_warnings import warn_at
from .side_effects import SideEffects

if TYPE_CHECKING:
    from .output_graph import OutputGraph

# a global name of every transformed function: code can tell whether compiled code is running
TRANSFORMED_MARK = "___stenograph_transformed"


class CodeWriter:
    """The lines of a generated function and the objects its global names refer to.

    `pre` holds reads of sources (side-effect free; the graph call needs them), `post` runs
    after the graph call, `tail` ends the function; `on_graph_error` runs where the graph call
    raises, before the exception goes on.
    """

    def __init__(self) -> None:
        self.namer = GlobalsNamer()
        self.renderer = SourceRenderer(self.namer)
        self.pre: list[str] = []
        self.post: list[str] = []
        self.tail: list[str] = []
        self.on_graph_error: list[str] = []
        self.namespace: dict[str, Any] = {"___Size": torch.Size, TRANSFORMED_MARK: True}
        self._counter = 0

    def bind(self, obj: Any, hint: str) -> str:
        for name, value in self.namespace.items():
            if value is obj:
                return name
        name = f"___{hint}{len(self.namespace)}"
        self.namespace[name] = obj
        return name

    def temp(self, hint: str = "t") -> str:
        """A local of the generated function (`___<hint>_<n>`: the underscore keeps temporaries
        apart from bound globals, `___<hint><n>`, which a local of the same name would hide)."""
        self._counter += 1
        return f"___{hint}_{self._counter}"

    def source(self, source: Any) -> str:
        return self.renderer.render(source, self.pre)

    def build(
        self, code: types.CodeType, like: types.FunctionType | None, graph_call: str | None, label: str, line: int
    ) -> types.FunctionType:
        """The function; it presents itself as `code` at `line` (the return or the break)."""
        lines = list(self.pre)
        if graph_call is not None and self.on_graph_error:
            lines += ["try:", f"    {graph_call}", "except BaseException:"]
            lines += [f"    {line}" for line in self.on_graph_error] + ["    raise"]
        elif graph_call is not None:
            lines.append(graph_call)
        lines += self.post + self.tail
        self.namespace.update(self.namer.bindings())
        return make_function(
            "___transformed",
            parameter_list(code),
            lines,
            self.namespace,
            like=like,
            label=f"transformed {label}",
            present_as=(code.co_filename, line, code.co_name),
        )


class Reconstructor:
    """Python expressions that rebuild trackers' values at run time.

    Tensors computed by the graph become graph outputs (`___out[i]`); values with a source are
    re-read through it; lists and dicts are built once into a temporary so aliasing is kept.
    """

    def __init__(self, writer: CodeWriter) -> None:
        self.writer = writer
        self.outputs: list[torch.fx.Node] = []
        self._index: dict[torch.fx.Node, int] = {}
        self._built: dict[int, str] = {}
        # the code rebuilds values the frame returns, after which none of its cells is read again
        self.frame_ended = False
        # ids of the breaking frame's cells that its resume function receives as they are
        # (`BreakWriter.shares_cells`): a function rebuilt around one shares it, not a copy
        self.shared_cells: set[int] = set()

    def expr(self, var: Variable) -> str:
        if var.source is not None:
            return self.writer.source(var.source)
        text = var.reconstruct(self)
        if len(text) > _DEEP_TEXT and _nesting(text) > _MAX_NESTING:
            # Python's parser refuses expressions nested past 200 brackets (a tuple wrapped in
            # itself 300 times): the deep part goes to a local, and the expression stays shallow
            name = self.writer.temp("n")
            self.writer.post.append(f"{name} = {text}")
            return name
        return text

    def graph_value(self, node: torch.fx.Node) -> str:
        """A value computed by the graph: one of its outputs."""
        index = self._index.get(node)
        if index is None:
            index = self._index[node] = len(self.outputs)
            self.outputs.append(node)
        return f"___out[{index}]"

    def build_once(self, var: Variable, render: Callable[[], str]) -> str:
        """A mutable value made while tracing (a list, a dict), built once into a temporary so
        that aliases stay aliases; `render()` gives the expression that builds it."""
        name = self._built.get(id(var))
        if name is not None:
            return name
        value = render()
        name = self.writer.temp("c")
        self.writer.post.append(f"{name} = {value}")
        self._built[id(var)] = name
        return name

    def was_built(self, var: Variable) -> bool:
        """Whether `var` was rebuilt by `build_once` or `build_object`."""
        return id(var) in self._built

    def build_object(self, var: Variable, create: str, fill: Callable[[str], list[str]]) -> str:
        """An object made while tracing, rebuilt once: `create` makes it and is bound to a name
        before `fill(name)` renders its contents, so objects that refer to each other work."""
        name = self._built.get(id(var))
        if name is not None:
            return name
        name = self.writer.temp("o")
        self._built[id(var)] = name
        self.writer.post.append(f"{name} = {create}")
        self.writer.post.extend(fill(name))
        return name

    def new_cell(self, cell: object) -> str:
        """A new closure cell standing for `cell` (a cell of a traced frame), one for all the
        functions rebuilt around it, so that they keep sharing it."""
        name = self._built.get(id(cell))
        if name is None:
            name = self._built[id(cell)] = self.writer.temp("cell")
            self.writer.post.append(f"{name} = {self.writer.bind(types.CellType, 'CellType')}()")
        return name

    def constant(self, value: Any) -> str:
        if isinstance(value, TraceId):
            raise trace_id_leaves()
        if isinstance(value, (int, float, str, bytes, bool, type(None))) and _repr_roundtrips(value):
            return repr(value)
        return self.writer.bind(value, "const")

    def pin(self, expr: str) -> str:
        """`expr`'s value now, in a local: a value read from an input must be taken before the
        side-effect replay changes that input (`old = d["k"]; d["k"] = 10; return old`)."""
        if expr.isidentifier():
            return expr
        name = self.writer.temp("v")
        self.writer.post.append(f"{name} = {expr}")
        return name

    def replay(self, side_effects: SideEffects) -> None:
        """The warnings the traced code issued, then mutations of outside objects, after the
        graph (mutations are dropped when the user turned `config.replay_side_effects` off, as
        torch.compile does)."""
        for filename, line, module_globals, level, message, category in side_effects.warnings:
            issue = functools.partial(warn_at, filename, line, module_globals, message, category, level)
            self.writer.post.append(f"{self.writer.bind(issue, 'warn')}()")
        if config.replay_side_effects:
            side_effects.replay(self.expr, self.writer.post.append, self.writer.namer.name_for, self.pin)
            return
        policy = config.side_effect_replay_policy
        changed = side_effects.changed_sources() if policy in ("warn", "error") else []
        if changed:
            message = (
                "While compiling, we found certain side effects happened in the model.forward. Here are the "
                f"list of potential sources you can double check: {changed}"
            )
            if policy == "error":
                raise SideEffectsNotReplayed(message)
            warnings.warn(message, stacklevel=2)

    def set_flags(self, values: dict[torch_flags.Flag, Any], output: OutputGraph) -> None:
        """The graph ends in the state it started in; switch each real flag the traced code left
        in another value (`torch.set_grad_enabled(False)`, `torch.use_deterministic_algorithms(True)`,
        `torch.set_default_dtype(torch.float64)` as statements). Where the graph switches flags
        and raises, it stops in the state of the failing operation (a retracing backend: in the
        one it started in); the flags are then set as the traced code leaves them, where eager
        leaves them too when the switches are undone by `with` blocks and `finally` clauses, or
        by none (a statement's switch stays), which the exception runs."""
        if output.switches_flags():
            restore = self.writer.bind(torch_flags.restore, "restore_flags")
            self.writer.on_graph_error.append(f"{restore}({self.writer.bind(dict(values), 'flags')})")
        for flag, value in values.items():
            if value != output.initial_flags[flag]:
                args, kwargs = flag.arguments(value)
                arguments = [self._flag_value(a) for a in args]
                arguments += [f"{k}={self._flag_value(v)}" for k, v in kwargs.items()]
                self.writer.post.append(f"{self.writer.bind(flag.setter, 'set_flag')}({', '.join(arguments)})")

    def _flag_value(self, value: Any) -> str:
        """A flag's value in the generated code: a bool as itself, a dtype by name."""
        return repr(value) if isinstance(value, bool) else self.writer.bind(value, "flag_value")


# rebuilt expressions nested deeper than this go to a local (the parser allows 200 levels);
# shorter texts cannot be that deep and are not scanned
_MAX_NESTING = 50
_DEEP_TEXT = 2 * _MAX_NESTING


def _nesting(text: str) -> int:
    """How deep brackets nest in `text` (those inside string literals count too, which only
    makes a local of a shallow expression)."""
    depth = deepest = 0
    for ch in text:
        if ch in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in ")]}":
            depth -= 1
    return deepest


GraphCompiler = Callable[[list[torch.fx.Node]], Any]


def finish(
    writer: CodeWriter,
    rebuild: Reconstructor,
    input_sources: list,
    compile_graph: GraphCompiler,
    code: types.CodeType,
    like: types.FunctionType | None,
    label: str,
    line: int,
) -> types.FunctionType:
    """Compile the graph with the outputs the rebuilt values need and assemble the function."""
    compiled = compile_graph(rebuild.outputs)
    graph_call = None
    if compiled is not None:
        args = [writer.source(s) for s in input_sources]
        writer.namespace["___graph"] = compiled
        graph_call = f"___out = ___graph({', '.join(args)})"
    return writer.build(code, like, graph_call, label, line)


def build_returning(
    code: types.CodeType,
    like: types.FunctionType | None,
    input_sources: list,
    side_effects: SideEffects,
    result: Variable,
    compile_graph: GraphCompiler,
    label: str,
    output: OutputGraph,
    end_flags: dict[torch_flags.Flag, Any],
    line: int,
) -> types.FunctionType:
    """The transformed function of a frame traced to its RETURN; `end_flags` are the process
    flags (`torch_flags`) at the end of the trace of `output`."""
    # taken off the trace (they hold frames that refer to it: the trace is freed without a GC)
    unclosed, output.unclosed_generators = output.unclosed_generators, []
    writer = CodeWriter()
    rebuild = Reconstructor(writer)
    rebuild.frame_ended = True
    rebuild.set_flags(end_flags, output)
    return_expr = rebuild.expr(result)
    if side_effects:
        return_expr = rebuild.pin(return_expr)
    rebuild.replay(side_effects)
    for generator in unclosed:
        if not rebuild.was_built(generator):  # dropped as the frame returns: its cleanup runs then
            raise unclosed_refusal(generator)
    writer.tail.append(f"return {return_expr}")
    return finish(writer, rebuild, input_sources, compile_graph, code, like, label, line)
