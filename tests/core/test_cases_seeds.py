"""BEHAVIOUR.md seed cases 1, 2, 3, 4, 9, 10, 11 and 15, plus the eager fallback for print/item."""

from __future__ import annotations

import os
import re
import warnings

import pytest
import torch
import torch.nn.functional as F
from helpers import assert_same, call_nodes, line_of, op_name, placeholders
from torch import nn

import stenograph
from stenograph.errors import Unsupported

# ---------------------------------------------------------------------------------------------
# case 1: linearised tracing


def test_case1_linearised_graph_sub_pow_sum(cnt):
    """Case 1: `(x - y) ** 2` then `.sum()` is one graph of exactly sub, pow, sum."""

    def mse(x, y):
        z = (x - y) ** 2
        return z.sum()

    x, y = torch.randn(200), torch.randn(200)
    out = stenograph.compile(mse, backend=cnt)(x, y)
    assert_same(out, mse(x, y))
    assert cnt.frame_count == 1
    assert cnt.op_count == 3
    (gm,) = cnt.graphs
    assert [op_name(n) for n in call_nodes(gm)] == ["sub", "pow", "sum"]
    assert len(placeholders(gm)) == 2


# ---------------------------------------------------------------------------------------------
# case 2: constant specialisation and guards


def _seed_fn(x, n):
    y = x**2
    if n >= 0:
        return (n + 1) * y
    else:
        return y / n


def test_case2_int_argument_is_specialised_to_a_constant(cnt):
    """Case 2: fn(x, 2) captures `3 * y` with n folded away (no placeholder for n)."""
    x = torch.randn(200)
    out = stenograph.compile(_seed_fn, backend=cnt)(x, 2)
    assert_same(out, _seed_fn(x, 2))
    assert cnt.frame_count == 1
    (gm,) = cnt.graphs
    assert len(placeholders(gm)) == 1, gm.code
    assert any(3 in node.args for node in call_nodes(gm)), gm.code
    assert not any(op_name(n) in ("truediv", "div") for n in call_nodes(gm)), gm.code


def test_case2_guards_reuse_recompile_and_other_branch(cnt):
    """Case 2: same n reuses; a new n recompiles; a negative n compiles the division branch."""
    x = torch.randn(200)
    fn = stenograph.compile(_seed_fn, backend=cnt)

    assert_same(fn(x, 2), _seed_fn(x, 2))
    assert cnt.frame_count == 1
    assert_same(fn(x, 2), _seed_fn(x, 2))
    assert cnt.frame_count == 1

    assert_same(fn(x, 3), _seed_fn(x, 3))
    assert cnt.frame_count == 2

    assert_same(fn(x, -2), _seed_fn(x, -2))
    assert cnt.frame_count == 3
    names = [op_name(n) for n in call_nodes(cnt.graphs[-1])]
    assert any(name in ("truediv", "div", "true_divide", "divide") for name in names), names

    # every cached entry still answers correctly, whatever the cache ends up holding
    for n in (2, 3, -2, 7, -5, 0):
        assert_same(fn(x, n), _seed_fn(x, n))


# ---------------------------------------------------------------------------------------------
# case 3: tensor guards


def _sin_plus_one(x):
    return x.sin() + 1


def test_case3_same_shape_compiles_once(cnt):
    """Case 3: two calls with randn(10) compile once."""
    fn = stenograph.compile(_sin_plus_one, backend=cnt)
    a, b = torch.randn(10), torch.randn(10)
    assert_same(fn(a), _sin_plus_one(a))
    assert_same(fn(b), _sin_plus_one(b))
    assert cnt.frame_count == 1


def test_case3_new_shape_recompiles(cnt):
    """Case 3: randn(20) after randn(10) fails the shape guard and recompiles."""
    fn = stenograph.compile(_sin_plus_one, backend=cnt)
    a, b = torch.randn(10), torch.randn(20)
    assert_same(fn(a), _sin_plus_one(a))
    assert cnt.frame_count == 1
    out = fn(b)
    assert out.shape == (20,)
    assert_same(out, _sin_plus_one(b))
    assert cnt.frame_count == 2


def test_case3_dtype_change_recompiles(cnt):
    """Case 3: a float64 input after a float32 one recompiles and keeps float64."""
    fn = stenograph.compile(_sin_plus_one, backend=cnt)
    a = torch.randn(10)
    b = torch.randn(10, dtype=torch.float64)
    assert_same(fn(a), _sin_plus_one(a))
    out = fn(b)
    assert out.dtype == torch.float64
    assert_same(out, _sin_plus_one(b))
    assert cnt.frame_count == 2


