"""Never stale (issue 28): whatever changed between a cold process and a warm one, the warm one's
results are eager's; an entry that relied on the change is not used and the frame compiles again.

Each test runs a program in a fresh process against a cache folder (`_support.run`), changes the
program's source, a file it imports or its arguments, and runs it again. The unchanged second run
of each shows that the entries were usable, so the recompile is the change's doing.
"""

from __future__ import annotations

import pathlib

import pytest

from ._support import run, write_program


def _scenario(tmp_path: pathlib.Path, body: str) -> tuple[pathlib.Path, pathlib.Path]:
    return write_program(tmp_path / "program.py", body), tmp_path / "cache"


def _edit(path: pathlib.Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new))


def _cold_warm_changed(program: pathlib.Path, cache: pathlib.Path, change, *args: str) -> dict:
    """Cold run, an unchanged warm run that compiles nothing, then `change()` and a run whose
    report is returned (results checked equal to eager's)."""
    cold = run(program, cache, *args)
    assert cold["compiled"] >= 1 and cold["stored"] == cold["compiled"], cold
    assert cold["diff"] == 0, cold
    warm = run(program, cache, *args)
    assert warm["compiled"] == 0 and warm["installed"] >= 1, warm
    assert warm["diff"] == 0, warm
    change()
    changed = run(program, cache, *args)
    assert changed["diff"] == 0, changed
    return changed


CLOSURE = """
def make(k):
    def scaled(x):
        return x.sin() * k
    return scaled


scaled = make(2.0)
x = torch.randn(6)
compiled = stenograph.compile(scaled, backend="eager")
report(diff=distance([compiled(x)], [scaled(x)]))
"""


def test_a_closure_variable_changed(tmp_path):
    """The function compiled is a closure: the value it closes over is checked on the live cell."""
    program, cache = _scenario(tmp_path, CLOSURE)
    changed = _cold_warm_changed(program, cache, lambda: _edit(program, "make(2.0)", "make(3.0)"))
    assert changed["compiled"] == 1, changed


INLINED_CLOSURE = """
def make(k):
    def scaled(x):
        return x.sin() * k
    return scaled


scaled = make(2.0)


def f(x):
    return scaled(x) + 1


x = torch.randn(6)
compiled = stenograph.compile(f, backend="eager")
report(diff=distance([compiled(x)], [f(x)]))
"""


def test_an_inlined_closure_variable_changed(tmp_path):
    program, cache = _scenario(tmp_path, INLINED_CLOSURE)
    changed = _cold_warm_changed(program, cache, lambda: _edit(program, "make(2.0)", "make(3.0)"))
    assert changed["compiled"] == 1, changed


DEFAULTS = """
def helper(x, k=2.0, *, shift=1.0):
    return x.cos() * k + shift


def f(x, n=3):
    return helper(x) + n


x = torch.randn(6)
compiled = stenograph.compile(f, backend="eager")
report(diff=distance([compiled(x)], [f(x)]))
"""


@pytest.mark.parametrize(
    "old,new",
    [
        ("def f(x, n=3)", "def f(x, n=4)"),  # the compiled function's default
        ("def helper(x, k=2.0,", "def helper(x, k=5.0,"),  # an inlined function's default
        ("shift=1.0)", "shift=-1.0)"),  # an inlined function's keyword-only default
    ],
    ids=["compiled", "inlined", "inlined-keyword-only"],
)
def test_a_default_argument_changed(tmp_path, old, new):
    """Defaults are not part of a code object: the code's key is the same, the guards see them."""
    program, cache = _scenario(tmp_path, DEFAULTS)
    changed = _cold_warm_changed(program, cache, lambda: _edit(program, old, new))
    assert changed["compiled"] == 1, changed


OTHER_MODULE = """
SCALE = 2.0


def helper(x):
    return x.tanh() * SCALE
"""

USES_OTHER_MODULE = """
sys.path.insert(0, sys.argv[1])
import other


def f(x):
    return other.helper(x) + 1


x = torch.randn(6)
compiled = stenograph.compile(f, backend="aot_eager")
report(diff=distance([compiled(x)], [f(x)]))
"""


