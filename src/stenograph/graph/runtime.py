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
    - `cache_for(code, globals_dict, backend, backend_name)`: the cache of `code` over those
      globals (generated code keeps the cache of the nested functions it wraps alive).
    - `callee_router(backend, backend_name, dynamic)`: `route(callable)`, what a frame running
      eagerly with its callees compiled calls instead (`callee_routing`).
    - `continue_class`: the tail call transformed code returns at a break (`entry.Continue`).
    """

    entry_wrapper: Any
    resume_dispatcher: Any
    closure_caller: Any
    module_caller: Any
    cache_for: Any
    callee_router: Any
    continue_class: type

    def recording(self) -> Runtime:
        """This runtime, remembering how each object it makes was made (`maker_of`), so that
        generated code holding one can be persisted and the object made again elsewhere."""

        def recorded(name: str) -> Any:
            make = getattr(self, name)

            def call(*args: Any, **kwargs: Any) -> Any:
                made = make(*args, **kwargs)
                remember_maker(made, name, args, kwargs)
                return made

            remember_maker(call, "member", (name,), {})
            return call

        return Runtime(
            entry_wrapper=recorded("entry_wrapper"),
            resume_dispatcher=self.resume_dispatcher,  # `resume.resume_function` records its own
            closure_caller=recorded("closure_caller"),
            module_caller=recorded("module_caller"),
            cache_for=recorded("cache_for"),
            callee_router=recorded("callee_router"),
            continue_class=self.continue_class,
        )


_MADE = "__stenograph_made__"


def remember_maker(obj: Any, maker: str, args: tuple, kwargs: dict) -> None:
    """Record on `obj` (a function or a cache the entry layer made for generated code) that
    `maker(*args, **kwargs)` made it, so a persisted entry holding it can make it again. Kept on
    the object itself: it lives exactly as long, and keeps what made it alive no longer."""
    object.__getattribute__(obj, "__dict__")[_MADE] = (maker, args, kwargs)


def maker_of(obj: Any) -> tuple[str, tuple, dict] | None:
    """How `obj` was made, if `remember_maker` was told (read without running `obj`'s own
    attribute lookup)."""
    try:
        own = object.__getattribute__(obj, "__dict__")
    except AttributeError:
        return None
    return own.get(_MADE) if type(own) is dict else None