def test_case3_requires_grad_change_recompiles(cnt):
    """Case 3: a requires_grad input after a plain one recompiles; the output carries grad."""
    fn = stenograph.compile(_sin_plus_one, backend=cnt)
    a = torch.randn(10)
    b = torch.randn(10, requires_grad=True)
    assert_same(fn(a), _sin_plus_one(a))
    out = fn(b)
    assert out.requires_grad
    assert_same(out, _sin_plus_one(b))
    assert cnt.frame_count == 2
    out.sum().backward()
    torch.testing.assert_close(b.grad, b.detach().cos())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_case3_device_change_recompiles(cnt):
    """Case 3: the same shape on another device recompiles and runs there."""
    fn = stenograph.compile(_sin_plus_one, backend=cnt)
    a = torch.randn(10)
    b = a.cuda()
    assert_same(fn(a), _sin_plus_one(a))
    out = fn(b)
    assert out.device == b.device
    assert_same(out, _sin_plus_one(b))
    assert cnt.frame_count == 2


# ---------------------------------------------------------------------------------------------
# case 4: value guards on str and bool arguments


def _by_mode(x, mode):
    if mode == "train":
        return x * 2
    return x - 1


def _by_flag(x, flag):
    if flag:
        return x + 10
    return x.neg()


def test_case4_string_argument_one_graph_per_value(cnt):
    """Case 4: `mode == "train"` gives one graph per string value, reused on repeat."""
    fn = stenograph.compile(_by_mode, backend=cnt)
    x = torch.randn(5)
    expected_counts = [("train", 1), ("train", 1), ("eval", 2), ("eval", 2), ("train", 2)]
    for mode, count in expected_counts:
        assert_same(fn(x, mode), _by_mode(x, mode))
        assert cnt.frame_count == count, mode
    assert_same(fn(x, "test"), _by_mode(x, "test"))
    assert cnt.frame_count == 3


def test_case4_bool_argument_one_graph_per_value(cnt):
    """Case 4: `if flag:` gives one graph per bool value, reused on repeat."""
    fn = stenograph.compile(_by_flag, backend=cnt)
    x = torch.randn(5)
    for flag, count in [(True, 1), (True, 1), (False, 2), (False, 2), (True, 2)]:
        assert_same(fn(x, flag), _by_flag(x, flag))
        assert cnt.frame_count == count, flag


# ---------------------------------------------------------------------------------------------
# case 9: fullgraph=True


def test_case9_fullgraph_clean_function_one_graph(cnt):
    """Case 9: linear -> gelu -> sum under fullgraph=True compiles to one graph of 3 ops."""

    def fn(x, w, b):
        return F.gelu(F.linear(x, w, b)).sum()

    x, w, b = torch.randn(4, 8), torch.randn(6, 8), torch.randn(6)
    out = stenograph.compile(fn, backend=cnt, fullgraph=True)(x, w, b)
    assert_same(out, fn(x, w, b))
    assert cnt.frame_count == 1
    assert cnt.op_count == 3


def _prints_in_the_middle(x):
    x = x * 2
    print("fullgraph-debug:", x)
    return torch.relu(x)


def test_case9_fullgraph_print_raises_unsupported(cnt, capsys):
    """Case 9: print under fullgraph=True raises Unsupported naming print, file and line."""
    fn = stenograph.compile(_prints_in_the_middle, backend=cnt, fullgraph=True)
    with pytest.raises(Unsupported) as excinfo:
        fn(torch.randn(4))
    message = str(excinfo.value)
    assert "print" in message
    assert os.path.basename(__file__) in message
    lineno = line_of(_prints_in_the_middle, "print(")
    assert re.search(rf"\b{lineno}\b", message), (lineno, message)
    assert "fullgraph-debug" not in capsys.readouterr().out
    assert cnt.frame_count == 0
    # a second call raises again instead of silently running eagerly
    with pytest.raises(Unsupported):
        fn(torch.randn(4))


def _item_branch(x):
    if x.sum().item() > 0:
        return x + 1
    return x - 1


def test_fullgraph_item_raises_unsupported(cnt):
    """fullgraph=True: data-dependent `.item()` raises Unsupported naming item and the line."""
    fn = stenograph.compile(_item_branch, backend=cnt, fullgraph=True)
    with pytest.raises(Unsupported) as excinfo:
        fn(torch.ones(3))
    message = str(excinfo.value)
    assert "item" in message
    assert os.path.basename(__file__) in message
    assert re.search(rf"\b{line_of(_item_branch, '.item()')}\b", message), message