@pytest.mark.parametrize(
    "old,new",
    [("x.tanh() * SCALE", "x.tanh() * SCALE - 1"), ("SCALE = 2.0", "SCALE = 0.5")],
    ids=["its-code", "its-global"],
)
def test_an_inlined_function_of_another_module_changed(tmp_path, old, new):
    """`f` inlines `other.helper`: a changed helper (its code, or a global of its module) is seen."""
    program, cache = _scenario(tmp_path, USES_OTHER_MODULE)
    library = tmp_path / "lib"
    library.mkdir()
    module = library / "other.py"
    module.write_text(OTHER_MODULE)
    changed = _cold_warm_changed(program, cache, lambda: _edit(module, old, new), str(library))
    assert changed["compiled"] == 1, changed


MODULE = """
class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)
        self.scale = 2.0
        self.residual = True

    def forward(self, x):
        h = self.proj(x) * self.scale
        if self.residual:
            h = h + x
        return h


torch.manual_seed(0)
block = Block()
x = torch.randn(3, 4)
compiled = stenograph.compile(block, backend="aot_eager")
out = compiled(x)
out.sum().backward()
grads = [p.grad.clone() for p in block.parameters()]
block.zero_grad()
expected = block(x)
expected.sum().backward()
report(diff=max(distance([out], [expected]), distance(grads, [p.grad for p in block.parameters()])))
"""


@pytest.mark.parametrize(
    "old,new",
    [
        ("self.scale = 2.0", "self.scale = 3.0"),  # a float attribute
        ("self.residual = True", "self.residual = False"),  # a flag taking another branch
        ("Linear(4, 4)", "Linear(4, 4, bias=False)"),  # a submodule's parameters
        ("x = torch.randn(3, 4)\n", "block.double()\nx = torch.randn(3, 4).double()\n"),  # parameter dtypes
    ],
    ids=["float-attribute", "flag", "parameters", "dtype"],
)
def test_a_module_attribute_changed(tmp_path, old, new):
    program, cache = _scenario(tmp_path, MODULE)
    changed = _cold_warm_changed(program, cache, lambda: _edit(program, old, new))
    assert changed["compiled"] == 1, changed


CLASS_GLOBAL = """
class Settings:
    factor = 2


LIMITS = {"low": -0.5}


def f(x):
    return x.clamp(min=LIMITS["low"]) * Settings.factor


x = torch.randn(6)
compiled = stenograph.compile(f, backend="eager")
report(diff=distance([compiled(x)], [f(x)]))
"""


@pytest.mark.parametrize(
    "old,new",
    [("factor = 2", "factor = 7"), ('{"low": -0.5}', '{"low": 0.25}')],
    ids=["class-attribute", "dict-item"],
)
def test_a_global_object_changed(tmp_path, old, new):
    program, cache = _scenario(tmp_path, CLASS_GLOBAL)
    changed = _cold_warm_changed(program, cache, lambda: _edit(program, old, new))
    assert changed["compiled"] == 1, changed


METHODS = """
class Base(torch.nn.Module):
    def gate(self, h):
        return torch.sigmoid(h)


class Block(Base):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)

    def mix(self, h):
        return h * 2

    @staticmethod
    def shift(h):
        return h + 1

    @property
    def width(self):
        return 4

    def forward(self, x):
        h = self.shift(self.mix(self.proj(x))) * self.gate(x)
        return h[:, : self.width]


class Point:
    def __init__(self, v):
        self.v = v

    def norm(self):
        return self.v.abs().sum()


torch.manual_seed(0)
block = Block()
x = torch.randn(3, 4)


def f(x):
    return block(x).sum() + Point(x).norm()


compiled = stenograph.compile(f, backend="eager")
report(diff=distance([compiled(x)], [f(x)]))
"""


@pytest.mark.parametrize(
    "old,new",
    [
        ("return h * 2", "return h * 3"),  # a method of the module's class
        ("return h + 1", "return h - 1"),  # a staticmethod
        ("return 4", "return 3"),  # a property
        ("torch.sigmoid(h)", "torch.tanh(h)"),  # a method of a base class
        ("self.v.abs().sum()", "self.v.pow(2).sum()"),  # a method of a plain class
    ],
    ids=["method", "staticmethod", "property", "base-method", "plain-class"],
)
def test_a_method_changed(tmp_path, old, new):
    """The classes are found by name in the warm process: a method whose code changed under the
    same class name must not be taken for the one inlined."""
    program, cache = _scenario(tmp_path, METHODS)
    changed = _cold_warm_changed(program, cache, lambda: _edit(program, old, new))
    assert changed["compiled"] >= 1, changed


