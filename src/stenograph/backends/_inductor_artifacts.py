"""The `inductor` backend's artifact: Inductor's compiled graphs and kernels, loaded without compiling.

What is stored:

* AOTAutograd's bundled cache entry (`_aot_bundle.py`), whose forward and backward are Inductor's
  `CompiledFxGraph`s: the generated Python wrapper's source, with the C++ or Triton kernel sources,
  compiled Triton kernels (Inductor bundles them), output strides, the CUDA-graph facts
  (`cudagraph_info`: static inputs, mutated inputs) and AOTAutograd's runtime metadata. This is
  the entry torch's precompile (`torch._inductor.standalone_compile(aot=True)`) stores, its
  Triton kernels cut to those the graphs run (`_triton_bundles.py`: `max-autotune` bundles every
  candidate it benchmarked);
* the C++ kernel libraries (`.so`) that the wrapper's module loaded, by their path under
  Inductor's cache directory. Loading the wrapper on CPU would otherwise compile every kernel again
  with g++ (tens of seconds on a small machine). Their names are hashes of the source and the
  compiler command line, so a library is used only where Inductor would build the same file.
  With them, the small libraries Inductor's vector-ISA check builds once per cache directory;
* the mode's config patches, the vector ISA the kernels were built for, and a digest of Inductor's
  and AOTAutograd's settings, which must match when loading.

Loading costs what Inductor's cache hits cost, less what it does once per process that a load
need not wait for. Inductor starts its pool of compiling processes when a wrapper module asks for
its first Triton kernel, although every kernel of an artifact is loaded, not compiled: a load runs
with one compile thread. And two hashes of sources, each computed once per process: Triton's
(`triton_key`, the key of its kernel and autotuning caches, 0.37-0.46 s on an H200 host) and
torch's (`torch_key`, which keys Inductor's in-process cache of Triton kernels, 0.15-0.22 s):
`hash_sources_in_background` starts both in a thread when `compile()` is called with the cache on,
before the loaders' other imports, and a load waits for it. Computed once per machine: later
processes find them remembered (`_source_digests.py`) in tens of milliseconds.

Loading writes the libraries back into this process's Inductor cache directory (when missing) and
registers them with Inductor's in-process kernel cache, which also spares it checking its
precompiled header (a preprocessor run, or a build of it on a fresh machine). It then rebuilds
the callable with `deserialize_bundled_cache_entry` under the mode's config patches, so that
`reduce-overhead` wraps the graphs in CUDA graphs again, with the static inputs recorded at
compile time. Nothing is traced, lowered or compiled. Kernels tuned by the `max-autotune` modes
keep the configurations the first process chose (on torch 2.11 with `_autotune_reload.py`'s help);
a kernel compiled after loading is built with the `ptxas` the first process used (`_ptxas.py`).

Not stored: graphs whose output is not a flat tuple, graphs with `_PyTreeCodeGen` or nested
inputs (Inductor wraps those outside what AOTAutograd stores); compiles with AOTAutograd's cache
off (`_aot_bundle.py`). They compile as usual.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib
import importlib.util
import os
import pickle
import tempfile
import threading
import types
from collections.abc import Callable
from typing import Any

import torch
import torch.fx
from torch._inductor import config as inductor_config
from torch._inductor.codecache import CppPythonBindingsCodeCache, PyCodeCache
from torch._inductor.cpu_vec_isa import pick_vec_isa
from torch._inductor.runtime.cache_dir_utils import cache_dir
from torch.fx.graph import _PyTreeCodeGen

from . import _aot_bundle, _autotune_reload, _source_digests, _triton_bundles
from ._ptxas import use_inductors_ptxas
from .artifacts import ArtifactError, NotPersistable, declined
from .cuda_graph_runner import CudaGraphRunner

__all__ = ["compile_storable", "hash_sources_in_background", "load"]

_source_hashing: list[threading.Thread] = []  # the one thread hashing Triton's and torch's sources, once started


def _storable_shape(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> None:
    if not isinstance(gm.graph.output_node().args[0], (tuple, list)):
        raise NotPersistable("the graph's output is not a flat tuple")
    if isinstance(gm.graph._codegen, _PyTreeCodeGen):
        raise NotPersistable("the graph has a pytree calling convention")
    if any(isinstance(x, (list, tuple, dict)) for x in example_inputs):
        raise NotPersistable("the graph has nested inputs")


def _wrapper_module(cache_key: str) -> types.ModuleType | None:
    """The loaded module of the wrapper Inductor generated for a `CompiledFxGraph`."""
    for module in reversed([*PyCodeCache.modules, *PyCodeCache.modules_no_attr.values()]):
        if getattr(module, "key", None) == cache_key:
            return module
    return None


def _kernel_libraries(entry: Any) -> dict[str, tuple[str | None, bytes]]:
    """{path under the cache directory: (kernel cache key, library bytes)} for the C++ kernels
    that the entry's wrapper modules call."""
    root = cache_dir()
    found: dict[str, tuple[str | None, bytes]] = {}
    parts = [entry.compiled_fw, entry.compiled_bw]
    for part in parts:
        cache_key = getattr(getattr(part, "result", None), "cache_key", None)
        module = _wrapper_module(cache_key) if cache_key else None
        if module is None:
            continue
        for value in vars(module).values():
            owner = getattr(value, "__self__", None)
            path = getattr(owner, "__file__", None)
            if not isinstance(owner, types.ModuleType) or not path or not path.startswith(root + os.sep):
                continue
            relative = os.path.relpath(path, root)
            if relative not in found:
                with open(path, "rb") as file:
                    found[relative] = (owner.__name__.rsplit(".", 1)[0], file.read())
    return found


