"""What a persisted entry's key covers (issue 28): whatever changes the result without showing in
an entry's guards gives another key, so an entry made under other versions, another backend or
mode, or other tracing settings is never looked at."""

from __future__ import annotations

import dataclasses
import importlib
import sys

import pytest
import torch

import stenograph
from stenograph.backends.artifacts import backend_identity
from stenograph.backends.registry import resolve_backend
from stenograph.bytecode.fingerprint import code_fingerprint
from stenograph.warm import fingerprints
from stenograph.warm.fingerprints import entry_key


def f(x):
    return x.sin() * 2


def _key(backend: str = "eager", dynamic: bool | None = None) -> str:
    return entry_key(f.__code__, backend_identity(backend), dynamic)


def test_the_torch_version_is_in_the_key(monkeypatch):
    before = _key()
    monkeypatch.setattr(torch, "__version__", torch.__version__ + ".other")
    assert _key() != before
    monkeypatch.undo()
    assert _key() == before


def test_the_python_version_and_stenograph_sources_are_in_the_key(monkeypatch):
    before = _key()
    monkeypatch.setattr(sys, "version", sys.version + " other")
    assert _key() != before
    monkeypatch.undo()
    monkeypatch.setattr(fingerprints, "_PACKAGE_DIGEST", ["another tree"])
    assert _key() != before


def test_backends_and_modes_have_keys_of_their_own():
    identities = [
        backend_identity("eager"),
        backend_identity("aot_eager"),
        backend_identity("inductor"),
        *(backend_identity(resolve_backend("inductor", mode=m)) for m in ("reduce-overhead", "max-autotune")),
        backend_identity(resolve_backend("inductor", options={"epilogue_fusion": False})),
    ]
    keys = {entry_key(f.__code__, identity, None) for identity in identities}
    assert len(keys) == len(identities)
    assert backend_identity(resolve_backend("inductor", mode="default")) == backend_identity("inductor")


def test_tracing_settings_and_dynamic_are_in_the_key():
    before = _key()
    with stenograph.config.patch(specialize_float=not stenograph.config.specialize_float):
        assert _key() != before
    assert _key(dynamic=True) != before and _key(dynamic=False) != before
    assert _key() == before


def test_a_code_change_changes_the_fingerprint():
    def g(x):
        return x.sin() * 2

    def h(x):
        return x.sin() * 3

    assert code_fingerprint(g.__code__) != code_fingerprint(h.__code__)
    assert code_fingerprint(g.__code__) != code_fingerprint(f.__code__)  # another name and line


def test_compile_imports_what_loading_needs_only_with_a_cache(monkeypatch, tmp_path):
    """With a cache folder, compile() imports the modules the backend's loader needs, so the
    first call does not; without one it imports nothing."""
    from stenograph.backends import artifacts

    for backend in ("aot_eager", "eager"):  # their modules found before import_module is replaced
        stenograph.compile(f, backend=backend)
    imported: list[str] = []
    monkeypatch.setattr(artifacts.importlib, "import_module", imported.append)
    stenograph.compile(f, backend="aot_eager")
    assert imported == []
    with stenograph.config.patch(cache_dir=str(tmp_path)):
        stenograph.compile(f, backend="aot_eager")
        stenograph.compile(f, backend="eager")
    assert imported == ["stenograph.backends._aot_bundle"]


def test_module_objects_of_their_own_class_are_referenced_by_name():
    """`torch._VF` is an instance of a module subclass registered in `sys.modules`: an entry
    holding it (T5's did) is stored by the module's name and finds the same object on loading;
    a module object no one can import again is refused, not pickled."""
    from stenograph.warm import references

    held = {"modules": [torch._VF, torch.nn.functional]}
    data = references.dumps(held, backend=None, graphs={})
    loaded = references.loads(data, references.Context(None, {}, []))
    assert loaded["modules"][0] is torch._VF and loaded["modules"][1] is torch.nn.functional
    stray = type(torch._VF)("not_in_sys_modules")
    with pytest.raises(references.NotPersistable):
        references.dumps([stray], backend=None, graphs={})


class _ShadowModule:
    """A stand-in registered in `sys.modules` as Cython's `cython.dataclasses` is: attributes
    come from `__getattr__`, which reads the object's own name (on a half-made object, forever)."""

    def __init__(self, name):
        self.__name__ = name

    def __getattr__(self, attr):
        return getattr(importlib.import_module(self.__name__), attr)


def test_stand_ins_registered_as_modules_are_referenced_by_name(monkeypatch):
    """The GPU machine's T5 entries held Cython's shadow of `cython.dataclasses`; pickled by
    value, reading it back recursed in its `__getattr__` until RecursionError, and every warm
    process rejected the entry and traced again. It is stored by its `sys.modules` name."""
    from stenograph.warm import references

    shadow = _ShadowModule("dataclasses")
    monkeypatch.setitem(sys.modules, "stenograph_test_shadow.dataclasses", shadow)
    monkeypatch.setitem(sys.modules, "stenograph_test_blocked", None)  # an import blocked on purpose
    data = references.dumps({"held": [shadow], "none": None}, backend=None, graphs={})
    loaded = references.loads(data, references.Context(None, {}, []))
    assert loaded["held"][0] is shadow and loaded["held"][0].field is dataclasses.field
    assert loaded["none"] is None
    monkeypatch.delitem(sys.modules, "stenograph_test_shadow.dataclasses")
    with pytest.raises(references.Unresolved, match="cannot be imported"):
        references.loads(data, references.Context(None, {}, []))


def test_sys_modules_is_referenced_not_pickled():
    """A guard reading `sys.modules['torch']` holds `sys.modules`: pickled, the entry named every
    module of the process (3,365 for T5), and a warm process missing any (a kernel module
    Inductor made at run time) rejected it. It is stored as `sys.modules` itself."""
    from stenograph.warm import references

    data = references.dumps({"table": sys.modules, "path": sys.path}, backend=None, graphs={})
    assert len(data) < 200
    loaded = references.loads(data, references.Context(None, {}, []))
    assert loaded["table"] is sys.modules and loaded["path"] is sys.path


def test_the_native_guard_checks_are_found_by_their_module_name():
    """Guards calling the native checks hold their module, which is loaded from its build cache,
    not importable by name (T5's warm entries were all rejected for it): a warm process loads it
    as a compile would, and refuses a name from another build."""
    from stenograph.guards import native
    from stenograph.warm import references

    loaded = native.checks_module()
    if loaded is not None:
        assert references._module(loaded.__name__) is loaded
    with pytest.raises(references.Unresolved, match="not available"):
        references._module(native.MODULE_PREFIX + "0000000000000000")
