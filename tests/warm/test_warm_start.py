"""Warm start (issue 28): a second process installs what the first compiled, and compiles nothing,
unless something the entries relied on changed; then it compiles, and every result is eager's.

Each test runs programs in fresh processes against one cache folder (`_support.run`)."""

from __future__ import annotations

import pathlib
import threading

import pytest

from ._support import run, write_program

# a function with a helper, a global config and a graph break, a module, and a training step
PROGRAM = """
import os

if os.environ.get("LOAD_ARTIFACTS"):
    stenograph.load_artifacts(os.environ["LOAD_ARTIFACTS"])
BACKEND = sys.argv[1]
SCALE = float(sys.argv[2]) if len(sys.argv) > 2 else 2.0
WIDTH = int(sys.argv[3]) if len(sys.argv) > 3 else 8


class Config:
    shift = 1.0


CONFIG = Config()


def helper(x):
    return x.relu() * SCALE + CONFIG.shift


def f(x, n=3):
    y = helper(x) + n
    print("between the graphs")
    return (y * 2).sum()


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, WIDTH)
        self.b = torch.nn.Linear(WIDTH, 4)
        self.gated = True

    def forward(self, x):
        h = torch.relu(self.a(x))
        if self.gated:
            h = h * torch.sigmoid(h)
        return self.b(h)


torch.manual_seed(0)
net = Net()
x, batch = torch.randn(5), torch.randn(3, 8)
compiled_f = stenograph.compile(f, backend=BACKEND)
compiled_net = stenograph.compile(net, backend=BACKEND)
out_f = compiled_f(x)
out = compiled_net(batch)
out.sum().backward()
grads = [p.grad.clone() for p in net.parameters()]
net.zero_grad()
expected = net(batch)
expected.sum().backward()
report(
    f=distance([out_f], [f(x)]),
    net=distance([out], [expected]),
    grads=distance(grads, [p.grad for p in net.parameters()]),
)
if os.environ.get("SAVE_ARTIFACTS"):
    stenograph.save_artifacts(os.environ["SAVE_ARTIFACTS"])
"""


def _program(tmp_path: pathlib.Path, body: str = PROGRAM) -> pathlib.Path:
    return write_program(tmp_path / "program.py", body)


def _equal(result: dict) -> None:
    for key in ("f", "net", "grads"):
        assert result[key] < 1e-5, (key, result)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_warm_process_compiles_nothing(tmp_path, backend):
    """Every entry of the cold process (the frame before the break, the resume function, the
    module's forward) is stored; the warm one installs them all and compiles none."""
    program, cache = _program(tmp_path), tmp_path / "cache"
    cold = run(program, cache, backend)
    assert cold["compiled"] == 3 and cold["stored"] == 3, cold
    warm = run(program, cache, backend)
    assert warm["compiled"] == 0 and warm["installed"] == 3 and warm["rejected"] == 0, warm
    _equal(cold)
    _equal(warm)


def test_a_changed_constant_in_the_source_recompiles(tmp_path):
    program, cache = _program(tmp_path), tmp_path / "cache"
    run(program, cache, "eager")
    program.write_text(program.read_text().replace("return (y * 2).sum()", "return (y * 5).sum()"))
    warm = run(program, cache, "eager")
    # `f`'s code changed: its entry is under another key, and its resume function is new code
    assert warm["compiled"] == 2 and warm["installed"] == 1, warm
    _equal(warm)


@pytest.mark.slow  # fresh processes: CI runs the others
def test_a_changed_helper_is_not_trusted(tmp_path):
    """The entry of `f` inlined `helper`: `helper` changed, so the stored entry cannot be used
    (the function it names is no longer the code it was compiled against)."""
    program, cache = _program(tmp_path), tmp_path / "cache"
    run(program, cache, "eager")
    program.write_text(program.read_text().replace("x.relu() * SCALE", "x.sigmoid() * SCALE"))
    warm = run(program, cache, "eager")
    assert warm["compiled"] >= 1, warm
    _equal(warm)


def test_a_changed_global_fails_its_guard_and_recompiles(tmp_path):
    program, cache = _program(tmp_path), tmp_path / "cache"
    run(program, cache, "eager", "2.0")
    same = run(program, cache, "eager", "2.0")
    assert same["compiled"] == 0, same
    changed = run(program, cache, "eager", "3.5")
    assert changed["compiled"] == 1 and changed["installed"] == 3, changed  # f's first part again
    _equal(changed)


