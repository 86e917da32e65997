"""`stenograph.export(fn, dynamic_shapes=...)`: torch.export-style specs mapped onto dynamic
dimensions, the constraints reported, and what the code does not allow raised clearly."""

from __future__ import annotations

import pytest
import torch
from helpers import assert_same
from torch import nn
from torch.export import Dim

import stenograph
from stenograph.errors import ConstraintViolation


def _rows_times_count(x, y):
    return (x * x.shape[0]).sum(1) + y.mean()


def test_a_named_dim_gives_one_graph_for_its_whole_range():
    batch = Dim("batch", min=2, max=64)
    x, y = torch.randn(5, 3), torch.randn(4)
    gm, guards = stenograph.export(_rows_times_count, dynamic_shapes={"x": {0: batch}, "y": None})(x, y)
    assert guards.constraints == ["L['x'].size()[0]: batch in [2, 64]"]
    for rows in (2, 9, 64):
        other = torch.randn(rows, 3)
        assert guards.check(other, y)
        assert_same(gm(other, y), _rows_times_count(other, y))
    assert not guards.check(torch.randn(65, 3), y)  # outside the declared range
    assert not guards.check(torch.randn(5, 4), y)  # an undeclared dimension stays static
    assert not guards.check(x, torch.randn(5))
    assert any("<= 64" in text for text in guards)
    assert not hasattr(x, "_stenograph_dynamic_dims")  # the caller's tensor is not marked


def test_tuple_specs_by_parameter_and_by_dimension_and_nested_arguments():
    def f(pair, scale):
        return pair[0] @ pair[1] * scale

    n = Dim("n")
    args = ([torch.randn(4, 3), torch.randn(3, 6)], 2.0)
    gm, guards = stenograph.export(f, dynamic_shapes=(((n, None), (None, Dim.DYNAMIC)), None))(*args)
    assert guards.constraints == [
        "L['pair'][0].size()[0]: n in [2, inf]",
        "L['pair'][1].size()[1]: Dim.DYNAMIC in [2, inf]",
    ]
    other = ([torch.randn(7, 3), torch.randn(3, 2)], 2.0)
    assert guards.check(*other)
    assert_same(gm(*other), f(*other))


def test_a_module_forward_is_specified_by_its_own_parameter_names():
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    gm, guards = stenograph.export(model, aten_graph=True, dynamic_shapes={"input": {0: Dim("batch")}})(
        torch.randn(3, 4)
    )
    for rows in (2, 11):
        x = torch.randn(rows, 4)
        assert guards.check(x)
        assert_same(gm(x), model(x))


def test_auto_dims_may_be_specialised_and_say_so():
    def f(x):
        return x.view(2, -1) if x.shape[0] == 8 else x

    gm, guards = stenograph.export(f, dynamic_shapes={"x": {0: Dim.AUTO}})(torch.randn(8))
    assert guards.constraints == ["L['x'].size()[0]: Dim.AUTO specialised to 8"]
    assert guards.check(torch.randn(8)) and not guards.check(torch.randn(6))


def test_a_dim_the_code_specialises_raises_naming_it():
    def f(x):
        return x.view(2, -1) if x.shape[0] == 8 else x

    for dim in (Dim("length"), Dim.DYNAMIC):
        with pytest.raises(
            ConstraintViolation,
            match=r"L\['x'\].size\(\)\[0\] \((length|Dim.DYNAMIC)\) must stay dynamic, "
            "but the code specialised it to 8",
        ):
            stenograph.export(f, dynamic_shapes={"x": {0: dim}})(torch.randn(8))


def test_an_example_of_size_one_cannot_stay_dynamic():
    with pytest.raises(ConstraintViolation, match=r"is 1 in the example, and sizes 0 and 1 are always specialised"):
        stenograph.export(_rows_times_count, dynamic_shapes={"x": {0: Dim("rows")}})(torch.randn(1, 3), torch.randn(4))


