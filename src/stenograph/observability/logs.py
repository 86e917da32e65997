"""Logs: `STENOGRAPH_LOGS=graph_code,guards` or `stenograph.set_logs(guards=True)`.

Each name is a logger on the `logging` module, `stenograph.<name>`, fed from the compile events
(so nothing here runs per call). The names mirror TORCH_LOGS so torch.compile users know them:

    graph_code    each captured graph's Python code
    graph_breaks  each graph break: reason, instruction, user stack with source lines
    guards        the generated guard function of each cache entry
    recompiles    which guard failed, with its old and new value
    bytecode      original and transformed code of each entry, readable
    dynamic       the symbolic (dynamic) sizes and values each graph takes
    ddp_graphs    each graph split at DistributedDataParallel's buckets: the pieces and their code

Enabling a name sets its logger to DEBUG and prints it to stderr; `config.verbose` adds
stenograph's internal stacks (where a break was decided, where a recompile was triggered).
Loggers can also be configured directly with `logging` (level DEBUG and any handler).
"""

from __future__ import annotations

import dis
import io
import logging
import os
import sys
import traceback
from typing import Any

import torch

from .. import config, events
from ..errors import InvalidConfig

NAMES: dict[str, str] = {
    "graph_code": "each captured graph's Python code",
    "graph_breaks": "each graph break: reason, instruction, user stack with source lines",
    "guards": "the generated guard function of each cache entry",
    "recompiles": "which guard failed, with its old and new value",
    "bytecode": "original and transformed code of each entry, readable",
    "dynamic": "the symbolic (dynamic) sizes and values each graph takes",
    "ddp_graphs": "each graph split at DistributedDataParallel's buckets: the pieces and their code",
    "cache": "the persisted cache (config.cache_dir): entries installed, stored, rejected or not stored, and why",
}
ENV_VAR = "STENOGRAPH_LOGS"


def logger(name: str) -> logging.Logger:
    """The `logging` logger of a log name (`stenograph.guards`, ...)."""
    return logging.getLogger(f"stenograph.{name}")


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever `sys.stderr` is at the time (pytest and the CLI replace it)."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(logging.Formatter("[%(name)s] %(message)s"))

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


_handler = _StderrHandler()


def set_logs(
    *,
    graph_code: bool = False,
    graph_breaks: bool = False,
    guards: bool = False,
    recompiles: bool = False,
    bytecode: bool = False,
    dynamic: bool = False,
    ddp_graphs: bool = False,
    cache: bool = False,
) -> None:
    """Turn log names on (True) or off (False): each call replaces the previous setting."""
    enabled = {
        "graph_code": graph_code,
        "graph_breaks": graph_breaks,
        "guards": guards,
        "recompiles": recompiles,
        "bytecode": bytecode,
        "dynamic": dynamic,
        "ddp_graphs": ddp_graphs,
        "cache": cache,
    }
    for name, on in enabled.items():
        if not isinstance(on, bool):
            raise TypeError(f"set_logs({name}=...) takes a bool, not {on!r}")
        logger(name).setLevel(logging.DEBUG if on else logging.NOTSET)
    root = logging.getLogger("stenograph")
    if any(enabled.values()):
        if _handler not in root.handlers:
            root.addHandler(_handler)
        root.propagate = False  # printed once, by our handler
    elif _handler in root.handlers:
        root.removeHandler(_handler)
        root.propagate = True


def parse_setting(text: str) -> dict[str, bool]:
    """`"graph_code,guards"` (or `"all"`) -> set_logs() keyword arguments."""
    names = [part.strip() for part in text.replace(" ", ",").split(",") if part.strip()]
    if names == ["all"]:
        return dict.fromkeys(NAMES, True)
    unknown = [n for n in names if n not in NAMES]
    if unknown:
        listing = "\n".join(f"  {n:13} {d}" for n, d in NAMES.items())
        raise InvalidConfig(f"{ENV_VAR}: unknown log name(s) {', '.join(unknown)}; valid names:\n{listing}\n  all")
    return {n: n in names for n in NAMES}


def configure_from_env() -> None:
    text = os.environ.get(ENV_VAR, "")
    if text.strip():
        set_logs(**parse_setting(text))


# -- messages -------------------------------------------------------------------------------------


def _enabled(name: str) -> logging.Logger | None:
    log = logger(name)
    return log if log.isEnabledFor(logging.DEBUG) else None