def test_changed_module_shapes_recompile(tmp_path):
    program, cache = _program(tmp_path), tmp_path / "cache"
    run(program, cache, "eager", "2.0", "8")
    wider = run(program, cache, "eager", "2.0", "16")
    assert wider["compiled"] == 1, wider  # the module's forward, for the new parameter shapes
    _equal(wider)


@pytest.mark.slow  # fresh processes: CI runs the others
def test_a_changed_module_attribute_recompiles(tmp_path):
    program, cache = _program(tmp_path), tmp_path / "cache"
    run(program, cache, "eager")
    program.write_text(program.read_text().replace("self.gated = True", "self.gated = False"))
    warm = run(program, cache, "eager")
    assert warm["compiled"] == 1, warm
    _equal(warm)


@pytest.mark.slow  # fresh processes: CI runs the others
def test_another_backend_compiles_its_own(tmp_path):
    program, cache = _program(tmp_path), tmp_path / "cache"
    run(program, cache, "eager")
    other = run(program, cache, "aot_eager")
    assert other["compiled"] == 3 and other["installed"] == 0, other
    _equal(other)


def test_another_torch_version_compiles(tmp_path):
    program, cache = _program(tmp_path), tmp_path / "cache"
    run(program, cache, "eager")
    pretend = "torch.__version__ = '2.99.0+test'\n"
    program.write_text(program.read_text().replace("BACKEND = sys.argv[1]", pretend + "BACKEND = sys.argv[1]"))
    warm = run(program, cache, "eager")
    assert warm["compiled"] == 3 and warm["installed"] == 0, warm
    _equal(warm)