@functools.cache
def _vec_isa_check_libraries(root: str) -> dict[str, tuple[None, bytes]]:
    """The libraries Inductor's vector-ISA checks built in the cache directory `root`.

    Inductor checks each ISA and feature the CPU has (AVX2, AVX-512, VNNI, AMX, ...) by
    compiling a small program, once per cache directory, before any CPU kernel loads: seconds
    per check. The checks' names and flags vary with the CPU, so their libraries are found by
    what they are: `<key>.so` beside a small `<key>.cpp` defining a `..._chk_kernel`.
    """
    found: dict[str, tuple[None, bytes]] = {}
    for folder in os.scandir(root):
        if not folder.is_dir() or len(folder.name) != 2:
            continue
        for item in os.scandir(folder.path):
            name = item.name
            if not name.endswith(".so") or name.count(".") != 1:
                continue
            source = item.path[: -len(".so")] + ".cpp"
            try:
                if os.path.getsize(source) > 4096:
                    continue
                with open(source, "rb") as file:
                    if b"_chk_kernel" not in file.read():
                        continue
                with open(item.path, "rb") as file:
                    found[os.path.relpath(item.path, root)] = (None, file.read())
            except OSError:
                continue
    return found


def _settings_digest(patches: dict[str, Any]) -> str:
    with inductor_config.patch(patches):
        settings = sorted(inductor_config.save_config_portable().items())
    return hashlib.sha256(repr(settings).encode()).hexdigest()[:20] + _aot_bundle.config_digest()


def _vec_isa() -> str:
    return str(pick_vec_isa())


def compile_storable(
    gm: torch.fx.GraphModule,
    example_inputs: list[Any],
    compile_graph: Callable[[torch.fx.GraphModule, list[Any]], Callable[..., Any]],
    patches: dict[str, Any],
    identity: str,
    replayed: bool,
) -> tuple[Callable[..., Any], bytes | None]:
    """Compile with `compile_graph` (the inductor backend) so that AOTAutograd keeps a storable
    entry; return the compiled callable and the payload, or None (the reason logged). `replayed`:
    the loaded callable is to run through stenograph's CUDA graphs (cuda_graph_runner.py)."""
    with contextlib.ExitStack() as settings:
        try:
            _storable_shape(gm, example_inputs)
            settings.enter_context(_aot_bundle.bundling())
        except NotPersistable as reason:
            declined(identity, reason)
            return compile_graph(gm, example_inputs), None
        compiled = compile_graph(gm, example_inputs)
    try:
        entry = _aot_bundle.bundled_entry(compiled)
        libraries = _kernel_libraries(entry)
        if libraries:
            libraries.update(_vec_isa_check_libraries(cache_dir()))
        with _triton_bundles.pruned(entry):
            stored_entry = _aot_bundle.dumps_entry(entry)
        payload = {
            "entry": stored_entry,
            "libraries": libraries,
            "patches": patches,
            "vec_isa": _vec_isa() if libraries else None,
            "settings": _settings_digest(patches),
            "replayed": replayed,
        }
    except NotPersistable as reason:
        declined(identity, reason)
        return compiled, None
    return compiled, pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)


