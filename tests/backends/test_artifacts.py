"""Backend artifacts (backends/artifacts.py): stored in one process, loaded in a fresh one.

Each case is captured by stenograph with a backend that calls `compile_with_artifact`, and the
compiled callable is called once more here on copies of the inputs its graph received, recording
outputs, inputs after the call (in-place mutations), which inputs the outputs alias, and
gradients. A fresh Python process (`_artifact_child.py`) loads the artifacts, replays the same
calls and reports differences, and whether anything traced or compiled meanwhile. Inductor's child
gets an empty Inductor cache directory, so its C++ kernels must come from the artifact.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import os
import pathlib
import struct
import subprocess
import sys

import pytest
import torch
from _artifact_child import replay

import stenograph
from stenograph.backends import inductor_backend
from stenograph.backends._graph_pickle import dumps_graph
from stenograph.backends.artifacts import ArtifactError, backend_identity, compile_with_artifact, load_artifact

CHILD = pathlib.Path(__file__).with_name("_artifact_child.py")


class MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


def _mutation(x: torch.Tensor, buf: torch.Tensor) -> torch.Tensor:
    buf.add_(x)
    return buf * 2


def _alias(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return x.t(), x.view(-1)[:3], x * 2


def _dynamic(x: torch.Tensor) -> torch.Tensor:
    return (x * x.shape[0]).softmax(-1)


def _random(x: torch.Tensor) -> torch.Tensor:
    # the draw is no output: AOTAutograd-based backends return it anyway (_graph_outputs.py)
    return (x * torch.rand_like(x)).sum()


# name -> (function, calls as argument tuples, dynamic=)
CASES = {
    "mlp": (MLP(), [(torch.randn(5, 8),)], None),
    "mutation": (_mutation, [(torch.randn(4), torch.zeros(4))], None),
    "alias": (_alias, [(torch.randn(3, 4, requires_grad=True),)], None),
    "dynamic": (_dynamic, [(torch.randn(3, 6),), (torch.randn(5, 6),)], True),
    "random": (_random, [(torch.randn(3, 2, requires_grad=True),)], None),
}


def _clone(x: object) -> object:
    return x.detach().clone().requires_grad_(x.requires_grad) if isinstance(x, torch.Tensor) else x


def _record(backend: object, name: str, case: tuple) -> dict:
    """Capture the case, storing each graph's artifact and the inputs of its calls."""
    fn, calls, dynamic = case
    graphs: list[dict] = []

    def storing_backend(gm: torch.fx.GraphModule, example_inputs: list) -> object:
        compiled, artifact = compile_with_artifact(backend, gm, example_inputs)
        graph = {"compiled": compiled, "artifact": artifact, "calls": []}
        graphs.append(graph)

        def call(*args: object) -> object:
            graph["calls"].append([_clone(a) for a in args])
            return compiled(*args)

        return call

    compiled_fn = stenograph.compile(fn, backend=storing_backend, dynamic=dynamic)
    for args in calls:
        compiled_fn(*[_clone(a) for a in args])
    assert len(graphs) == 1, f"{name}: expected one graph, got {len(graphs)}"
    graph = graphs[0]
    assert graph["artifact"] is not None, f"{name}: no artifact"
    return {
        "artifact": graph["artifact"],
        "calls": [{"inputs": inputs, "expected": replay(graph["compiled"], inputs)} for inputs in graph["calls"]],
    }


def _run_child(tmp_path: pathlib.Path, cases: dict, env: dict | None = None) -> dict:
    cases_file, report_file = tmp_path / "cases.pt", tmp_path / "report.json"
    torch.save(cases, cases_file)
    child_env = {**os.environ, "TORCHINDUCTOR_COMPILE_THREADS": "1", **(env or {})}
    done = subprocess.run(
        [sys.executable, str(CHILD), str(cases_file), str(report_file)],
        env=child_env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(report_file.read_text())


def _on(device: str, case: tuple) -> tuple:
    fn, calls, dynamic = case
    if isinstance(fn, torch.nn.Module):
        fn = copy.deepcopy(fn).to(device)
    moved = [tuple(_clone(a.to(device)) if isinstance(a, torch.Tensor) else a for a in call) for call in calls]
    return fn, moved, dynamic


def _check_fresh_process(
    tmp_path: pathlib.Path, backend: object, names: list[str], env: dict | None = None, device: str = "cpu"
) -> dict:
    cases = {name: _record(backend, name, _on(device, CASES[name])) for name in names}
    report = _run_child(tmp_path, cases, env)
    assert report.pop("forbidden_calls") == {}, "loading traced or compiled"
    for name in names:
        assert report[name]["problems"] == [], name
    return report


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_loaded_in_a_fresh_process_matches(tmp_path: pathlib.Path, backend: str) -> None:
    _check_fresh_process(tmp_path, backend, list(CASES))


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["default", "max-autotune-no-cudagraphs", "reduce-overhead"])
def test_inductor_loaded_in_a_fresh_process_matches(tmp_path: pathlib.Path, mode: str) -> None:
    fresh_cache = tmp_path / "inductor-cache"
    names = ["mlp", "mutation", "alias"] if mode != "default" else list(CASES)
    _check_fresh_process(tmp_path, inductor_backend(mode=mode), names, {"TORCHINDUCTOR_CACHE_DIR": str(fresh_cache)})


