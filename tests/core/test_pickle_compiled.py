"""Pickling a compiled module (`pickle.dumps`, `torch.save`) saves the original module and the
arguments of compile(); the loaded module is compiled again, lazily, as torch.compile's are."""

from __future__ import annotations

import copy
import io
import pickle

import pytest
import torch
from helpers import assert_same
from torch import nn

import stenograph
from stenograph.testing import CompileCounter


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.register_buffer("offset", torch.arange(3.0))
        self.scale = 2.0

    def forward(self, x):
        return torch.relu(self.fc(x)) * self.scale + self.offset


class Printing(nn.Module):
    def forward(self, x):
        print("inside")
        return x + 1


# a module-level backend pickles by reference; its graphs are counted in GRAPHS
GRAPHS: list[torch.fx.GraphModule] = []


def recording_backend(gm, example_inputs):
    GRAPHS.append(gm)
    return gm.forward


def test_pickle_round_trip_compiles_the_loaded_module_again():
    GRAPHS.clear()
    model = Net()
    compiled = stenograph.compile(model, backend=recording_backend, dynamic=False)
    x = torch.randn(2, 4)
    assert_same(compiled(x), model(x))
    assert len(GRAPHS) == 1

    loaded = pickle.loads(pickle.dumps(compiled))
    assert isinstance(loaded, stenograph.OptimizedModule)
    assert loaded._orig_mod is not model
    assert len(GRAPHS) == 1  # nothing compiled by loading (lazy)
    assert_same(loaded(x), model(x))
    assert len(GRAPHS) == 1  # instances of one class share compiled code (guarded by class)
    stenograph.reset()
    loaded = pickle.loads(pickle.dumps(compiled))
    assert_same(loaded(x), model(x))
    assert len(GRAPHS) == 2  # after a reset, its first call compiles it
    assert_same(loaded(x), model(x))
    assert len(GRAPHS) == 2
    assert loaded._compile_spec == compiled._compile_spec


def test_torch_save_and_load_keep_state_dict_keys_and_values():
    model = Net()
    compiled = stenograph.compile(model, backend="eager")
    x = torch.randn(5, 4)
    expected = model(x)
    buffer = io.BytesIO()
    torch.save(compiled, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    assert isinstance(loaded, stenograph.OptimizedModule)
    assert list(loaded.state_dict()) == list(model.state_dict()) == ["offset", "fc.weight", "fc.bias"]
    assert_same(dict(loaded.state_dict()), dict(model.state_dict()))
    assert_same(loaded(x), expected)
    assert loaded.scale == 2.0


def test_state_dict_saved_from_a_compiled_module_loads_into_a_plain_one():
    compiled = stenograph.compile(Net(), backend="eager")
    buffer = io.BytesIO()
    torch.save(compiled.state_dict(), buffer)
    buffer.seek(0)
    plain = Net()
    plain.load_state_dict(torch.load(buffer))
    assert_same(dict(plain.state_dict()), dict(compiled.state_dict()))


def test_compile_arguments_survive_the_round_trip():
    """fullgraph, dynamic, mode and a backend by name come back: fullgraph still raises."""

    compiled = stenograph.compile(Printing(), backend="eager", fullgraph=True, dynamic=True)
    loaded = pickle.loads(pickle.dumps(compiled))
    assert loaded._compile_spec.fullgraph is True and loaded._compile_spec.dynamic is True
    with pytest.raises(stenograph.Unsupported, match="print"):
        loaded(torch.randn(2))


def test_unpicklable_backend_raises_a_clear_error():
    compiled = stenograph.compile(Net(), backend=lambda gm, ex: gm.forward)
    with pytest.raises((pickle.PicklingError, AttributeError, TypeError), match="lambda"):
        pickle.dumps(compiled)


def test_deepcopy_keeps_the_backend_object_and_copies_the_weights():
    counter = CompileCounter()
    model = Net()
    compiled = stenograph.compile(model, backend=counter)
    clone = copy.deepcopy(compiled)
    assert isinstance(clone, stenograph.OptimizedModule)
    assert clone._orig_mod.fc.weight is not model.fc.weight
    x = torch.randn(2, 4)
    assert_same(clone(x), model(x))
    assert counter.frame_count == 1
    with torch.no_grad():
        clone._orig_mod.fc.weight.add_(1.0)
    assert not torch.equal(clone._orig_mod.fc.weight, model.fc.weight)