def test_damaged_entries_are_skipped_with_a_log_line(tmp_path):
    program, cache = _program(tmp_path), tmp_path / "cache"
    run(program, cache, "eager")
    files = sorted(cache.rglob("*.entry"))
    assert len(files) == 3
    files[0].write_bytes(files[0].read_bytes()[:40])  # truncated
    files[1].write_bytes(b"not an entry at all")  # foreign
    data = bytearray(files[2].read_bytes())
    data[len(data) // 2] ^= 0xFF  # a flipped byte inside the pickle
    files[2].write_bytes(bytes(data))
    warm = run(program, cache, "eager", env={"STENOGRAPH_LOGS": "cache"})
    assert warm["compiled"] >= 2, warm
    assert "[stenograph.cache]" in warm["stderr"]
    _equal(warm)
    again = run(program, cache, "eager")
    assert again["compiled"] == 0, again  # the entries compiled instead were stored


@pytest.mark.slow  # fresh processes: CI runs the others
def test_two_processes_writing_at_once_stay_correct(tmp_path):
    program, cache = _program(tmp_path), tmp_path / "cache"
    results: list[dict] = []
    threads = [threading.Thread(target=lambda: results.append(run(program, cache, "eager"))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for result in results:
        _equal(result)
    assert not list(cache.rglob(".tmp-*")), "a temporary file was left behind"
    warm = run(program, cache, "eager")
    assert warm["compiled"] == 0, warm


def test_artifacts_carried_to_a_process_without_a_cache_folder(tmp_path):
    """Build once (a cache folder, then `save_artifacts`), serve elsewhere: a process with no
    cache folder that calls `load_artifacts` compiles nothing."""
    program, cache, bundle = _program(tmp_path), tmp_path / "cache", tmp_path / "artifacts.bin"
    cold = run(program, cache, "aot_eager", env={"SAVE_ARTIFACTS": str(bundle)})
    assert cold["stored"] == 3 and bundle.stat().st_size > 0
    served = run(program, None, "aot_eager", env={"LOAD_ARTIFACTS": str(bundle)})
    assert served["compiled"] == 0 and served["installed"] == 3, served
    _equal(served)


def test_custom_backends_are_not_cached_unless_they_say_how(tmp_path):
    body = PROGRAM.replace("BACKEND = sys.argv[1]", "BACKEND = stenograph.testing.CompileCounter()")
    program, cache = _program(tmp_path, body), tmp_path / "cache"
    cold = run(program, cache, "x")
    assert cold["stored"] == 0 and not list(cache.rglob("*.entry"))
    warm = run(program, cache, "x")
    assert warm["compiled"] == 3, warm


def test_logs_and_the_structured_trace_show_what_the_cache_did(tmp_path):
    program, cache, trace = _program(tmp_path), tmp_path / "cache", tmp_path / "trace"
    cold = run(program, cache, "eager", env={"STENOGRAPH_LOGS": "cache"})
    assert cold["stderr"].count("STORED") == 3, cold["stderr"]
    warm = run(program, cache, "eager", env={"STENOGRAPH_LOGS": "cache", "STENOGRAPH_TRACE": str(trace)})
    assert warm["stderr"].count("INSTALLED") == 3, warm["stderr"]
    text = "".join(path.read_text() for path in trace.glob("*.log"))
    assert text.count('"stenograph_cache"') == 3 and "installed: " in text
    assert '"dynamo_guards"' in text  # an installed entry's guards, as a compiled one's


MAPPING_PROGRAM = """
import collections.abc


class Settings(collections.abc.Mapping):
    def __init__(self, **values):
        self._values = values

    def __getitem__(self, key):
        return self._values[key]

    def __iter__(self):
        return iter(self._values)

    def __len__(self):
        return len(self._values)


def f(x, settings):
    scale = settings.get("scale", 1.0) + settings.get("missing", 0.5)
    if isinstance(settings, collections.abc.Mapping) and "shift" in settings:
        x = x + settings["shift"]
    return x * scale


x = torch.randn(4)
settings = Settings(scale=3.0, shift=1.0)
out = stenograph.compile(f, backend="eager")(x, settings)
report(f=distance([out], [f(x, settings)]))
"""


def test_functions_of_a_module_that_names_itself_after_another_are_found(tmp_path):
    """`Mapping.get` lives in `_collections_abc`, which calls itself "collections.abc" (where
    neither it nor that module's globals are): both are found under the name it was imported as."""
    program, cache = write_program(tmp_path / "program.py", MAPPING_PROGRAM), tmp_path / "cache"
    cold = run(program, cache)
    assert cold["stored"] == 1 and cold["f"] == 0, cold
    warm = run(program, cache)
    assert warm["compiled"] == 0 and warm["installed"] == 1 and warm["f"] == 0, warm


SHARED_CELLS = """
def f(x):
    k = 2
    scaled = lambda t: t * k  # closes over `k`, which the code after the break assigns again
    print("between the graphs")
    k = 5
    return scaled(x) + k


x = torch.randn(4)
out = stenograph.compile(f, backend=sys.argv[1])(x)
report(f=distance([out], [f(x)]))
"""


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_resume_function_sharing_the_frames_cells_is_installed(tmp_path, backend):
    program, cache = _program(tmp_path, SHARED_CELLS), tmp_path / "cache"
    cold = run(program, cache, backend)
    assert cold["compiled"] == 2 and cold["stored"] == 2, cold
    warm = run(program, cache, backend)
    assert warm["compiled"] == 0 and warm["installed"] == 2 and warm["rejected"] == 0, warm
    assert cold["f"] < 1e-5 and warm["f"] < 1e-5


_NESTED = """
stenograph.config.nested_graph_breaks = True


def inner(x):
    x = x + 1
    print("inner")
    return x * 2


def middle(x):
    return inner(x + 4) - 8


def outer(x):
    acc = x.sin()

    def add(t):
        return middle(t) + acc

    return add(x + 16) + acc


compiled = stenograph.compile(outer, backend="eager")
xs = [torch.arange(3.0) + i for i in range(2)]
got = [compiled(x) for x in xs]
report(diff=distance(got, [outer(x) for x in xs]))
"""


def test_a_warm_process_installs_nested_break_chains(tmp_path):
    """A nested graph break's entries (the frame before it, the chain resuming its callers,
    whose links share closure cells) are stored and installed: the warm process compiles none."""
    program, cache = write_program(tmp_path / "nested.py", _NESTED), tmp_path / "cache"
    cold = run(program, cache)
    assert cold["compiled"] == 2 and cold["stored"] == 2 and cold["diff"] == 0, cold
    warm = run(program, cache)
    assert warm["compiled"] == 0 and warm["installed"] == 2 and warm["rejected"] == 0, warm
    assert warm["diff"] == 0