def _install_libraries(libraries: dict[str, tuple[str | None, bytes]]) -> None:
    root = cache_dir()
    for relative, (key, content) in libraries.items():
        path = os.path.join(root, relative)
        if not os.path.exists(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=os.path.dirname(path))
            with os.fdopen(handle, "wb") as file:
                file.write(content)
            os.replace(temporary, path)
        if key is not None and key not in CppPythonBindingsCodeCache.cache:
            CppPythonBindingsCodeCache.cache[key] = _library_loader(path, key)


def _library_loader(path: str, key: str) -> Callable[[], Any]:
    """What Inductor's kernel cache keeps per kernel: a function returning the loaded library."""
    loaded: list[Any] = []

    def load() -> Any:
        if not loaded:
            loaded.append(CppPythonBindingsCodeCache._load_library(path, key))
        return loaded[0]

    return load


def hash_sources_in_background() -> None:
    """Start finding Triton's and torch's source hashes in a thread, once per process, where a
    GPU and Triton are present: Inductor's cache hits need both (`triton_key`, the key of Triton's
    kernel and autotuning caches; `torch_key`, part of the key of its in-process Triton kernel
    cache), each computed once per process and cached by its function, or remembered from an
    earlier process (`_source_digests`). Called before the loaders' other imports, so that the
    work overlaps them."""
    if _source_hashing or not torch.cuda.is_available():
        return
    if importlib.util.find_spec("triton") is None:  # optional: installed with CUDA builds of torch
        return
    # `triton_key` walks these packages, importing their subpackages: imported here first, they
    # are not imported by two threads at once (the loaders' imports, next, import them too)
    for package in ("triton.compiler", "triton.language"):
        importlib.import_module(package)

    def hash_sources() -> None:
        try:
            # optional (CUDA builds of torch install it) and seconds to import: in the thread
            import triton
            from triton.runtime import cache as triton_cache

            _source_digests.remember_or_compute(triton, triton_cache)
        except Exception:  # Inductor calls them again where it needs them, and reports the error there
            return

    thread = threading.Thread(target=hash_sources, name="stenograph-source-hashes", daemon=True)
    _source_hashing.append(thread)
    thread.start()


def load(payload: bytes) -> Callable[..., Any]:
    """The callable an `inductor` artifact holds (see the module docstring)."""
    data = pickle.loads(payload)
    patches = data["patches"]
    if data["settings"] != _settings_digest(patches):
        raise ArtifactError("Inductor's or AOTAutograd's settings differ from the artifact's")
    _install_libraries(data["libraries"])
    if data["vec_isa"] is not None and data["vec_isa"] != _vec_isa():
        raise ArtifactError(f"kernels built for vector ISA {data['vec_isa']}, this machine has {_vec_isa()}")
    for thread in _source_hashing:
        thread.join()
    _autotune_reload.keep_tuned_configs()
    use_inductors_ptxas()  # kernels compiled from here on are keyed as the first process's were
    with inductor_config.patch({**patches, "compile_threads": 1}):
        compiled = _aot_bundle.rebuild(pickle.loads(data["entry"]))
    if data["replayed"]:  # which inputs the graph writes is not stored: every copied one goes back
        return CudaGraphRunner(compiled, copy_back=None, fallback_warning=None)
    return compiled
