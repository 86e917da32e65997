"""torch's public settings naming what is dynamic: `torch.compiler.config.dynamic_sources`,
`dynamic_values` and `unbacked_sources`.

A listed source (exact name or `re.match` regex, torch's spelling, optional `:N` dimension) is
symbolic from the first compile, so other sizes or values reuse the graph, whatever
`dynamic=False`, `force_parameter_static_shapes` or nn.Module int attributes would say; an
unlisted one still specialises. A size or int equal to a `dynamic_values` sentinel is symbolic
too (`unbacked_sources` has its own tests: test_unbacked_inputs.py). Each case compares with
eager and counts torch.compile's graphs for the same calls under the same settings.
"""

from collections.abc import Callable, Sequence
from typing import Any

import helpers
import pytest
import torch
from torch import nn

import stenograph
from stenograph.errors import InvalidConfig
from stenograph.guards.sources import (
    AttrSource,
    ClosureSource,
    GlobalSource,
    ItemSource,
    IterationItemSource,
    LocalSource,
    ModuleMemberSource,
)
from stenograph.testing import CompileCounter

COUNT = 3


def _graphs(fn: Callable, calls: Sequence[Sequence[Any]], *, dynamic: bool | None = None, **settings: str) -> int:
    """Call compiled `fn` on each argument tuple of `calls` under `torch.compiler.config` `settings`,
    checking it against eager; stenograph's graph count, asserted equal to torch.compile's."""
    cnt = CompileCounter()
    with torch.compiler.config.patch(**settings):
        compiled = stenograph.compile(fn, backend=cnt, dynamic=dynamic)
        for args in calls:
            helpers.assert_same(compiled(*args), fn(*args))
        peer = CompileCounter()

        def run() -> None:
            torch_compiled = torch.compile(fn, backend=peer, dynamic=dynamic)
            for args in calls:
                torch_compiled(*args)

        helpers.torch_peer(run)
    assert cnt.frame_count == peer.frame_count
    return cnt.frame_count


def _symbolic_placeholders(cnt: CompileCounter) -> list[str]:
    """The placeholders of the first graph whose example value has a symbolic size or is one."""
    found = []
    for node in helpers.placeholders(cnt.graphs[0]):
        value = node.meta["example_value"]
        sizes = value.shape if isinstance(value, torch.Tensor) else [value]
        if any(isinstance(s, torch.SymInt) for s in sizes):
            found.append(node.meta["source"])
    return found


def _mul(x, y):
    return x * 2 + y.sum()


def test_a_listed_tensor_is_dynamic_from_the_first_call_and_an_unlisted_one_specialises():
    y = torch.ones(3)
    calls = [(torch.randn(n), y) for n in (2, 3, 4)]
    assert _graphs(_mul, calls, dynamic_sources="L['x']") == 1
    assert _graphs(_mul, [*calls, (torch.randn(4), torch.ones(5))], dynamic_sources="L['x']") == 2
    assert _graphs(_mul, calls) == 2  # unlisted: automatic dynamic after the first change


def test_the_first_graph_takes_the_listed_size_as_a_symbol():
    cnt = CompileCounter()
    with torch.compiler.config.patch(dynamic_sources="L['x']"):
        stenograph.compile(_mul, backend=cnt)(torch.randn(5), torch.ones(3))
    assert _symbolic_placeholders(cnt) == ["L['x']"]


def test_a_dimension_suffix_makes_only_that_dimension_dynamic():
    def fn(x):
        return x.sum(0)

    same_width = [(torch.randn(n, 3),) for n in (2, 3, 4)]
    assert _graphs(fn, same_width, dynamic_sources="L['x']:0") == 1
    assert _graphs(fn, [*same_width, (torch.randn(4, 5),)], dynamic_sources="L['x']:0") == 2
    assert _graphs(fn, [*same_width, (torch.randn(4, 5),)], dynamic_sources="L['x']:0,L['x']:1") == 1


def test_regex_entries_match_from_the_start_of_the_name():
    def fn(x1, x2, y):
        return x1.sum() + x2.sum() + y.sum()

    calls = [(torch.randn(n), torch.randn(n + 1), torch.ones(3)) for n in (2, 3, 4)]
    assert _graphs(fn, calls, dynamic_sources=r"L\['x.*'\]") == 1
    # re.match anchors at the start: no match, automatic dynamic as without the setting
    assert _graphs(fn, calls, dynamic_sources=r"\['x.*'\]") == _graphs(fn, calls) == 2
    changing_y = [(torch.randn(2), torch.randn(3), torch.ones(n)) for n in (2, 3, 4)]
    assert _graphs(fn, changing_y, dynamic_sources=r"L\['x.*'\]") == 2


def test_listed_ints_are_dynamic_even_under_dynamic_false():
    def fn(n, x):
        return x * n

    calls = [(n, torch.randn(n)) for n in (2, 3, 4)]
    assert _graphs(fn, calls, dynamic=False, dynamic_sources="L['n'], L['x']") == 1
    assert _graphs(fn, calls, dynamic=False, dynamic_sources="L['x']") == 3  # n: a constant per value
    assert _graphs(fn, calls, dynamic=False) == 3


def _scale_by_global(x):
    return x * COUNT


def test_a_global_int_is_named_as_torch_names_it():
    def calls():
        global COUNT
        for n in (3, 4, 5):
            COUNT = n
            yield (torch.ones(2),)

    cnt = CompileCounter()
    try:
        with torch.compiler.config.patch(dynamic_sources="G['COUNT']"):
            compiled = stenograph.compile(_scale_by_global, backend=cnt)
            for args in calls():
                helpers.assert_same(compiled(*args), _scale_by_global(*args))
            assert helpers.count_torch_graphs(_scale_by_global, lambda c: [c(*a) for a in calls()]) == 1
    finally:
        globals()["COUNT"] = 3
    assert cnt.frame_count == 1


