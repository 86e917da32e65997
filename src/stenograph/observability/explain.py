"""`explain(fn)(*args, **kwargs)`: compile and run once, and report what was captured.

Counts graphs across the function and every resume function and callee compiled on the way,
lists each graph break with its user stack, the guards of every entry and compile times. A graph
split at DistributedDataParallel's buckets counts as its pieces (each one reached the backend),
and `ddp_splits` says which graph was split into how many.
Caches are cleared before and after, so the report describes a fresh compilation.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from .. import api, events
from ..errors import BreakKind
from ..graph.resume import frame_name


@dataclass
class BreakReason:
    reason: str
    user_stack: list  # [(filename, line, function, source text)], innermost first
    instruction: str = ""
    kind: BreakKind = BreakKind.UNSUPPORTED  # what the break met, to filter by (`reason` is for people)

    def __str__(self) -> str:
        lines = [self.reason]
        for filename, line, name, text in self.user_stack:
            lines.append(f'  File "{filename}", line {line}, in {name}')
            if text:
                lines.append(f"    {text.strip()}")
        return "\n".join(lines)


@dataclass
class ExplainOutput:
    graphs: list[torch.fx.GraphModule] = field(default_factory=list)
    graph_count: int = 0
    graph_break_count: int = 0
    break_reasons: list[BreakReason] = field(default_factory=list)
    op_count: int = 0
    ops_per_graph: list[list[Any]] = field(default_factory=list)
    out_guards: list[str] = field(default_factory=list)
    compile_times: str = ""
    ddp_splits: list[str] = field(default_factory=list)  # "<frame>: graph split into N pieces ..."

    def __str__(self) -> str:
        lines = [
            f"Graph Count: {self.graph_count}",
            f"Graph Break Count: {self.graph_break_count}",
            f"Op Count: {self.op_count}",
            "Break Reasons:",
        ]
        for i, reason in enumerate(self.break_reasons, 1):
            lines.append(f"  Break Reason {i}:")
            lines.extend("    " + line for line in str(reason).splitlines())
        lines.append("Ops per Graph:")
        for i, ops in enumerate(self.ops_per_graph, 1):
            lines.append(f"  Ops {i}:")
            lines.extend(f"    {_op_name(op)}" for op in ops)
        if self.ddp_splits:
            lines.append("DDP Splits:")
            lines.extend(f"  {split}" for split in self.ddp_splits)
        lines.append("Out Guards:")
        lines.extend(f"  {g}" for g in self.out_guards)
        if self.compile_times:
            lines.append(f"Compile Times: {self.compile_times}")
        return "\n".join(lines)


def explain(fn: Callable, *deprecated_args: Any, **deprecated_kwargs: Any) -> Callable[..., ExplainOutput]:
    """`explain(fn)(*args, **kwargs)` -> ExplainOutput (`explain(fn, *args, **kwargs)`, torch's
    older form, warns and runs it)."""
    if not callable(fn):
        raise TypeError(f"explain() needs a callable, got {type(fn).__qualname__}")

    def run(*args: Any, **kwargs: Any) -> ExplainOutput:
        result = ExplainOutput()
        times: list[str] = []

        def record(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
            result.graphs.append(gm)
            ops = [n.target for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module")]
            result.ops_per_graph.append(ops)
            return gm.forward

        def listen(event: events.CompileEvent) -> None:
            if isinstance(event, events.GraphBreak):
                result.break_reasons.append(BreakReason(event.reason, event.user_stack, event.instruction, event.kind))
            elif isinstance(event, events.FrameCompiled):
                entry = event.entry
                result.out_guards.extend(check.text for check in entry.guard_set.ordered())
                times.append(f"{frame_name(entry.code)}: {entry.capture_seconds + entry.backend_seconds:.4f}s")
                if entry.ddp_split is not None:
                    result.ddp_splits.append(f"{frame_name(entry.code)}: {entry.ddp_split.summary()}")

        api.reset()
        events.subscribe(listen)
        try:
            api.compile(fn, backend=record)(*args, **kwargs)
        finally:
            events.unsubscribe(listen)
            api.reset()
        result.graph_count = len(result.graphs)
        result.graph_break_count = len(result.break_reasons)
        result.op_count = sum(len(ops) for ops in result.ops_per_graph)
        result.compile_times = ", ".join(times)
        return result

    if deprecated_args or deprecated_kwargs:
        warnings.warn(
            "explain(f, *args, **kwargs) is deprecated, use explain(f)(*args, **kwargs) instead.",
            FutureWarning,
            stacklevel=2,
        )
        return run(*deprecated_args, **deprecated_kwargs)  # type: ignore[return-value]
    return run


def _op_name(op: Any) -> str:
    if isinstance(op, str):
        return op
    module = getattr(op, "__module__", None)
    name = getattr(op, "__name__", repr(op))
    return f"{module}.{name}" if module else name