BACKENDS = """
def f(x):
    return (x.sin() * 2).sum(0)


backend, mode = sys.argv[1], sys.argv[2]
x = torch.randn(4, 4)
compiled = stenograph.compile(f, backend=backend, mode=None if mode == "-" else mode)
report(diff=distance([compiled(x)], [f(x)]))
"""


@pytest.mark.slow  # Inductor's compiles and imports in fresh processes: about a minute
def test_each_backend_and_mode_has_its_own_entries(tmp_path):
    """eager, aot_eager and Inductor's modes never stand in for each other: each misses the
    others' entries, compiles and stores its own, which its next process installs."""
    program, cache = _scenario(tmp_path, BACKENDS)
    variants = [("eager", "-"), ("aot_eager", "-"), ("inductor", "-"), ("inductor", "max-autotune-no-cudagraphs")]
    for variant in variants:
        first = run(program, cache, *variant)
        assert first["compiled"] == 1 and first["installed"] == 0 and first["stored"] == 1, (variant, first)
        assert first["diff"] < 1e-6, (variant, first)
    for variant in variants:
        again = run(program, cache, *variant)
        assert again["compiled"] == 0 and again["installed"] == 1, (variant, again)
        assert again["diff"] < 1e-6, (variant, again)


LIMITED = """
stenograph.config.recompile_limit = 2
SCALE = float(sys.argv[1])


def f(x):
    return x.exp() * SCALE


x = torch.randn(6)
compiled = stenograph.compile(f, backend="eager")
report(diff=distance([compiled(x)], [f(x)]))
"""


def test_installed_entries_do_not_count_towards_the_recompile_limit(tmp_path):
    """Each value of the global compiles an entry; a later process installs them all, and with
    none matching still compiles its own (they cost it no compile) instead of running eagerly."""
    program, cache = _scenario(tmp_path, LIMITED)
    for count, value in enumerate(["1.5", "2.5", "3.5"]):
        result = run(program, cache, value)
        assert result["compiled"] == 1 and result["installed"] == count and result["diff"] == 0, result
    again = run(program, cache, "2.5")
    assert again["compiled"] == 0 and again["installed"] == 3 and again["diff"] == 0, again


GLOBAL_STATE = """
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4))
x = torch.randn(8, 4)
torch.set_default_dtype(torch.float32)
net.train()
grad = torch.enable_grad()


def f(x):
    return net(x) + torch.ones(4)  # a tensor of the default dtype


compiled = stenograph.compile(f, backend="aot_eager")
with grad:
    out = compiled(x)
    state = [b.clone() for b in net.buffers()]
    for b, s in zip(net.buffers(), [torch.zeros(4), torch.ones(4), torch.tensor(0)]):
        b.copy_(s)
    expected = f(x)
report(diff=max(distance([out], [expected]), distance(state, list(net.buffers()))), dtype=str(out.dtype))
"""


@pytest.mark.parametrize(
    "old,new",
    [
        ("net.train()", "net.eval()"),  # a module's training flag
        ("grad = torch.enable_grad()", "grad = torch.no_grad()"),  # grad mode
        ("set_default_dtype(torch.float32)", "set_default_dtype(torch.float64)"),  # the default dtype
    ],
    ids=["training", "grad-mode", "default-dtype"],
)
def test_global_state_changed(tmp_path, old, new):
    program, cache = _scenario(tmp_path, GLOBAL_STATE)
    changed = _cold_warm_changed(program, cache, lambda: _edit(program, old, new))
    assert changed["compiled"] == 1, changed
    if "float64" in new:
        assert changed["dtype"] == "torch.float64", changed


GENERATED_AND_ABSENT = """
import dataclasses


@dataclasses.dataclass
class Out:
    value: torch.Tensor
    scale: float = 2.0


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)

    def forward(self, x):
        h = self.proj(x)
        shift = getattr(self, "shift", None)
        if shift is not None:
            h = h + shift
        out = Out(h)
        return out.value * out.scale


torch.manual_seed(0)
block = Block()
x = torch.randn(3, 4)
compiled = stenograph.compile(block, backend="eager")
report(diff=distance([compiled(x)], [block(x)]))
"""


