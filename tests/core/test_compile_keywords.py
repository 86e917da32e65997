"""compile()'s per-call arguments of torch 2.13: `recompile_limit`, `isolate_recompiles`, `name`
and `shapes_spec` (regions.py). Each scenario runs under stenograph and under torch.compile (the
peer): the graphs handed to the backend, the calls that raise `FailOnRecompileLimitHit` and the
results (each checked against eager) agree."""

from __future__ import annotations

import pickle
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import pytest
import torch
from helpers import assert_same, torch_peer

import stenograph
from stenograph import errors
from stenograph.testing import CompileCounter

DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


class _Api(NamedTuple):
    compile: Callable[..., Any]
    optimize: Callable[..., Any]
    patch: Callable[..., Any]
    limit_hit: type[Exception]


def _torch_api() -> _Api:
    import torch._dynamo

    dynamo = torch._dynamo
    return _Api(torch.compile, dynamo.optimize, dynamo.config.patch, dynamo.exc.FailOnRecompileLimitHit)


STENOGRAPH = _Api(stenograph.compile, stenograph.optimize, stenograph.config.patch, errors.FailOnRecompileLimitHit)


def _both(scenario: Callable[[_Api], Any]) -> tuple[Any, list[str]]:
    """`scenario`'s record under stenograph, which must equal torch.compile's, and the messages
    of the StenographWarnings it gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", stenograph.StenographWarning)
        ours = scenario(STENOGRAPH)
    theirs = torch_peer(lambda: scenario(_torch_api()))
    assert ours == theirs
    return ours, [str(w.message) for w in caught if issubclass(w.category, stenograph.StenographWarning)]


def _call(api: _Api, compiled: Callable, fn: Callable, *args: Any) -> str:
    """'ok' for a call returning what eager returns, 'limit' for one raising FailOnRecompileLimitHit."""
    try:
        result = compiled(*args)
    except api.limit_hit:
        return "limit"
    assert_same(result, fn(*args))
    return "ok"


def _sin(x):
    return x.sin() * 2


def _calls(api: _Api, compiled: Callable, dtypes: list[int]) -> list[str]:
    return [_call(api, compiled, _sin, torch.ones(3, dtype=DTYPES[i])) for i in dtypes]


# ---------------------------------------------------------------------------------------------
# recompile_limit


def test_recompile_limit_caps_the_entries_of_that_compile_call():
    """Two entries, then a new dtype runs eagerly; the dtypes compiled still run their entries
    and an identical call never compiles again."""

    def scenario(api: _Api) -> tuple:
        cnt = CompileCounter()
        compiled = api.compile(_sin, backend=cnt, recompile_limit=2)
        return _calls(api, compiled, [0, 1, 1, 2, 2, 0, 1, 3]), cnt.frame_count

    (outcomes, graphs), warned = _both(scenario)
    assert graphs == 2 and set(outcomes) == {"ok"}
    assert len(warned) == 1 and "compile(recompile_limit=...) (2)" in warned[0]


def test_recompile_limit_of_one_call_leaves_the_config_limit_to_the_others():
    def scenario(api: _Api) -> tuple:
        cnt = CompileCounter()
        limited = api.compile(_sin, backend=cnt, recompile_limit=1, isolate_recompiles=True)
        _calls(api, limited, [0, 1, 2])
        after_limited = cnt.frame_count
        _calls(api, api.compile(_sin, backend=cnt), [0, 1, 2])
        return after_limited, cnt.frame_count

    assert _both(scenario)[0] == (1, 4)


def test_recompile_limit_holds_for_the_resume_functions_of_that_call():
    """torch's test_recompile_limit_resume_function_auto_dynamic: the function's entry keeps
    serving while the code after its graph break recompiles for a global's sizes, up to two."""
    held = {}

    def f(x):
        x = x.sin()
        print("graph break")
        return held["y"].cos() + x.sum()

    def scenario(api: _Api) -> list[int]:
        cnt = CompileCounter()
        compiled = api.compile(f, backend=cnt, recompile_limit=2)
        counts = []
        for size in [(4, 8, 2), (5, 8, 2), (5, 9, 2), (6, 10, 3), (4, 8, 2)]:
            held["y"] = torch.randn(size)
            x = torch.randn(4, 8, 2)
            assert_same(compiled(x), f(x))
            counts.append(cnt.frame_count)
        return counts

    counts, warned = _both(scenario)
    assert counts[-1] == counts[1] and len(warned) == 1 and "recompile_limit" in warned[0]


@pytest.mark.parametrize("where", ["compile", "config"])
def test_fullgraph_raises_at_the_recompile_limit_on_every_call_past_it(where):
    """fullgraph=True makes reaching either limit FailOnRecompileLimitHit ("Hard failure due to
    fullgraph=True"), each time; the entry still serves the calls it accepts."""

    def scenario(api: _Api) -> tuple:
        cnt = CompileCounter()
        if where == "compile":
            compiled = api.compile(_sin, backend=cnt, fullgraph=True, recompile_limit=1)
            return _calls(api, compiled, [0, 1, 1, 0, 2]), cnt.frame_count
        compiled = api.compile(_sin, backend=cnt, fullgraph=True)
        with api.patch(recompile_limit=1):
            return _calls(api, compiled, [0, 1, 1, 0, 2]), cnt.frame_count

    (outcomes, graphs), warned = _both(scenario)
    assert outcomes == ["ok", "limit", "limit", "ok", "limit"] and graphs == 1 and warned == []


