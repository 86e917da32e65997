"""The native guard checks (`native_checks.cpp`): built on first need, then imported from a cache.

Guard functions are generated Python; the checks that cost most there (a tensor's metadata, a
module's hook tables and flags) become calls of small C++ objects when this extension is
available (`lowering.py`). It is compiled with `torch.utils.cpp_extension` the first time a guard
function is built with `config.native_guards` not False, into a cache directory keyed by the
source's hash and the Python and torch versions, so a process tree builds it once and later
processes only import it. Whether it is used is decided when a guard function is built, never
when one runs.

The cache is `$STENOGRAPH_NATIVE_CACHE`, else `$XDG_CACHE_HOME/stenograph/native` (default
`~/.cache/stenograph/native`). Processes building at the same time take turns on a file lock;
the library is copied into place by an atomic rename, so a reader never sees half of it.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.machinery
import importlib.util
import logging
import os
import shutil
import sys
import sysconfig
import tempfile
import threading
import time
import types
import warnings
from collections.abc import Iterator
from pathlib import Path

import torch

from .. import config
from ..errors import NativeGuardsUnavailable

try:
    import fcntl
except ImportError:  # Windows: builds do not wait for each other (the rename still keeps them apart)
    fcntl = None  # type: ignore[assignment]

CACHE_ENV = "STENOGRAPH_NATIVE_CACHE"
MODULE_PREFIX = "stenograph_native_"  # the extension's module name: this, then its build key
SOURCE = Path(__file__).with_name("native_checks.cpp")

_log = logging.getLogger("stenograph.guards")


class Unavailable(Exception):
    """Why the extension cannot be had here; `environment`: the machine lacks what a build needs
    (a compiler, ninja, Python's headers), as opposed to a build that failed."""

    def __init__(self, reason: str, *, environment: bool) -> None:
        super().__init__(reason)
        self.environment = environment


class _Loaded:
    """The outcome of the first load, kept for the process: a failed build is not retried, and
    `reset()` keeps it (not registered with process_state: a loaded library stays loaded)."""

    lock = threading.Lock()
    module: types.ModuleType | None = None
    failure: Unavailable | None = None


def checks_module() -> types.ModuleType | None:
    """The extension when guards being built now should call it, per `config.native_guards`:
    None when that is False, or when it is "auto" (or None) and the extension cannot be had.
    Raises `NativeGuardsUnavailable` when it is True and the extension cannot be had."""
    setting = config.native_guards
    if setting is False:
        return None
    try:
        return load()
    except Unavailable as e:
        if setting is True:
            raise NativeGuardsUnavailable(
                f"config.native_guards is True but the native guard checks are unavailable: {e}"
            ) from e
        return None


def load() -> types.ModuleType:
    """The extension, built or imported on first call; raises `Unavailable` (every call) if not."""
    with _Loaded.lock:
        if _Loaded.module is None and _Loaded.failure is None:
            try:
                _Loaded.module = _load()
            except Unavailable as e:
                _Loaded.failure = e
                _log.info("native guard checks unavailable, guards run as Python: %s", e)
        if _Loaded.failure is not None:
            raise _Loaded.failure
        return _Loaded.module  # type: ignore[return-value]


def cache_root() -> Path:
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "stenograph" / "native"


def build_key() -> str:
    """What the built library depends on: the source, the interpreter and torch."""
    digest = hashlib.sha256()
    digest.update(SOURCE.read_bytes())
    digest.update(sys.version.encode())
    digest.update(torch.__version__.encode())
    digest.update(str(sysconfig.get_config_var("EXT_SUFFIX")).encode())
    return digest.hexdigest()[:16]


def _load() -> types.ModuleType:
    key = build_key()
    name = f"{MODULE_PREFIX}{key}"
    version = f"py{sys.version_info[0]}{sys.version_info[1]}-torch{torch.__version__}"
    directory = cache_root() / f"{version}-{key}"
    library = directory / (name + importlib.machinery.EXTENSION_SUFFIXES[0])
    if not library.exists():
        ninja_dir = _check_environment()
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise Unavailable(f"cannot create the cache directory {directory}: {e}", environment=True) from e
        with _exclusive(directory / "lock"):
            if not library.exists():  # another process may have built it while this one waited
                with _on_path(ninja_dir):
                    return _build(name, directory, library)
    return _import(name, library)


def _check_environment() -> str | None:
    """A build needs Python's headers, a C++ compiler and ninja: say which is missing, rather
    than fail a compile (Debian's Pythons ship without headers unless python3-dev is installed).
    Returns the folder of the `ninja` package's binary when ninja is not on PATH but installed
    with pip (its script folder is not always on PATH), else None."""
    include = sysconfig.get_paths()["include"]
    if not os.path.exists(os.path.join(include, "Python.h")):
        raise Unavailable(f"no Python.h in {include} (install the Python development headers)", environment=True)
    compiler = os.environ.get("CXX", "c++")
    if shutil.which(compiler) is None:
        raise Unavailable(f"no C++ compiler ({compiler!r} is not on PATH; set CXX)", environment=True)
    # a slow import (setuptools), needed only to build; a CUDA build of torch on a machine with
    # CUDA_HOME but no CUDA runtime warns about it on import: not the user's concern, as the
    # guard module is plain C++, and a compiled call must print what the eager call prints
    quiet = logging.getLogger("torch.utils.cpp_extension")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        import torch.utils.cpp_extension  # noqa: F401
    except ImportError as e:
        raise Unavailable(f"torch.utils.cpp_extension cannot be imported: {e}", environment=True) from e
    finally:
        quiet.setLevel(level)
    if shutil.which("ninja") is not None:
        return None
    try:
        import ninja  # the PyPI package (the `test` extra installs it)
    except ImportError:
        raise Unavailable("ninja is not on PATH (pip install ninja)", environment=True) from None
    return ninja.BIN_DIR


@contextlib.contextmanager
def _on_path(folder: str | None) -> Iterator[None]:
    """`folder` first on PATH while building (torch runs `ninja` by name)."""
    if folder is None:
        yield
        return
    previous = os.environ.get("PATH", "")
    os.environ["PATH"] = folder + os.pathsep + previous
    try:
        yield
    finally:
        os.environ["PATH"] = previous


@contextlib.contextmanager
def _exclusive(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `path` (released when the process dies, unlike a lock file)."""
    if fcntl is None:
        yield
        return
    with open(path, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX)
        except OSError:  # a file system without locks: builds may overlap, the rename keeps them apart
            yield
            return
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _build(name: str, directory: Path, library: Path) -> types.ModuleType:
    """Compile into a fresh folder, then move the library into place atomically (the module
    this process uses is the one the build imported)."""
    # a slow import (setuptools), needed only here
    from torch.utils.cpp_extension import load as cpp_load

    start = time.perf_counter()
    work = None
    try:
        work = Path(tempfile.mkdtemp(prefix="build-", dir=directory))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            module = cpp_load(name, [str(SOURCE)], build_directory=str(work), extra_cflags=["-O2"], verbose=False)
        for warning in caught:
            _log.debug("building native guard checks: %s", warning.message)
        if module.__name__ == name:  # not renamed by torch (a second build in one process is)
            staged = library.with_name(f"{library.name}.{os.getpid()}.tmp")
            shutil.copyfile(module.__file__, staged)
            os.replace(staged, library)
    except Exception as e:
        reason = f"building {SOURCE.name} in {directory} failed: {_first_lines(str(e))}"
        raise Unavailable(reason, environment=False) from e
    finally:
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)
    _log.info("built native guard checks in %.1f s into %s", time.perf_counter() - start, directory)
    return module


def _import(name: str, library: Path) -> types.ModuleType:
    try:
        spec = importlib.util.spec_from_file_location(name, library)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except Exception as e:
        raise Unavailable(f"importing {library} failed: {_first_lines(str(e))}", environment=False) from e
    return module


def _first_lines(text: str, count: int = 12) -> str:
    lines = text.strip().splitlines()
    return "\n".join(lines[:count] + (["..."] if len(lines) > count else []))