@pytest.mark.parametrize(
    "old,new",
    [
        ("class Block(torch.nn.Module):\n", "class Block(torch.nn.Module):\n    shift = 1.5\n"),
        ("scale: float = 2.0", "scale: float = 3.0"),
        ("    scale: float = 2.0\n", "    scale: float = 2.0\n    offset: float = 0.0\n"),
    ],
    ids=["class-attribute-added", "dataclass-default", "dataclass-field-added"],
)
def test_a_class_dict_and_generated_code_are_found_again(tmp_path, old, new):
    """The guards hold the class `__dict__` a missing attribute was looked for in and the code of
    a dataclass's `__init__` (made by exec, no file): both are found again in the warm process
    (the HF Llama forward's entry was not stored before), and a change to either recompiles."""
    program, cache = _scenario(tmp_path, GENERATED_AND_ABSENT)
    changed = _cold_warm_changed(program, cache, lambda: _edit(program, old, new))
    assert changed["compiled"] >= 1, changed


DECORATED_MODULE = """
import functools

import torch


def logged(fn):
    @functools.wraps(fn)
    def wrapper(self, *args, **kwargs):
        return fn(self, *args, **kwargs)

    return wrapper


class Block(torch.nn.Module):
    @logged
    def forward(self, x):
        return x.sin() * 2.0
"""

USES_DECORATED = """
sys.path.insert(0, sys.argv[1])
import decorated

block = decorated.Block()
x = torch.randn(6)
compiled = stenograph.compile(block, backend="eager")
report(diff=distance([compiled(x)], [block(x)]))
"""


def test_a_function_a_decorator_wrapped_changed(tmp_path):
    """The class holds the decorator's wrapper under the method's name; the function it wraps
    is found by its code among the module's functions. Its body edited: the entry is rejected
    naming it, and recompiled."""
    program, cache = _scenario(tmp_path, USES_DECORATED)
    library = tmp_path / "lib"
    library.mkdir()
    module = library / "decorated.py"
    module.write_text(DECORATED_MODULE)
    changed = _cold_warm_changed(program, cache, lambda: _edit(module, "* 2.0", "* 3.0"), str(library))
    assert changed["compiled"] == 1, changed
    assert any(d.startswith("rejected") and "Block.forward" in d for d in changed["details"]), changed


NONSTRICT = """
@stenograph.nonstrict_trace
def body(x):
    return x * 3


def f(x):
    return body(x + 1) * 2


x = torch.randn(6)
compiled = stenograph.compile(f, backend="aot_eager")
report(diff=distance([compiled(x)], [f(x)]))
"""


def test_a_nonstrict_trace_body_is_never_taken_from_disk(tmp_path):
    """A `nonstrict_trace` function's body is not traced, so nothing fingerprints it (or what it
    calls): its graph is not stored, and an edited body gives eager's result."""
    program, cache = _scenario(tmp_path, NONSTRICT)
    for change in (None, "return x * 3 + 100"):
        if change is not None:
            _edit(program, "return x * 3", change)
        report = run(program, cache)
        assert report["diff"] == 0 and report["compiled"] == 1 and report["stored"] == 0, report


NESTED_BRANCH = """
stenograph.config.nested_graph_breaks = True


def inner(x):
    if x == 0:
        return x + 1
    else:
        return x + 2


def outer(x):
    return inner(x)


x = torch.tensor([float(sys.argv[1])])
compiled = stenograph.compile(outer, backend="eager")
report(diff=distance([compiled(x)], [outer(x)]))
"""


def test_a_nested_break_resumed_the_other_way(tmp_path):
    """The two chains out of a branch inside a callee are written alike: the warm process that
    takes the other way must not install the first way's persisted entry."""
    program, cache = _scenario(tmp_path, NESTED_BRANCH)
    cold = run(program, cache, "1.0")
    assert cold["diff"] == 0 and cold["compiled"] == 2, cold
    other_way = run(program, cache, "0.0")
    assert other_way["diff"] == 0, other_way
    assert other_way["compiled"] == 1 and other_way["installed"] == 1, other_way  # only the graph before
    same_way = run(program, cache, "1.0")
    assert same_way["diff"] == 0 and same_way["compiled"] == 0, same_way