class _Scaled(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.fc = nn.Linear(width, 2)
        self.width = width

    def forward(self, x):
        return self.fc(x) * self.width


_MODULE_SOURCES = (
    "L['m']._modules['fc']._parameters['weight'],L['m']._modules['fc']._parameters['bias'],L['m'].width,L['x']"
)


def _apply(m, x):
    return m(x)


@pytest.mark.parametrize(("listed", "graphs"), [(_MODULE_SOURCES, 1), ("L['x']", 3)])
def test_module_parameters_and_int_attributes_listed_by_torch_name_override_static_shapes(listed, graphs):
    """Parameters and module int attributes stay static (force_parameter_static_shapes,
    force_nn_module_property_static_shapes) unless listed: then one graph for every width."""
    torch.manual_seed(0)
    calls = [(_Scaled(w), torch.randn(1, w)) for w in (5, 6, 7)]
    assert _graphs(_apply, calls, dynamic_sources=listed) == graphs


def test_mark_static_still_wins_over_a_listed_source():
    def fn(x):
        return x + 1

    def marked(n):
        x = torch.randn(n)
        stenograph.mark_static(x, 0)
        torch._dynamo.mark_static(x, 0)  # the same mark for the torch.compile peer
        return (x,)

    assert _graphs(fn, [marked(n) for n in (2, 3)], dynamic_sources="L['x']") == 2


def test_dynamic_sources_reach_the_functions_a_graph_break_resumes_in():
    def fn(x):
        x = x * 2
        torch._dynamo.graph_break()
        return x + 1

    assert _graphs(fn, [(torch.randn(n),) for n in (2, 3, 4)], dynamic_sources="L['x']") == 2


def test_sizes_and_ints_equal_to_a_sentinel_value_are_dynamic():
    def fn(x, n):
        return x.sum() * n

    sentinel_first = [(torch.randn(1111), 2222), (torch.randn(7), 9), (torch.randn(8), 10)]
    assert _graphs(fn, sentinel_first, dynamic_values="1111, 2222") == 1
    assert _graphs(fn, sentinel_first) == 2  # without the setting the first graph is static
    assert _graphs(fn, [(torch.randn(5), 3), (torch.randn(6), 3)], dynamic_values="1111") == 2


def test_a_sentinel_value_does_not_override_force_parameter_static_shapes():
    w = nn.Parameter(torch.randn(1111))
    v = nn.Parameter(torch.randn(1112))

    def fn(p):
        return p * 2

    assert _graphs(fn, [(w,), (v,)], dynamic_values="1111") == 2
    assert _graphs(fn, [(w,), (v,)], dynamic_sources="L['p']") == 1


class _Times(nn.Module):
    def __init__(self, k: int) -> None:
        super().__init__()
        self.k = k

    def forward(self, x):
        return x * self.k


def test_a_module_int_attribute_equal_to_a_sentinel_is_dynamic():
    """Unlike a parameter's size, an int module attribute equal to a sentinel is symbolic (torch
    asks about values before it keeps module ints constants): the later values reuse the graph."""
    calls = [(_Times(k), torch.ones(2)) for k in (1111, 1112, 1113)]
    assert _graphs(_apply, calls, dynamic_values="1111") == 1
    assert _graphs(_apply, calls) == 3


def test_an_entry_that_is_no_regex_is_an_invalid_config():
    with torch.compiler.config.patch(dynamic_sources="L['x'](,L['y']"):
        with pytest.raises(InvalidConfig, match=r"dynamic_sources: \"L\['x'\]\(\" is not a regex"):
            stenograph.compile(lambda x: x + 1)(torch.ones(2))


def test_sources_spell_their_torch_names():
    module = LocalSource("self")
    fc = ModuleMemberSource(module, "_modules", "fc")
    assert ModuleMemberSource(fc, "_parameters", "weight").torch_name() == (
        "L['self']._modules['fc']._parameters['weight']"
    )
    assert ModuleMemberSource(fc, "_parameters", "weight").name() == "L['self'].fc.weight"
    assert AttrSource(fc, "width").torch_name() == "L['self']._modules['fc'].width"
    assert ItemSource(ClosureSource(0, "sizes"), 1).torch_name() == "L['sizes'][1]"
    assert GlobalSource("COUNT", {"__name__": "pkg.mod"}).torch_name() == "G['COUNT']"
    assert IterationItemSource(fc, 2).torch_name() == "list(L['self']._modules['fc'])[2]"


def test_a_torch_without_a_setting_compiles_as_if_it_were_empty(monkeypatch, tmp_path):
    """torch 2.11 has `dynamic_sources` and `unbacked_sources` but no `dynamic_values`: every
    compile read it (sizes are checked against its sentinels) and raised AttributeError there,
    and so did the persisted cache's key. A setting this torch lacks counts as empty."""
    import types

    from stenograph.shapes import named_sources

    older = types.SimpleNamespace(dynamic_sources="", unbacked_sources="")
    monkeypatch.setattr(named_sources, "torch", types.SimpleNamespace(compiler=types.SimpleNamespace(config=older)))
    monkeypatch.setattr(stenograph.config, "cache_dir", str(tmp_path))
    cnt = stenograph.testing.CompileCounter()
    compiled = stenograph.compile(lambda x: x * 2 + 1, backend=cnt)
    for size in (3, 4, 5):
        helpers.assert_same(compiled(torch.ones(size)), torch.ones(size) * 2 + 1)
    assert cnt.frame_count == 2  # automatic dynamic shapes as usual
    assert ("dynamic_values", "") in named_sources.settings()
