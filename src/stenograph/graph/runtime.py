"""What generated code calls at a graph break, handed down by the entry layer.

Transformed code that breaks calls user functions, submodules and resume functions through
entry wrappers, so they are compiled as frames of their own, and tail-calls the next frame with
`Continue`. Those belong to `entry`, which sits above the tracing layer: `entry` builds one
`Runtime` of its functions and passes it to `compile_frame`, which hands it to the break writer
and to `resume_function`. Nothing in this layer imports `entry`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Runtime:
    """The entry layer's callables, each taking `(…, backend, backend_name)` as in `entry`, and
    the breaking frame's `compile(dynamic=...)` setting where they compile (None: automatic).

    - `entry_wrapper(fn, backend, backend_name, fullgraph, nested=...)`: the guarded, compiled
      `fn`; a `nested` one (what compiled code calls) raises the recursion limit by its own frame.
    - `resume_dispatcher(fn, backend, backend_name)`: what `Continue` calls for resume function
      `fn`: `dispatch(args)`, the guarded lookup taking the arguments as one tuple (the closure
      first, for code with free variables).
    - `closure_caller(fn, backend, backend_name)`: `call(f, *args)` running any function made
      from `fn`'s code, compiled, with `f`'s own closure.
    - `module_caller(backend, backend_name)`: `call(module, *args)` running a module's compiled
      forward.
    - `cache_for(code, backend, backend_name)`: the cache of `code` (generated code keeps the
      cache of the nested functions it wraps alive).
    - `continue_class`: the tail call transformed code returns at a break (`entry.Continue`).
    """

    entry_wrapper: Any
    resume_dispatcher: Any
    closure_caller: Any
    module_caller: Any
    cache_for: Any
    continue_class: type