def test_fail_on_recompile_limit_hit_raises_on_every_call_past_the_limit():
    def scenario(api: _Api) -> tuple:
        cnt = CompileCounter()
        compiled = api.compile(_sin, backend=cnt)
        with api.patch(recompile_limit=1, fail_on_recompile_limit_hit=True):
            return _calls(api, compiled, [0, 1, 1, 0]), cnt.frame_count

    assert _both(scenario)[0] == (["ok", "limit", "limit", "ok"], 1)


def test_optimize_takes_recompile_limit_and_isolate_recompiles():
    def scenario(api: _Api) -> tuple:
        cnt = CompileCounter()
        first = api.optimize(cnt, recompile_limit=1, isolate_recompiles=True)(_sin)
        second = api.optimize(cnt, recompile_limit=1, isolate_recompiles=True)(_sin)
        return _calls(api, first, [0, 1]) + _calls(api, second, [1, 0]), cnt.frame_count

    (outcomes, graphs), warned = _both(scenario)
    assert graphs == 2 and len(warned) == 2


def test_a_pickled_compiled_module_keeps_its_recompile_limit(cnt):
    compiled = stenograph.compile(torch.nn.Tanh(), backend=cnt, recompile_limit=1)
    loaded = pickle.loads(pickle.dumps(compiled))
    assert loaded._compile_spec.recompile_limit == 1
    loaded(torch.ones(2))
    with pytest.warns(stenograph.StenographWarning, match=r"recompile_limit=\.\.\.\) \(1\)"):
        assert_same(loaded(torch.ones(2, dtype=torch.float64)), torch.ones(2, dtype=torch.float64).tanh())
    assert loaded._compile_spec.backend.frame_count == 1  # the loaded module's copy of the counter


# ---------------------------------------------------------------------------------------------
# isolate_recompiles


def test_isolated_calls_keep_their_own_entries_and_limits():
    """Two isolated compile() calls of one function with one backend: each compiles its own
    entries (a call the other compiled for compiles again) and reaches its own limit."""

    def scenario(api: _Api) -> tuple:
        cnt = CompileCounter()
        a = api.compile(_sin, backend=cnt, recompile_limit=2, isolate_recompiles=True)
        b = api.compile(_sin, backend=cnt, recompile_limit=2, isolate_recompiles=True)
        counts = []
        for compiled, dtypes in ((a, [0, 1]), (b, [0]), (a, [0, 1, 2]), (b, [1, 2, 0, 3])):
            _calls(api, compiled, dtypes)
            counts.append(cnt.frame_count)
        return counts

    counts, warned = _both(scenario)
    assert counts == [2, 3, 3, 4] and len(warned) == 2


def test_calls_without_isolation_share_entries_and_the_limit():
    def scenario(api: _Api) -> tuple:
        cnt = CompileCounter()
        a = api.compile(_sin, backend=cnt, recompile_limit=2)
        b = api.compile(_sin, backend=cnt, recompile_limit=2)
        _calls(api, a, [0, 1])
        _calls(api, b, [0, 1, 2])
        return cnt.frame_count

    graphs, warned = _both(scenario)
    assert graphs == 2 and len(warned) == 1


def test_an_isolated_call_runs_the_entries_its_backends_plain_calls_compiled():
    """torch's isolated lookups fall back to the entries compile() calls without isolation made
    with that backend; what the isolated call compiles the plain call does not see."""

    def scenario(api: _Api) -> list[int]:
        cnt, other = CompileCounter(), CompileCounter()
        plain = api.compile(_sin, backend=cnt)
        isolated = api.compile(_sin, backend=cnt, isolate_recompiles=True)
        counts = []
        for compiled, dtype in ((plain, 0), (isolated, 0), (isolated, 1), (plain, 1), (isolated, 1)):
            _calls(api, compiled, [dtype])
            counts.append(cnt.frame_count)
        _calls(api, api.compile(_sin, backend=other, isolate_recompiles=True), [0])
        return [*counts, other.frame_count]

    assert _both(scenario)[0] == [1, 1, 2, 3, 3, 1]


def test_isolated_calls_keep_their_resume_functions_apart():
    """torch's test_isolate_recompiles_graph_break_independent_regions: 2 calls x 2 sizes x
    (the function and the code after its break)."""

    def f(x):
        a = x.sin()
        print("graph break")
        return a + 1

    def scenario(api: _Api) -> int:
        cnt = CompileCounter()
        a = api.compile(f, backend=cnt, dynamic=False, isolate_recompiles=True)
        b = api.compile(f, backend=cnt, dynamic=False, isolate_recompiles=True)
        for compiled, size in ((a, 3), (b, 3), (a, 4), (b, 4), (a, 3), (b, 4)):
            x = torch.randn(size)
            assert_same(compiled(x), f(x))
        return cnt.frame_count

    assert _both(scenario)[0] == 8


