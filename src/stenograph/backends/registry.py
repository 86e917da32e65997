"""The backend registry: names -> compiler functions.

A backend is any callable `backend(gm: torch.fx.GraphModule, example_inputs: list) -> callable`.
Users pick one by name (`backend="inductor"`) or pass the callable itself. Names come from three
places, looked up in this order:

1. explicit registrations (`register_backend`), including the built-ins;
2. third-party packages, through the `importlib.metadata` entry-point groups
   `stenograph_backends` and torch's `torch_dynamo_backends` (`name = "package.module:object"`),
   ours first where both name one backend;
3. nothing else: an unknown name is an error that lists the known ones.

The built-ins are torch.compile's backends of the same names, tagged as torch tags them (its
conventions are the contract): `inductor`, `cudagraphs`, `eager_debug` and `pre_dispatch_eager`
untagged; `eager`, `eager_noexcept`,
`aot_eager`, `aot_eager_default_partitioner`, `aot_eager_decomp_partition`, `ts` and `aot_ts`
tagged "debug", so `list_backends()` leaves them out as torch's does.

Why lazy: the built-in backends pull in AOTAutograd and Inductor, whose import costs seconds and
itself imports `torch._dynamo`. Built-ins are therefore registered by their module path and only
imported on first lookup, and entry points are only read on a lookup miss or a listing (a listing
reads them again, so a package installed since shows up), so `import stenograph` stays cheap and
side-effect free.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata
import inspect
import logging
import threading
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, overload

from ..errors import InvalidBackend
from .modes import BOTH_MODE_AND_OPTIONS

if TYPE_CHECKING:
    import torch.fx

__all__ = [
    "ENTRY_POINT_GROUP",
    "TORCH_ENTRY_POINT_GROUP",
    "CompilerFn",
    "get_default_backend",
    "list_backends",
    "lookup_backend",
    "register_backend",
    "resolve_backend",
    "set_default_backend",
]

#: The backend contract (DESIGN.md decision 7).
CompilerFn = Callable[["torch.fx.GraphModule", list[Any]], Callable[..., Any]]

#: Group that third-party distributions use to advertise backends.
ENTRY_POINT_GROUP = "stenograph_backends"
#: torch.compile's group: a backend packaged for torch.compile is found by name too.
TORCH_ENTRY_POINT_GROUP = "torch_dynamo_backends"

_log = logging.getLogger("stenograph.backends")

_DEBUG = ("debug",)
# name -> ("module:attribute", tags). Imported on first use only (see the module docstring).
_BUILTINS: dict[str, tuple[str, tuple[str, ...]]] = {
    "inductor": ("stenograph.backends.inductor:inductor", ()),
    "cudagraphs": ("stenograph.backends.cudagraphs:cudagraphs", ()),
    "eager": ("stenograph.backends.eager:eager", _DEBUG),
    "eager_noexcept": ("stenograph.backends.eager:eager_noexcept", _DEBUG),
    "eager_debug": ("stenograph.backends.eager:eager_debug", ()),
    "pre_dispatch_eager": ("stenograph.backends.eager:pre_dispatch_eager", ()),
    "aot_eager": ("stenograph.backends.aot_eager:aot_eager", _DEBUG),
    "aot_eager_default_partitioner": ("stenograph.backends.aot_eager:aot_eager_default_partitioner", _DEBUG),
    "aot_eager_decomp_partition": ("stenograph.backends.aot_eager:aot_eager_decomp_partition", _DEBUG),
    "ts": ("stenograph.backends.torchscript:ts", _DEBUG),
    "aot_ts": ("stenograph.backends.torchscript:aot_ts", _DEBUG),
}


@dataclass
class _Entry:
    """One registered name. `target` is the callable, or a "module:attr" path not yet imported."""

    name: str
    target: Callable[..., Any] | str
    tags: tuple[str, ...]
    origin: str  # for error messages: "built-in", "register_backend", "entry point ..."

    def load(self) -> Callable[..., Any]:
        if callable(self.target):
            return self.target
        module_name, _, attr = self.target.partition(":")
        try:
            obj: Any = importlib.import_module(module_name)
            for part in attr.split("."):
                obj = getattr(obj, part)
        except Exception as exc:
            raise InvalidBackend(
                f"backend {self.name!r} ({self.origin}) could not be loaded from "
                f"{self.target!r}: {type(exc).__name__}: {exc}"
            ) from exc
        if not callable(obj):
            raise InvalidBackend(
                f"backend {self.name!r} ({self.origin}) at {self.target!r} is a "
                f"{type(obj).__name__}, not a callable compiler_fn(gm, example_inputs)"
            )
        self.target = obj
        return obj


class _State:
    """Everything the registry knows; a class so tests can swap in a fresh one."""

    def __init__(self) -> None:
        self.entries: dict[str, _Entry] = {
            name: _Entry(name, path, tags, "built-in") for name, (path, tags) in _BUILTINS.items()
        }
        # name -> EntryPoint, filled on first discovery; None means "not discovered yet".
        self.entry_points: dict[str, importlib.metadata.EntryPoint] | None = None


_state = _State()
# what `compile()` uses when no backend is given (`set_default_backend`); a setting, kept by reset()
_default_backend: str | CompilerFn = "inductor"
# Re-entrant: loading an entry point imports a module that may itself call register_backend.
_lock = threading.RLock()


def _path_of(fn: Callable[..., Any]) -> str | None:
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None)
    return f"{module}:{qualname}" if module and qualname else None


def _normalise_tags(tags: Iterable[str] | str | None) -> tuple[str, ...]:
    if tags is None:
        return ()
    if isinstance(tags, str):  # tags="debug" means one tag, not five letters
        return (tags,)
    tags = tuple(tags)
    for tag in tags:
        if not isinstance(tag, str):
            raise InvalidBackend(f"backend tags must be strings, got {type(tag).__name__}: {tag!r}")
    return tags


def _register(fn: Callable[..., Any], name: str | None, tags: tuple[str, ...]) -> None:
    if not callable(fn):
        raise InvalidBackend(
            f"register_backend needs a callable compiler_fn(gm, example_inputs), got {type(fn).__name__}: {fn!r}"
        )
    if name is None:
        name = getattr(fn, "__name__", None)
        if not name or name == "<lambda>":
            raise InvalidBackend("register_backend could not take a name from this callable; pass name=...")
    if not isinstance(name, str) or not name:
        raise InvalidBackend(f"backend name must be a non-empty str, got {name!r}")
    with _lock:
        existing = _state.entries.get(name)
        if existing is not None:
            same = existing.target is fn or (isinstance(existing.target, str) and existing.target == _path_of(fn))
            if not same:
                raise InvalidBackend(
                    f"backend name {name!r} is already registered ({existing.origin}: "
                    f"{_describe(existing.target)}); pick another name for {_describe(fn)}"
                )
        if existing is not None:  # same backend again: resolve a lazy path, refresh tags
            existing.target = fn
            existing.tags = tags or existing.tags
        else:
            _state.entries[name] = _Entry(name, fn, tags, "register_backend")


def _describe(target: Callable[..., Any] | str) -> str:
    if isinstance(target, str):
        return target
    return _path_of(target) or repr(target)


@overload
def register_backend(
    compiler_fn: Callable[..., Any], name: str | None = None, tags: Iterable[str] = ()
) -> Callable[..., Any]: ...


@overload
def register_backend(
    compiler_fn: str | None = None, name: str | None = None, tags: Iterable[str] = ()
) -> Callable[[Callable[..., Any]], Callable[..., Any]]: ...


def register_backend(
    compiler_fn: Callable[..., Any] | str | None = None,
    name: str | None = None,
    tags: Iterable[str] = (),
) -> Callable[..., Any]:
    """Register a backend under `name` (default: the function's `__name__`) and return it.

    Works as `@register_backend`, `@register_backend(name="x", tags=("debug",))`,
    `@register_backend("x")` and as a plain call `register_backend(fn, name="x")`. Registering
    the same function twice is harmless (module reloads, repeated imports); a *different* function
    under a taken name raises `InvalidBackend`, because silently replacing someone's backend would
    change what `backend="x"` compiles with. `tags` let `list_backends` hide debug/experimental
    backends.
    """
    tag_tuple = _normalise_tags(tags)
    if isinstance(compiler_fn, str):  # @register_backend("name")
        if name is not None:
            raise InvalidBackend("register_backend got the name twice (positionally and name=)")
        compiler_fn, name = None, compiler_fn
    if compiler_fn is None:

        def decorator(fn: Callable[..., Any]) -> Callable[..., Any]:
            _register(fn, name, tag_tuple)
            return fn

        return decorator
    _register(compiler_fn, name, tag_tuple)
    return compiler_fn


def _discover_entry_points(refresh: bool = False) -> dict[str, importlib.metadata.EntryPoint]:
    """Find (not import) the entry points of both groups: once per process, or again when
    `refresh`. A name in both groups is ours (a package may advertise one backend to both)."""
    with _lock:
        if _state.entry_points is not None and not refresh:
            return _state.entry_points
        found: dict[str, importlib.metadata.EntryPoint] = {}
        for group in (TORCH_ENTRY_POINT_GROUP, ENTRY_POINT_GROUP):
            found.update(_read_group(group))
        _state.entry_points = found
        return found


def _read_group(group: str) -> dict[str, importlib.metadata.EntryPoint]:
    """The entry points of one group by name; a name two distributions define warns, the first
    is kept."""
    try:
        eps = importlib.metadata.entry_points(group=group)
        if isinstance(eps, (list, tuple)):  # `EntryPoints` is a tuple
            named = [(ep.name, ep) for ep in eps]
        else:  # an object offering EntryPoints' by-name API only (`names`, `eps[name]`)
            named = [(name, eps[name]) for name in sorted(eps.names)]
    except Exception as exc:  # a corrupt installed distribution must not break compile()
        warnings.warn(f"stenograph could not read the {group!r} entry points: {exc}", stacklevel=4)
        return {}
    found: dict[str, importlib.metadata.EntryPoint] = {}
    for name, ep in named:
        if name in found:
            warnings.warn(
                f"two installed packages define the backend {name!r} "
                f"({_ep_label(found[name])} and {_ep_label(ep)}); using the first",
                stacklevel=4,
            )
            continue
        found[name] = ep
    return found


def _ep_label(ep: importlib.metadata.EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    where = f" from distribution {dist.name}" if dist is not None else ""
    return f"entry point '{ep.name} = {ep.value}' (group {ep.group!r}{where})"


def _load_entry_point(name: str, ep: importlib.metadata.EntryPoint) -> _Entry:
    try:
        obj = ep.load()
    except Exception as exc:
        raise InvalidBackend(
            f"backend {name!r} could not be loaded from {_ep_label(ep)}: {type(exc).__name__}: {exc}"
        ) from exc
    if not callable(obj):
        raise InvalidBackend(
            f"backend {name!r} from {_ep_label(ep)} is a {type(obj).__name__}, "
            f"not a callable compiler_fn(gm, example_inputs)"
        )
    with _lock:
        # The module may have registered itself (with tags) while being imported.
        entry = _state.entries.get(name)
        if entry is None:
            entry = _Entry(name, obj, (), _ep_label(ep))
            _state.entries[name] = entry
        return entry


def set_default_backend(backend: str | CompilerFn | None) -> None:
    """The backend `compile()` uses when none is given (torch.compiler's); None restores
    "inductor". A name must be known now: a typo fails here, not at the first compile."""
    global _default_backend
    if backend is None:
        _default_backend = "inductor"
        return
    if not isinstance(backend, str) and not callable(backend):
        raise InvalidBackend(
            f"set_default_backend() takes a backend name (str), a callable or None, got {type(backend).__name__}"
        )
    lookup_backend(backend)
    _default_backend = backend


def get_default_backend() -> str | CompilerFn:
    """The backend `compile()` uses when none is given (initially "inductor")."""
    return _default_backend


def _all_names(refresh: bool = False) -> list[str]:
    with _lock:
        return sorted({*_state.entries, *_discover_entry_points(refresh)})


def lookup_backend(backend: str | CompilerFn) -> CompilerFn:
    """Turn a backend name or callable into the compiler function to call.

    A callable is returned unchanged (the contract is duck-typed). A name is resolved through the
    registry, then through entry points; anything else raises `InvalidBackend` with a message that
    says what was given and what would have been accepted.
    """
    if isinstance(backend, str):
        with _lock:
            entry = _state.entries.get(backend)
            if entry is None:
                ep = _discover_entry_points().get(backend)
                if ep is not None:
                    entry = _load_entry_point(backend, ep)
        if entry is None:
            known = _all_names()
            close = difflib.get_close_matches(backend, known, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise InvalidBackend(
                f"unknown backend {backend!r}.{hint} Known backends: {', '.join(known)}. "
                f"Register one with stenograph.register_backend or the "
                f"{ENTRY_POINT_GROUP!r} or {TORCH_ENTRY_POINT_GROUP!r} entry-point group."
            )
        return entry.load()
    if callable(backend):
        return backend
    raise InvalidBackend(
        "backend must be a registered backend name (str) or a callable "
        f"compiler_fn(gm, example_inputs); got {type(backend).__name__}: {backend!r:.80}"
    )


def list_backends(
    exclude_tags: Iterable[str] | str | None = ("debug", "experimental"),
) -> list[str]:
    """Sorted names of the available backends, without those carrying any of `exclude_tags`
    (by default torch's: "debug" hides `eager` and the other debugging backends).

    `exclude_tags=None` or `()` lists everything. Entry points are read again, so a package
    installed since the last listing shows up; they are listed without being imported, so their
    tags are only known (and honoured) once they have been loaded.
    """
    excluded = set(_normalise_tags(exclude_tags))
    with _lock:
        names = _all_names(refresh=True)
        tags = {name: entry.tags for name, entry in _state.entries.items()}
    return [name for name in names if not excluded.intersection(tags.get(name, ()))]


def resolve_backend(
    backend: str | CompilerFn,
    *,
    mode: str | None = None,
    options: dict[str, Any] | None = None,
    name: str | None = None,
) -> CompilerFn:
    """The compiler function for `compile(backend=..., mode=..., options=..., name=...)`.

    Like torch.compile: `mode` and `options` are exclusive; for Inductor they become config
    patches, validated now so a typo fails at decoration time rather than at the first call; the
    other built-in backends ignore them (with a log line), as torch's do; any other backend receives
    them as keyword arguments (`mode` only when it is not "default"). `name` goes to Inductor
    only (the name of the regions it compiles), as torch.compile hands it to no other backend.
    """
    if mode is not None and options is not None:
        raise InvalidBackend(BOTH_MODE_AND_OPTIONS)
    fn = lookup_backend(backend)
    if mode is None and options is None and name is None:
        return fn

    # imported here: like every built-in backend, Inductor's loads on first use (module docstring)
    from . import inductor

    if fn is inductor.inductor:
        return inductor.inductor_backend(mode=mode, options=options, name=name)
    kwargs: dict[str, Any] = {}
    if mode is not None and mode != "default":
        kwargs["mode"] = mode
    if options:
        kwargs["options"] = options
    if kwargs and _is_builtin(fn):
        # torch's eager, AOTAutograd and TorchScript backends take these and ignore them
        _log.warning("backend %r ignores %s", backend, ", ".join(f"{k}={v!r}" for k, v in kwargs.items()))
        return fn
    if not kwargs:
        return fn
    _check_accepts(fn, backend, kwargs)

    def with_options(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        return fn(gm, example_inputs, **kwargs)

    with_options.__name__ = getattr(fn, "__name__", "backend")
    with_options.__wrapped__ = fn  # type: ignore[attr-defined]
    return with_options


def _is_builtin(fn: Any) -> bool:
    """`fn` is one of the built-in backends other than Inductor (loaded by name already)."""
    with _lock:
        return any(entry.origin == "built-in" and entry.target is fn for entry in _state.entries.values())


def _check_accepts(fn: Any, backend: Any, kwargs: dict[str, Any]) -> None:
    """A backend given `mode=`/`options=` must take them, or compile() says so now (rather than
    the first call failing inside the backend and running eagerly)."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return  # no signature to check (a C callable): let the backend decide
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return
    names = {p.name for p in parameters}
    refused = [k for k in kwargs if k not in names]
    if refused:
        label = backend if isinstance(backend, str) else getattr(fn, "__name__", repr(fn))
        raise InvalidBackend(f"backend {label!r} takes no {' or '.join(f'{k}=' for k in refused)} argument")
