"""Registry behaviour: registration forms, errors, tags, laziness and entry-point backends."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from stenograph.backends import (
    ENTRY_POINT_GROUP,
    TORCH_ENTRY_POINT_GROUP,
    list_backends,
    lookup_backend,
    register_backend,
    resolve_backend,
)
from stenograph.errors import InvalidBackend, StenographError

# torch.compile's names, tagged as torch 2.13 tags them
DEBUG_BUILTINS = {
    "eager",
    "eager_noexcept",
    "aot_eager",
    "aot_eager_default_partitioner",
    "aot_eager_decomp_partition",
    "ts",
    "aot_ts",
}
BUILTINS = {"inductor", "cudagraphs", "eager_debug", "pre_dispatch_eager"} | DEBUG_BUILTINS


def _backend(gm, example_inputs):
    return gm.forward


# ---------------------------------------------------------------- registration forms


def test_bare_decorator_uses_function_name() -> None:
    @register_backend
    def my_backend(gm, example_inputs):
        return gm.forward

    assert lookup_backend("my_backend") is my_backend


def test_decorator_with_name_and_tags() -> None:
    @register_backend(name="dbg", tags=("debug",))
    def whatever(gm, example_inputs):
        return gm.forward

    assert lookup_backend("dbg") is whatever
    assert "dbg" not in list_backends()
    assert "dbg" in list_backends(exclude_tags=None)


def test_decorator_with_positional_name() -> None:
    @register_backend("positional")
    def fn(gm, example_inputs):
        return gm.forward

    assert lookup_backend("positional") is fn


def test_plain_call_returns_the_function() -> None:
    assert register_backend(_backend, name="plain") is _backend
    assert lookup_backend("plain") is _backend


def test_same_function_twice_is_harmless() -> None:
    register_backend(_backend, name="twice")
    register_backend(_backend, name="twice")
    assert lookup_backend("twice") is _backend


def test_duplicate_name_with_other_function_raises() -> None:
    register_backend(_backend, name="taken")

    def other(gm, example_inputs):
        return gm.forward

    with pytest.raises(InvalidBackend, match="'taken'") as info:
        register_backend(other, name="taken")
    assert isinstance(info.value, ValueError) and isinstance(info.value, StenographError)
    assert lookup_backend("taken") is _backend


def test_builtin_name_cannot_be_taken_over() -> None:
    with pytest.raises(InvalidBackend, match="'eager' is already registered"):
        register_backend(_backend, name="eager")


def test_reregistering_the_builtin_itself_is_allowed() -> None:
    from stenograph.backends.eager import eager

    register_backend(eager, name="eager")
    assert lookup_backend("eager") is eager


def test_lambda_needs_a_name() -> None:
    with pytest.raises(InvalidBackend, match="name="):
        register_backend(lambda gm, inputs: gm.forward)
    fn = register_backend(lambda gm, inputs: gm.forward, name="lam")
    assert lookup_backend("lam") is fn


def test_registering_a_non_callable_raises() -> None:
    with pytest.raises(InvalidBackend, match="callable"):
        register_backend(42, name="num")  # type: ignore[arg-type]


# ---------------------------------------------------------------- lookup


def test_lookup_of_a_callable_returns_it() -> None:
    assert lookup_backend(_backend) is _backend


def test_unknown_name_lists_known_names() -> None:
    register_backend(_backend, name="mine", tags=("debug",))
    with pytest.raises(InvalidBackend) as info:
        lookup_backend("inductr")
    message = str(info.value)
    assert "'inductr'" in message
    assert "Did you mean 'inductor'?" in message
    for name in [*BUILTINS, "mine"]:
        assert name in message


def test_non_callable_non_str_says_what_it_got() -> None:
    with pytest.raises(InvalidBackend, match="got int: 3"):
        lookup_backend(3)  # type: ignore[arg-type]
    with pytest.raises(InvalidBackend, match="got NoneType"):
        lookup_backend(None)  # type: ignore[arg-type]


def test_builtins_resolve_to_their_functions() -> None:
    from stenograph.backends.aot_eager import aot_eager
    from stenograph.backends.eager import eager
    from stenograph.backends.inductor import inductor

    assert lookup_backend("eager") is eager
    assert lookup_backend("aot_eager") is aot_eager
    assert lookup_backend("inductor") is inductor
    for name in BUILTINS:
        assert callable(lookup_backend(name)), name


# ---------------------------------------------------------------- listing and tags


def test_list_backends_is_sorted_and_honours_tags() -> None:
    register_backend(_backend, name="zz_plain")
    register_backend(lambda gm, i: gm.forward, name="aa_debug", tags="debug")
    register_backend(lambda gm, i: gm.forward, name="mm_custom", tags=("custom",))
    default = list_backends()
    assert default == sorted(default)
    assert {"cudagraphs", "inductor", "zz_plain", "mm_custom"} <= set(default)
    assert not DEBUG_BUILTINS & set(default)
    assert "aa_debug" not in default
    everything = list_backends(exclude_tags=None)
    assert everything == list_backends(exclude_tags=()) == sorted(everything)
    assert BUILTINS | {"aa_debug", "zz_plain", "mm_custom"} <= set(everything)
    assert "mm_custom" not in list_backends(exclude_tags=("custom",))
    assert "aa_debug" in list_backends(exclude_tags=("custom",))


def test_list_backends_follows_torchs_tag_conventions() -> None:
    """As torch._dynamo.list_backends: debugging backends such as `eager` are tagged "debug",
    hidden by default and by exclude_tags=["debug"], listed with exclude_tags=[] or None."""
    assert "inductor" in list_backends() and "inductor" in list_backends(exclude_tags=None)
    assert "eager" not in list_backends()
    assert "eager" not in list_backends(exclude_tags=["debug"])
    assert "eager" in list_backends(exclude_tags=[])


def test_importing_stenograph_imports_no_compiler() -> None:
    """Built-ins are registered by path: importing, listing and looking up `eager` stay cheap."""
    code = textwrap.dedent(
        """
        import sys
        import stenograph, stenograph.backends
        from stenograph.backends import list_backends, lookup_backend
        list_backends(None)
        lookup_backend("eager")
        heavy = sorted(m for m in sys.modules
                       if m.startswith(("torch._inductor", "torch._dynamo",
                                        "torch._functorch.aot_autograd")))
        print(heavy)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_builtin_backend_modules_load_on_first_lookup() -> None:
    """As the registry's docstring says: `import stenograph` imports no built-in backend module
    (Inductor's included) and adds no torch._inductor module to what `import torch` loaded;
    looking `inductor` up loads its module."""
    code = textwrap.dedent(
        """
        import sys
        import torch
        before = set(sys.modules)
        import stenograph
        builtins = [f"stenograph.backends.{name}" for name in ("eager", "aot_eager", "inductor", "cudagraphs")]
        added = set(sys.modules) - before
        print(sorted(m for m in added if m.startswith("torch._inductor") or m in builtins))
        stenograph.backends.lookup_backend("inductor")
        print("stenograph.backends.inductor" in sys.modules)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.split() == ["[]", "True"], out.stdout + out.stderr


# ---------------------------------------------------------------- entry points


def _write_module(directory: Path, name: str, body: str) -> None:
    (directory / f"{name}.py").write_text(textwrap.dedent(body))


@pytest.fixture
def fake_entry_points(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """Install a fake `importlib.metadata.entry_points`; returns (set_eps, call_log)."""
    monkeypatch.syspath_prepend(str(tmp_path))
    eps: list[importlib.metadata.EntryPoint] = []
    calls: list[str] = []

    def entry_points(*, group: str):
        calls.append(group)
        return [ep for ep in eps if ep.group == group]

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)

    def set_eps(group: str = ENTRY_POINT_GROUP, **mapping: str) -> None:
        eps[:] = [ep for ep in eps if ep.group != group]
        eps.extend(importlib.metadata.EntryPoint(name, value, group) for name, value in mapping.items())

    return set_eps, calls


BOTH_GROUPS = [TORCH_ENTRY_POINT_GROUP, ENTRY_POINT_GROUP]


def test_entry_point_backend_is_listed_then_loaded_lazily(tmp_path: Path, fake_entry_points):
    set_eps, calls = fake_entry_points
    _write_module(
        tmp_path,
        "steno_ext_lazy",
        """
        def compile_it(gm, example_inputs):
            return gm.forward
        """,
    )
    set_eps(ext="steno_ext_lazy:compile_it", other="steno_ext_lazy:compile_it")
    sys.modules.pop("steno_ext_lazy", None)

    assert "ext" in list_backends()
    assert "steno_ext_lazy" not in sys.modules  # listed, not imported
    fn = lookup_backend("ext")
    import steno_ext_lazy

    assert fn is steno_ext_lazy.compile_it
    assert lookup_backend("ext") is fn
    lookup_backend("other")
    assert calls == BOTH_GROUPS  # read once, by the listing


def test_entry_point_discovered_on_first_lookup_miss(tmp_path: Path, fake_entry_points):
    set_eps, calls = fake_entry_points
    _write_module(tmp_path, "steno_ext_miss", "def be(gm, inputs):\n    return gm.forward\n")
    set_eps(miss="steno_ext_miss:be")
    lookup_backend("eager")
    assert calls == []  # a hit does not look at entry points
    assert callable(lookup_backend("miss"))
    assert calls == BOTH_GROUPS
    lookup_backend("miss")
    assert calls == BOTH_GROUPS


def test_torch_group_is_read_and_ours_wins_a_shared_name(tmp_path: Path, fake_entry_points):
    """A package written for torch.compile (group `torch_dynamo_backends`) is found by name; a
    name both groups define is ours, without a warning (one package may advertise to both)."""
    set_eps, _ = fake_entry_points
    _write_module(
        tmp_path, "steno_ext_torch", "def a(gm, i):\n    return gm.forward\ndef b(gm, i):\n    return gm.forward\n"
    )
    set_eps(TORCH_ENTRY_POINT_GROUP, for_torch="steno_ext_torch:a", both="steno_ext_torch:a")
    set_eps(both="steno_ext_torch:b")
    assert {"for_torch", "both"} <= set(list_backends())
    assert lookup_backend("for_torch").__name__ == "a"
    assert lookup_backend("both").__name__ == "b"


def test_a_listing_reads_entry_points_again(tmp_path: Path, fake_entry_points):
    """A package installed after the first listing shows up in the next one."""
    set_eps, calls = fake_entry_points
    _write_module(tmp_path, "steno_ext_late", "def late(gm, i):\n    return gm.forward\n")
    assert "late" not in list_backends()
    set_eps(late="steno_ext_late:late")
    assert "late" in list_backends()
    assert callable(lookup_backend("late"))
    assert calls == BOTH_GROUPS * 2


def test_entry_points_read_by_name_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """An `entry_points()` result offering only EntryPoints' by-name API (`names`, `[name]`), as
    torch's registry reads it, is read that way."""

    class ByName:
        names = {"by_name"}

        def __getitem__(self, name: str) -> importlib.metadata.EntryPoint:
            return importlib.metadata.EntryPoint(name, "steno_unimported:be", ENTRY_POINT_GROUP)

    monkeypatch.setattr(importlib.metadata, "entry_points", lambda *, group: ByName())
    assert "by_name" in list_backends()


def test_registered_names_win_over_entry_points(tmp_path: Path, fake_entry_points):
    set_eps, _ = fake_entry_points
    _write_module(tmp_path, "steno_ext_shadow", "def be(gm, inputs):\n    return gm.forward\n")
    set_eps(eager="steno_ext_shadow:be")
    from stenograph.backends.eager import eager

    assert lookup_backend("eager") is eager
    assert list_backends(None).count("eager") == 1


def test_entry_point_that_registers_itself_keeps_its_tags(tmp_path: Path, fake_entry_points):
    set_eps, _ = fake_entry_points
    _write_module(
        tmp_path,
        "steno_ext_tagged",
        """
        from stenograph.backends import register_backend

        @register_backend(name="tagged", tags=("debug",))
        def tagged(gm, example_inputs):
            return gm.forward
        """,
    )
    set_eps(tagged="steno_ext_tagged:tagged")
    sys.modules.pop("steno_ext_tagged", None)
    assert "tagged" in list_backends()  # tags unknown until loaded
    fn = lookup_backend("tagged")
    assert fn.__module__ == "steno_ext_tagged"
    assert "tagged" not in list_backends()
    assert "tagged" in list_backends(None)


def test_broken_entry_point_names_itself(fake_entry_points):
    set_eps, _ = fake_entry_points
    set_eps(broken="steno_no_such_module_xyz:backend")
    with pytest.raises(InvalidBackend) as info:
        lookup_backend("broken")
    message = str(info.value)
    assert "'broken'" in message
    assert "steno_no_such_module_xyz:backend" in message
    assert ENTRY_POINT_GROUP in message
    assert "ModuleNotFoundError" in message


def test_entry_point_to_a_non_callable(tmp_path: Path, fake_entry_points):
    set_eps, _ = fake_entry_points
    _write_module(tmp_path, "steno_ext_value", "NOT_A_BACKEND = 3\n")
    set_eps(value="steno_ext_value:NOT_A_BACKEND")
    with pytest.raises(InvalidBackend, match="'value'.*is a int, not a callable"):
        lookup_backend("value")


def test_entry_point_from_a_real_dist_info(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """The whole path through importlib.metadata, with an installed-looking distribution."""
    site = tmp_path / "site"
    site.mkdir()
    _write_module(site, "steno_demo_backend", "def demo(gm, inputs):\n    return gm.forward\n")
    dist_info = site / "steno_demo_backend-0.1.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: steno-demo-backend\nVersion: 0.1\n")
    (dist_info / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\ndemo = steno_demo_backend:demo\ndemo_broken = steno_demo_backend:missing_attr\n"
    )
    monkeypatch.syspath_prepend(str(site))

    assert {"demo", "demo_broken"} <= set(list_backends())
    import_name = lookup_backend("demo").__module__
    assert import_name == "steno_demo_backend"
    with pytest.raises(InvalidBackend, match="demo_broken.*steno-demo-backend.*missing_attr"):
        lookup_backend("demo_broken")


def test_two_distributions_with_one_name_warn(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    _write_module(tmp_path, "steno_ext_dup", "def a(gm, i):\n    return gm.forward\n")
    eps = [
        importlib.metadata.EntryPoint("dup", "steno_ext_dup:a", ENTRY_POINT_GROUP),
        importlib.metadata.EntryPoint("dup", "steno_ext_dup:b", ENTRY_POINT_GROUP),
    ]
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda *, group: [ep for ep in eps if ep.group == group])
    with pytest.warns(UserWarning, match="'dup'"):
        names = list_backends()
    assert names.count("dup") == 1
    assert lookup_backend("dup").__name__ == "a"


def test_unreadable_entry_points_warn_but_do_not_break(monkeypatch: pytest.MonkeyPatch) -> None:
    def entry_points(*, group: str):
        raise OSError("corrupt RECORD")

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    with pytest.warns(UserWarning, match="corrupt RECORD"):
        assert "inductor" in list_backends()


# ---------------------------------------------------------------- resolve_backend (mode/options)


def test_resolve_backend_plain() -> None:
    from stenograph.backends.eager import eager

    assert resolve_backend("eager") is eager
    assert resolve_backend(_backend) is _backend


def test_resolve_backend_binds_inductor_mode_early() -> None:
    fn = resolve_backend("inductor", mode="max-autotune-no-cudagraphs")
    assert fn.config_patches == {"max_autotune": True, "coordinate_descent_tuning": True}
    with pytest.raises(InvalidBackend, match="unknown mode 'fastest'"):
        resolve_backend("inductor", mode="fastest")
    with pytest.raises(InvalidBackend, match="Either mode or options"):
        resolve_backend("inductor", mode="default", options={"max_autotune": True})


def test_resolve_backend_passes_mode_and_options_to_other_backends() -> None:
    seen = {}

    @register_backend(name="kw")
    def kw(gm, example_inputs, **kwargs):
        seen.update(kwargs)
        return gm.forward

    assert resolve_backend("kw", mode="default") is kw  # "default" is no request at all
    resolve_backend("kw", mode="reduce-overhead")(_FakeGM(), [])
    assert seen == {"mode": "reduce-overhead"}
    seen.clear()
    resolve_backend("kw", options={"a": 1})(_FakeGM(), [])
    assert seen == {"options": {"a": 1}}


class _FakeGM:
    def forward(self):
        return None


def test_builtin_backends_but_inductor_ignore_mode_and_options(caplog) -> None:
    """As torch's eager and AOTAutograd backends do (with a log line): a program written for
    torch.compile passing them still compiles."""
    import torch

    import stenograph

    assert resolve_backend("eager", options={"a": 1}) is lookup_backend("eager")
    assert resolve_backend("aot_eager", mode="max-autotune") is lookup_backend("aot_eager")
    assert "backend 'eager' ignores options={'a': 1}" in caplog.text
    assert "backend 'aot_eager' ignores mode='max-autotune'" in caplog.text
    x = torch.randn(3)
    for backend in ("eager", "aot_eager"):
        compiled = stenograph.compile(lambda t: t + t, backend=backend, options={"foo": 2})
        assert torch.equal(compiled(x), x + x)


def test_backends_that_take_no_mode_or_options_refuse_them_at_compile() -> None:
    def no_arguments(gm, example_inputs):
        return gm.forward

    with pytest.raises(InvalidBackend, match=r"backend 'no_arguments' takes no options= argument"):
        resolve_backend(no_arguments, options={"a": 1})
    with pytest.raises(InvalidBackend, match=r"takes no mode= argument"):
        resolve_backend(no_arguments, mode="max-autotune")

    def only_mode(gm, example_inputs, mode=None):
        return gm.forward

    assert resolve_backend(only_mode, mode="max-autotune") is not only_mode
    with pytest.raises(InvalidBackend, match=r"backend 'only_mode' takes no options= argument"):
        resolve_backend(only_mode, options={"a": 1})


def test_a_backends_before_tracing_runs_when_each_trace_begins():
    """What a backend starts in the background (Inductor's kernel-compiling processes) is started
    before the frame is traced, once per compile, and before the backend sees the graph."""
    import torch

    import stenograph

    calls = []

    def backend(gm, example_inputs):
        calls.append("compile")
        return gm

    backend.before_tracing = lambda: calls.append("before")
    compiled = stenograph.compile(lambda x: x.sin() + 1, backend=backend)
    compiled(torch.ones(2))
    compiled(torch.ones(2))
    assert calls == ["before", "compile"]
    compiled(torch.ones(3, 2))  # a new shape: traced again
    assert calls == ["before", "compile", "before", "compile"]


def test_inductor_starts_its_compile_workers_before_tracing(monkeypatch):
    """Both spellings of the Inductor backend start the worker pool early; without a GPU (or
    Triton) starting it does nothing, and imports nothing of Inductor."""
    import torch

    from stenograph.backends import inductor as inductor_module

    for backend in (lookup_backend("inductor"), inductor_module.inductor_backend("max-autotune-no-cudagraphs")):
        assert backend.before_tracing is inductor_module.start_compile_workers
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.delitem(sys.modules, "torch._inductor.async_compile", raising=False)
    inductor_module.start_compile_workers()
    assert "torch._inductor.async_compile" not in sys.modules