@pytest.mark.parametrize("isolate", [True, False])
def test_isolated_closures_of_one_code_each_compile_once(isolate):
    """torch's test_isolate_recompiles_factory_pattern: closures of one code object share its
    cache unless each compile() call is isolated."""

    def factory(n: int) -> Callable:
        def frontend(x):
            return x.sum() + n

        return frontend

    def scenario(api: _Api) -> list[str]:
        with api.patch(recompile_limit=1):
            outcomes = []
            for n in range(3):
                compiled = api.compile(factory(n), backend="eager", fullgraph=True, isolate_recompiles=isolate)
                outcomes.append(_call(api, compiled, factory(n), torch.ones(3 + n)))
            return outcomes

    outcomes, _ = _both(scenario)
    assert outcomes == (["ok"] * 3 if isolate else ["ok", "limit", "limit"])


def test_accumulated_recompile_limit_caps_isolated_calls_together():
    """torch's test_isolate_recompiles_accumulated_limit_hard_fail: each region is under its own
    limit, all of them together at the accumulated one."""

    def scenario(api: _Api) -> list[str]:
        with api.patch(accumulated_recompile_limit=4, recompile_limit=8, fail_on_recompile_limit_hit=True):
            a = api.compile(_sin, backend="eager", isolate_recompiles=True)
            b = api.compile(_sin, backend="eager", isolate_recompiles=True)
            return _calls(api, a, [0, 1]) + _calls(api, b, [2, 3, 0]) + _calls(api, a, [2, 0])

    assert _both(scenario)[0] == ["ok", "ok", "ok", "ok", "limit", "limit", "ok"]


# ---------------------------------------------------------------------------------------------
# name, shapes_spec, refused values


def test_name_is_accepted_for_every_backend(cnt):
    """torch.compile hands `name` to Inductor only; other backends compile as without it."""
    compiled = stenograph.compile(_sin, backend=cnt, name="region")
    assert_same(compiled(torch.ones(3)), _sin(torch.ones(3)))
    assert cnt.frame_count == 1


@pytest.mark.slow
def test_name_labels_the_regions_inductor_compiles():
    """With Inductor's `wrap_inductor_compiled_regions`, a compiled region runs through the
    `inductor_compiled_code` operator, which carries compile()'s name (torch's
    `compile_region_name`); DebugMode lists it."""
    from torch.utils._debug_mode import DebugMode

    with torch._inductor.config.patch(wrap_inductor_compiled_regions=True):
        compiled = stenograph.compile(_sin, backend="inductor", name="my_region")
        x = torch.randn(4)
        compiled(x)
        with DebugMode() as mode:
            assert_same(compiled(x), _sin(x))
    assert "inductor_compiled_code" in mode.debug_string() and "name=my_region" in mode.debug_string()


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        ({"recompile_limit": 0}, ValueError, r"recompile_limit=\.\.\.\) must be at least 1.*not 0"),
        ({"recompile_limit": -2}, ValueError, "must be at least 1"),
        ({"recompile_limit": 1.5}, TypeError, r"takes an int or None, not 1\.5"),
        ({"recompile_limit": True}, TypeError, "takes an int or None, not True"),
        ({"recompile_limit": "2"}, TypeError, "takes an int or None"),
        ({"isolate_recompiles": 1}, TypeError, r"isolate_recompiles=\.\.\.\) takes a bool"),
        ({"name": 5}, TypeError, r"name=\.\.\.\) takes a str or None, not 5"),
        ({"shapes_spec": {"x": None}}, NotImplementedError, r"shapes_spec=\.\.\.\) is not implemented"),
    ],
)
def test_refused_values_raise_when_compile_is_called(arguments, error, message):
    with pytest.raises(error, match=message):
        stenograph.compile(_sin, backend="eager", **arguments)


def test_shapes_spec_is_not_implemented():
    """torch 2.13's ShapesSpec declares unbacked sizes (torch.fx.experimental.dynamic_spec);
    stenograph gives no input an unbacked size, so it refuses one by name, and takes None."""
    from torch.fx.experimental.dynamic_spec import ShapesSpec, ShapeVar, TensorSpec

    spec = ShapesSpec({"x": TensorSpec([ShapeVar("n")])})
    with pytest.raises(NotImplementedError, match="shapes_spec.*unbacked.*mark_dynamic"):
        stenograph.compile(_sin, backend="eager", shapes_spec=spec)
    with pytest.raises(NotImplementedError, match="shapes_spec"):
        stenograph.optimize("eager", shapes_spec=spec)
    assert_same(stenograph.compile(_sin, backend="eager", shapes_spec=None)(torch.ones(2)), _sin(torch.ones(2)))