@pytest.mark.slow
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_inductor_on_cuda_loaded_in_a_fresh_process_matches(tmp_path: pathlib.Path, mode: str) -> None:
    """Triton kernels come from the artifact (empty Inductor and Triton caches); reduce-overhead
    runs its graphs through CUDA-graph trees again after loading."""
    env = {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor-cache"), "TRITON_CACHE_DIR": str(tmp_path / "triton")}
    report = _check_fresh_process(tmp_path, inductor_backend(mode=mode), list(CASES), env, device="cuda")
    assert report["cuda_graphs"] == (mode == "reduce-overhead")


def test_eager_graph_with_branches_and_constants_round_trips() -> None:
    """torch.cond's branches are graph submodules; the tensor literal is a graph attribute."""

    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.cond(x.sum() > 0, lambda x: x.sin(), lambda x: x.cos(), (x,)) + torch.tensor([1.0, 2.0, 3.0])

    stored = []

    def storing_backend(gm: torch.fx.GraphModule, example_inputs: list) -> object:
        compiled, artifact = compile_with_artifact("eager", gm, example_inputs)
        stored.append(artifact)
        return compiled

    compiled_fn = stenograph.compile(fn, backend=storing_backend)
    for x in (torch.ones(3), -torch.ones(3)):
        assert torch.equal(compiled_fn(x), fn(x))
        assert torch.equal(load_artifact(stored[0])(x)[0], fn(x))


def _eager_artifact() -> bytes:
    gm = torch.fx.symbolic_trace(MLP())
    _, artifact = compile_with_artifact("eager", gm, [torch.randn(2, 8)])
    assert artifact is not None
    return artifact


def _repack(artifact: bytes, payload: bytes | None = None, **changes: object) -> bytes:
    """The artifact with header fields or the payload replaced, under a valid checksum."""
    magic_end = artifact.index(b"\n") + 1
    (size,) = struct.unpack_from(">Q", artifact, magic_end)
    start = magic_end + 8
    header = json.loads(artifact[start : start + size])
    header.update(changes)
    if payload is None:
        payload = artifact[start + size + 8 : -32]
    head = json.dumps(header).encode()
    body = artifact[:magic_end] + struct.pack(">Q", len(head)) + head + struct.pack(">Q", len(payload)) + payload
    return body + hashlib.sha256(body).digest()


@pytest.mark.parametrize(
    "damage, reason",
    [
        (lambda a: a[:-1], "checksum"),
        (lambda a: a[: len(a) // 2], "checksum"),
        (lambda a: a[:10], "magic"),
        (lambda a: a[:40], "cut short"),
        (lambda a: a[:-100] + bytes([a[-100] ^ 1]) + a[-99:], "checksum"),
        (lambda a: b"not an artifact at all", "magic"),
        (lambda a: _repack(a, torch="1.0.0"), "torch"),
        (lambda a: _repack(a, python="cpython 2.7"), "python"),
        (lambda a: _repack(a, stenograph="another"), "stenograph"),
        (lambda a: _repack(a, format=99), "format"),
        (lambda a: _repack(a, loader="no.such.module:load"), "cannot be imported"),
    ],
)
def test_unusable_bytes_raise_artifact_error(damage, reason: str) -> None:
    with pytest.raises(ArtifactError, match=reason):
        load_artifact(damage(_eager_artifact()))


def test_a_corrupt_payload_raises_artifact_error() -> None:
    with pytest.raises(ArtifactError, match="failed to load"):
        load_artifact(_repack(_eager_artifact(), payload=b"\x80\x05garbage"))


def test_backend_identity_is_checked_when_given() -> None:
    artifact = _eager_artifact()
    assert load_artifact(artifact, backend="eager") is not None
    with pytest.raises(ArtifactError, match="backend"):
        load_artifact(artifact, backend="aot_eager")


def test_identities_tell_modes_apart() -> None:
    assert backend_identity("eager") == "eager"
    assert backend_identity("aot_eager") == "aot_eager"
    default = backend_identity("inductor")
    assert default != backend_identity(inductor_backend(mode="reduce-overhead"))
    assert backend_identity(inductor_backend(mode="default")) == default
    assert backend_identity("cudagraphs") is None
    assert backend_identity(lambda gm, example_inputs: gm.forward) is None


def test_custom_backend_is_stored_only_when_it_says_how(caplog: pytest.LogCaptureFixture) -> None:
    gm = torch.fx.symbolic_trace(MLP())
    x = torch.randn(2, 8)

    def plain(gm: torch.fx.GraphModule, example_inputs: list) -> object:
        return gm.forward

    with caplog.at_level(logging.INFO, logger="stenograph.artifacts"):
        compiled, artifact = compile_with_artifact(plain, gm, [x])
    assert artifact is None and torch.equal(compiled(x), gm(x))
    assert "declares no stenograph_artifacts" in caplog.text

    def declaring(gm: torch.fx.GraphModule, example_inputs: list) -> object:
        return gm.forward

    declaring.stenograph_artifacts = _DeclaredCodec()
    compiled, artifact = compile_with_artifact(declaring, gm, [x])
    assert torch.equal(load_artifact(artifact)(x), gm(x))


class _DeclaredCodec:
    """A custom backend's codec: stores the graph, loaded by the eager backend's loader."""

    identity = "test: graph as is"
    loader = "stenograph.backends.eager:load_artifact"

    def compile_with_artifact(self, gm: torch.fx.GraphModule, example_inputs: list) -> tuple:
        return gm.forward, dumps_graph(gm)


def test_unstorable_graph_compiles_and_is_not_stored(caplog: pytest.LogCaptureFixture) -> None:
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    graph.output((graph.call_function(lambda t: t + 1, (x,)),))
    gm = torch.fx.GraphModule(torch.nn.Module(), graph)
    with caplog.at_level(logging.INFO, logger="stenograph.artifacts"):
        compiled, artifact = compile_with_artifact("eager", gm, [torch.ones(2)])
    assert artifact is None
    assert torch.equal(compiled(torch.ones(2))[0], torch.full((2,), 2.0))
    assert "not stored" in caplog.text


@pytest.mark.parametrize(
    "settings",
    [{"enable_autograd_cache": False}, {"force_disable_caches": True}],
    ids=["autograd-cache-off", "no-caches"],
)
def test_nothing_is_stored_while_aotautograds_cache_is_off(settings: dict) -> None:
    """Turning the cache on would let a lookup return another graph's entry (recompute_regions.py)."""
    import torch._functorch.config as functorch_config

    gm = torch.fx.symbolic_trace(MLP())
    x = torch.randn(2, 8, requires_grad=True)
    config = torch.compiler.config if "force_disable_caches" in settings else functorch_config
    with config.patch(settings):
        compiled, artifact = compile_with_artifact("aot_eager", gm, [x])
    assert artifact is None
    assert torch.allclose(compiled(x), gm(x))


def test_compile_with_the_cache_on_prepares_the_backends_loading(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`compile()` imports the codec's `loads_with` and calls its `warm_up` when a cache folder
    is set, and neither without one; the compiled function is unaffected."""
    (tmp_path / "loader_probe_module.py").write_text("LOADED = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "loader_probe_module", raising=False)
    warmed: list[str] = []

    class Codec(_DeclaredCodec):
        loads_with = ("loader_probe_module",)

        def warm_up(self) -> None:
            warmed.append("warm_up")

    def declaring(gm: torch.fx.GraphModule, example_inputs: list) -> object:
        return gm.forward

    declaring.stenograph_artifacts = Codec()

    def fn(x: torch.Tensor) -> torch.Tensor:
        return x.sin() + 1

    x = torch.randn(3)
    assert torch.equal(stenograph.compile(fn, backend=declaring)(x), fn(x))
    assert warmed == [] and "loader_probe_module" not in sys.modules
    with stenograph.config.patch(cache_dir=str(tmp_path / "cache")):
        compiled = stenograph.compile(fn, backend=declaring)
        assert warmed == ["warm_up"] and "loader_probe_module" in sys.modules
        assert torch.equal(compiled(x), fn(x))