# ---------------------------------------------------------------------------------------------
# print / item without fullgraph: eager results and output (graph break or eager frame)


def test_print_without_fullgraph_matches_eager_output(cnt, capsys):
    """print inside a compiled function: same result as eager, printed once per call, in order."""
    fn = stenograph.compile(_prints_in_the_middle, backend=cnt)
    x = torch.randn(4)
    capsys.readouterr()
    expected = _prints_in_the_middle(x)
    eager_text = capsys.readouterr().out
    assert eager_text.count("fullgraph-debug:") == 1
    for _ in range(2):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = fn(x)
        assert capsys.readouterr().out == eager_text
        assert_same(out, expected)


def test_item_without_fullgraph_matches_eager(cnt):
    """`.item()` in a branch condition: both branches give eager results without fullgraph."""
    fn = stenograph.compile(_item_branch, backend=cnt)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for x in (torch.ones(3), -torch.ones(3), torch.ones(3), torch.tensor([1.0, -5.0])):
            assert_same(fn(x), _item_branch(x))


# ---------------------------------------------------------------------------------------------
# case 10: recompile limit


def _times_n(x, n):
    return x * n


def _unrolled(x, n):
    for _ in range(n):
        x = x + 1
    return x * 2


def _limit_warnings(records) -> list:
    return [w for w in records if "limit" in str(w.message).lower()]


def _run_past_the_limit(fn, eager_fn, x, values):
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        for n in values:
            assert_same(fn(x, n), eager_fn(x, n))
    return records


def test_case10_recompile_limit_with_static_ints(cnt):
    """Case 10: 12 distinct specialised ints compile exactly recompile_limit graphs, warn once."""
    assert stenograph.config.recompile_limit == 8
    x = torch.randn(6)
    with stenograph.config.patch(automatic_dynamic_shapes=False):
        fn = stenograph.compile(_times_n, backend=cnt)
        records = _run_past_the_limit(fn, _times_n, x, range(12))
        assert cnt.frame_count == stenograph.config.recompile_limit
        assert len(_limit_warnings(records)) == 1, [str(w.message) for w in records]
        # past the limit: old and new values run (eagerly or cached), no compile, no new warning
        frames = cnt.frame_count
        records = _run_past_the_limit(fn, _times_n, x, [0, 3, 11, 12, 40, 5])
        assert cnt.frame_count == frames
        assert _limit_warnings(records) == []


def test_case10_recompile_limit_with_default_config(cnt):
    """Case 10 (default config): ints that must stay specialised (range) hit the limit once."""
    x = torch.randn(6)
    fn = stenograph.compile(_unrolled, backend=cnt)
    records = _run_past_the_limit(fn, _unrolled, x, range(12))
    assert cnt.frame_count == stenograph.config.recompile_limit
    assert len(_limit_warnings(records)) == 1, [str(w.message) for w in records]
    frames = cnt.frame_count
    records = _run_past_the_limit(fn, _unrolled, x, [2, 11, 13, 1])
    assert cnt.frame_count == frames
    assert _limit_warnings(records) == []


def test_case10_x_times_n_default_config_stays_within_limit(cnt):
    """Case 10 (default config): `x * n` for 12 ints never compiles more than the limit."""
    x = torch.randn(6)
    fn = stenograph.compile(_times_n, backend=cnt)
    records = _run_past_the_limit(fn, _times_n, x, range(12))
    assert cnt.frame_count == 2  # 0 static, then one graph with n symbolic
    assert len(_limit_warnings(records)) <= 1


@pytest.mark.parametrize("key", ["recompile_limit", "cache_size_limit"])
def test_case10_patched_limit_is_respected(cnt, key):
    """Case 10: a patched limit (either name) caps the number of graphs and warns once."""
    x = torch.randn(6)
    with stenograph.config.patch(automatic_dynamic_shapes=False, **{key: 3}):
        fn = stenograph.compile(_times_n, backend=cnt)
        records = _run_past_the_limit(fn, _times_n, x, range(7))
        assert cnt.frame_count == 3
        assert len(_limit_warnings(records)) == 1


# ---------------------------------------------------------------------------------------------
# case 11: three usage forms


def test_case11_decorator_with_arguments(cnt):
    """Case 11: `@stenograph.compile(backend=...)` compiles the decorated function."""

    @stenograph.compile(backend=cnt)
    def fn(x, y):
        return torch.sin(x) + torch.cos(y)

    x, y = torch.randn(3, 3), torch.randn(3, 3)
    assert_same(fn(x, y), torch.sin(x) + torch.cos(y))
    assert cnt.frame_count == 1