def test_a_range_the_code_narrows_raises_with_the_range_it_handles():
    def f(x, table):
        return x + table[: x.shape[0]].sum()

    with pytest.raises(ConstraintViolation, match=r"declared in \[2, 100\], but the code only handles \[2, 10\]"):
        stenograph.export(f, dynamic_shapes={"x": {0: Dim("n", max=100)}, "table": None})(
            torch.randn(4), torch.randn(10)
        )
    gm, guards = stenograph.export(f, dynamic_shapes={"x": {0: Dim("n", max=10)}, "table": None})(
        torch.randn(4), torch.randn(10)
    )
    assert guards.constraints == ["L['x'].size()[0]: n in [2, 10]"]


def test_dims_the_code_ties_together_must_be_one_dim():
    def add(x, y):
        return x + y

    args = (torch.randn(4), torch.randn(4))
    with pytest.raises(ConstraintViolation, match=r"\(b\) must equal L\['x'\].size\(\)\[0\] \(a\).*one Dim"):
        stenograph.export(add, dynamic_shapes={"x": {0: Dim("a")}, "y": {0: Dim("b")}})(*args)
    same = Dim("same")
    gm, _ = stenograph.export(add, dynamic_shapes={"x": {0: same}, "y": {0: same}})(*args)
    other = (torch.randn(9), torch.randn(9))
    assert_same(gm(*other), add(*other))


@pytest.mark.parametrize(
    ("spec", "error", "match"),
    [
        ({"z": None}, ValueError, r"names 'z', which the function does not take \(its parameters: x, y\)"),
        ((None,), ValueError, "has 1 entries but the function takes 2 parameters"),
        ({"x": {2: Dim("a")}}, ValueError, r"names dimension 2 of L\['x'\], which has 2 dimensions"),
        ({"x": (Dim("a"),)}, ValueError, r"gives 1 dimension specs for L\['x'\], which has 2 dimensions"),
        ({"x": {0: 4}}, ValueError, r"says L\['x'\].size\(\)\[0\] is 4, but the example's size is 5"),
        ({"x": {0: "batch"}}, TypeError, "use torch.export.Dim"),
        ({"x": Dim("a")}, ValueError, "give a dict {dim: Dim} or a tuple"),
        ({"x": {0: 2 * Dim("half")}}, NotImplementedError, "derived dim 2\\*half"),
        ({"x": {0: Dim("a", min=8)}}, ConstraintViolation, r"is 5 in the example, outside the range \[8, None\]"),
        ([{"x": None}], ValueError, "has 1 entries"),
        ("x", TypeError, "takes a dict by parameter name or a tuple, got str"),
    ],
)
def test_specs_that_do_not_fit_the_arguments_are_refused(spec, error, match):
    with pytest.raises(error, match=match):
        stenograph.export(_rows_times_count, dynamic_shapes=spec)(torch.randn(5, 3), torch.randn(4))


def test_a_spec_for_something_not_a_tensor_is_refused():
    def f(x, n):
        return x * n

    with pytest.raises(ValueError, match=r"gives \{0: Dim\('a'.*\} for L\['n'\], a int: a spec must follow"):
        stenograph.export(f, dynamic_shapes={"n": {0: Dim("a")}})(torch.randn(3), 2)


def test_dynamic_and_dynamic_shapes_together_are_refused():
    with pytest.raises(TypeError, match="takes dynamic= or dynamic_shapes=, not both"):
        stenograph.export(_rows_times_count, dynamic=True, dynamic_shapes={"x": None})


def _odd_branch(x):
    if (2 * x.shape[0] + 3) % (x.shape[0] - 3) == 0:  # true for some sizes only
        return x + 1
    return x - 1


def _even_branch(x):
    if (2 * x.shape[0] + 2) % (x.shape[0] + 1) == 0:  # true for every size
        return x + 1
    return x - 1


def test_a_guard_some_declared_sizes_fail_raises():
    # the exported graph checks no guard: it would take the example's branch for size 20 too
    with pytest.raises(ConstraintViolation, match=r"not every value of d .* satisfies the code's guard"):
        stenograph.export(_odd_branch, dynamic_shapes={"x": {0: Dim("d", max=100)}})(torch.zeros(12))


def test_a_guard_every_declared_size_passes_exports():
    gm, _ = stenograph.export(_even_branch, dynamic_shapes={"x": {0: Dim("d", max=100)}})(torch.zeros(12))
    for size in (2, 20, 100):
        assert_same(gm(torch.zeros(size)), _even_branch(torch.zeros(size)))