def _on_event(event: events.CompileEvent) -> None:
    cid = f"[{event.compile_id}]"
    if isinstance(event, events.FrameCompiled):
        entry = event.entry
        if log := _enabled("graph_code"):
            log.debug("%s", graph_code_message(cid, event.label, entry.graph, entry.ddp_split))
        if log := _enabled("guards"):
            log.debug("GUARDS %s %s\n%s", cid, event.label, entry.guard_source.rstrip())
        if log := _enabled("bytecode"):
            log.debug("%s", bytecode_message(cid, entry))
        if log := _enabled("dynamic"):
            log.debug("%s %s: %s", cid, event.label, dynamic_summary(entry))
        if entry.ddp_split is not None and (log := _enabled("ddp_graphs")):
            log.debug("%s", ddp_split_message(cid, event.label, entry.ddp_split))
    elif isinstance(event, events.GraphBreak):
        if log := _enabled("graph_breaks"):
            log.debug("%s", graph_break_message(cid, event))
    elif isinstance(event, events.Recompile):
        if log := _enabled("recompiles"):
            log.debug("%s", recompile_message(cid, event))
    elif isinstance(event, events.CacheLookup):
        if log := _enabled("cache"):
            log.debug("%s %s %s: %s", cid, event.outcome.value.upper(), event.label, event.detail)
    elif isinstance(event, events.RunsEagerly):
        name = "recompiles" if event.cause is events.EagerCause.RECOMPILE_LIMIT else "graph_breaks"
        if log := _enabled(name):
            log.debug("%s %s runs eagerly from now on: %s", cid, event.label, event.reason)


def graph_code_message(cid: str, label: str, graph: torch.fx.GraphModule | None, split: Any = None) -> str:
    if graph is None:
        return f"TRACED GRAPH {cid} {label}: no tensor operations, no graph"
    text = f"TRACED GRAPH {cid} {label}\n{readable_graph(graph)}"
    if split is not None:
        text += f"\n({split.summary()}; STENOGRAPH_LOGS=ddp_graphs shows them)"
    return text


def ddp_split_message(cid: str, label: str, split: Any) -> str:
    """The buckets a graph was split at (a `backends.ddp_split.DdpSplit`) and each piece's code."""
    text = [f"DDP SPLIT {cid} {label}: {split.table()}"]
    for i, piece in enumerate(split.pieces):
        text += [f"--- piece {i}", piece.code.rstrip()]
    return "\n".join(text)


def readable_graph(graph: torch.fx.GraphModule) -> str:
    """The graph as Python with shape annotations (what `print_readable` shows)."""
    return graph.print_readable(print_output=False).rstrip()


def format_user_stack(user_stack: list) -> str:
    """`user_stack` (innermost first) as a Python traceback, most recent call last."""
    lines = []
    for filename, line, name, text in reversed(user_stack):
        lines.append(f'  File "{filename}", line {line}, in {name}')
        if text and text.strip():
            lines.append(f"    {text.strip()}")
    return "\n".join(lines)


def graph_break_message(cid: str, event: events.GraphBreak) -> str:
    where = f"{event.user_stack[0][0]}:{event.user_stack[0][1]}" if event.user_stack else event.label
    text = [
        f"{cid} Graph break in user code at {where}",
        f"Reason: {event.reason}",
        f"Instruction: {event.instruction}",
        "User code traceback (most recent call last):",
        format_user_stack(event.user_stack),
    ]
    if config.verbose and event.internal_stack:
        text += ["stenograph internal stack (most recent call last):", event.internal_stack.rstrip()]
    return "\n".join(text)


def recompile_message(cid: str, event: events.Recompile) -> str:
    previous = event.previous or "?"
    failure = event.failure
    text = [
        f"Recompiling {event.label} {cid}: the guards of [{previous}] failed",
        f"    failed guard (old value): {failure.check}",
    ]
    if failure.new_value is not None:
        text.append(f"    new value: {failure.new_value}")
    if config.verbose:
        text += ["  triggered from (most recent call last):", "".join(traceback.format_stack()[:-2]).rstrip()]
    return "\n".join(text)


def transformed_function(entry: Any) -> Any:
    """The entry's transformed function (unwrapping per-call timing, when it is on)."""
    return getattr(entry.fn, "__wrapped__", entry.fn)


def disassembly(code: Any) -> str:
    out = io.StringIO()
    dis.dis(code, file=out, depth=0)
    return out.getvalue().rstrip()


def bytecode_message(cid: str, entry: Any) -> str:
    fn = transformed_function(entry)
    return "\n".join(
        [
            f"ORIGINAL BYTECODE {cid} {entry.label}",
            disassembly(entry.code),
            f"TRANSFORMED CODE {cid} {entry.label} (generated Python)",
            entry.transformed_source.rstrip(),
            f"TRANSFORMED BYTECODE {cid} {fn.__code__.co_filename}",
            disassembly(fn.__code__),
        ]
    )


def dynamic_summary(entry: Any) -> str:
    """Which graph inputs are symbolic (`L['x'] size=[s0, 3]`, `L['n'] = s1`) and the shape
    guards that hold for them, or that everything is static."""
    symbolic = []
    nodes = entry.graph.graph.nodes if entry.graph is not None else []
    for node in nodes:
        if node.op != "placeholder":
            continue
        value = node.meta.get("example_value")
        name = node.meta.get("source", node.name)
        if isinstance(value, torch.Tensor) and any(isinstance(s, torch.SymInt) for s in value.shape):
            symbolic.append(f"{name} size={[str(s) for s in value.shape]}")
        elif isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            symbolic.append(f"{name} = {value}")
    if not symbolic:
        return "all sizes and values static"
    shape_guards = [c.text for c in entry.guard_set.ordered() if c.refs is not None]
    text = "dynamic inputs: " + "; ".join(symbolic)
    if shape_guards:
        text += "\n    shape guards: " + "; ".join(shape_guards)
    return text


events.subscribe(_on_event)