def test_case11_bare_decorator_wraps_without_compiling_yet():
    """Case 11: bare `@stenograph.compile` returns a callable wrapper named like the function.

    (Not called: the default backend is inductor, which this suite does not run.)
    """

    def fn(x):
        return x + 1

    wrapped = stenograph.compile(fn)
    assert callable(wrapped)
    assert wrapped is not fn
    assert wrapped.__name__ == "fn"


def test_case11_explicit_call(cnt):
    """Case 11: `stenograph.compile(fn, backend=...)` compiles; fn itself is unchanged."""

    def fn(x):
        return torch.relu(x) * 3

    compiled = stenograph.compile(fn, backend=cnt)
    x = torch.randn(8)
    assert_same(compiled(x), torch.relu(x) * 3)
    assert cnt.frame_count == 1
    # the original function still runs eagerly
    assert_same(fn(x), torch.relu(x) * 3)
    assert cnt.frame_count == 1


def test_case11_nn_module_linear(cnt):
    """Case 11: compiling nn.Linear(128, 64) keeps state_dict keys, parameters and outputs."""
    model = nn.Linear(128, 64)
    compiled = stenograph.compile(model, backend=cnt)
    assert isinstance(compiled, nn.Module)
    assert list(compiled.state_dict()) == list(model.state_dict()) == ["weight", "bias"]
    for key, value in compiled.state_dict().items():
        assert value.data_ptr() == model.state_dict()[key].data_ptr(), key
    params_c, params_m = list(compiled.parameters()), list(model.parameters())
    assert len(params_c) == len(params_m) == 2
    assert all(a is b for a, b in zip(params_c, params_m))
    assert compiled.weight is model.weight
    assert compiled.in_features == 128 and compiled.out_features == 64

    x = torch.randn(4, 128)
    assert_same(compiled(x), model(x))
    assert cnt.frame_count == 1

    compiled.eval()
    assert model.training is False
    compiled.train()
    assert model.training is True


# ---------------------------------------------------------------------------------------------
# case 15: reset() and disable()


def test_case15_reset_clears_the_cache(cnt):
    """Case 15: after reset() the next call compiles again; results stay correct."""

    def fn(x):
        return x.cos() * 2

    compiled = stenograph.compile(fn, backend=cnt)
    x = torch.randn(4)
    compiled(x)
    compiled(x)
    assert cnt.frame_count == 1
    stenograph.reset()
    assert_same(compiled(x), fn(x))
    assert cnt.frame_count == 2
    compiled(x)
    assert cnt.frame_count == 2


def test_case15_reset_clears_module_cache(cnt):
    """Case 15: reset() also clears the cache of a compiled nn.Module."""
    model = nn.Linear(4, 2)
    compiled = stenograph.compile(model, backend=cnt)
    x = torch.randn(3, 4)
    compiled(x)
    assert cnt.frame_count == 1
    stenograph.reset()
    assert_same(compiled(x), model(x))
    assert cnt.frame_count == 2


def test_case15_reset_clears_recompile_limit_state(cnt):
    """Case 15: a function that hit the recompile limit compiles again after reset()."""
    x = torch.randn(3)
    with stenograph.config.patch(recompile_limit=1, automatic_dynamic_shapes=False):
        fn = stenograph.compile(_times_n, backend=cnt)
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            fn(x, 1)
            fn(x, 2)  # over the limit: eager
        assert cnt.frame_count == 1
        stenograph.reset()
        assert_same(fn(x, 2), _times_n(x, 2))
        assert cnt.frame_count == 2


def test_case15_disable_runs_eagerly_inside_compiled_code(cnt):
    """Case 15: a disable()d helper called from a compiled function runs eagerly, once per call."""
    seen: list[bool] = []

    @stenograph.disable
    def helper(t):
        seen.append(stenograph.is_compiling())
        return t + 1

    def outer(x):
        return helper(x * 2) * 3

    compiled = stenograph.compile(outer, backend=cnt)
    x = torch.randn(5)
    expected = (x * 2 + 1) * 3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_same(compiled(x), expected)
        assert_same(compiled(x), expected)
    assert seen == [False, False]


def test_case15_disable_direct_call_is_plain_eager():
    """Case 15: calling a disable()d function directly runs its body eagerly."""
    seen: list[bool] = []

    def fn(x):
        seen.append(stenograph.is_compiling())
        return x * 4

    x = torch.randn(3)
    assert_same(stenograph.disable(fn)(x), x * 4)
    assert seen == [False]
