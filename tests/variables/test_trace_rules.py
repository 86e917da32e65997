"""The trace policy (`stenograph.variables.trace_rules`): each rule answers as tracing relies on."""

from __future__ import annotations

import ast
import collections
import logging
import math
from pathlib import Path

import pytest
import torch
from torch import nn

import stenograph
from stenograph.variables import trace_rules as rules


def user_function(x):
    return x + 1


class UserClass:
    pass


class UserModule(nn.Module):
    pass


Point = collections.namedtuple("Point", "x y")


@pytest.mark.parametrize(
    "fn",
    [torch.add, torch.sin, torch.ops.aten.add.Tensor, torch.ops.aten.add, torch.nn.functional.relu, torch.fft.fft,
     torch._C._nn.linear, torch.linalg.norm],
)  # fmt: skip
def test_graph_ops(fn) -> None:
    assert rules.is_graph_op(fn)


@pytest.mark.parametrize(
    "fn",
    [torch.manual_seed, torch.seed, torch.set_grad_enabled, torch.get_rng_state, torch.save, math.sqrt,
     user_function, print, torch.Tensor.add, nn.Linear, torch.nn.functional._canonical_mask,
     torch.nn.functional._none_or_dtype],
)  # fmt: skip
def test_not_graph_ops(fn) -> None:
    assert not rules.is_graph_op(fn)


@pytest.mark.parametrize("with_mask", [False, True])
def test_private_functional_helpers_are_inlined(with_mask) -> None:
    """`nn.TransformerEncoderLayer` calls `F._canonical_mask` and `F._none_or_dtype` itself: with
    no mask they fold away (no node returning None), with a padding mask their operations are in
    the graph; the result is eager's either way."""
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
    x = torch.randn(2, 5, 16)
    mask = torch.tensor([[False] * 5, [False] * 3 + [True] * 2]) if with_mask else None
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    compiled = stenograph.compile(layer, backend=backend)
    torch.testing.assert_close(compiled(x, src_key_padding_mask=mask), layer(x, src_key_padding_mask=mask))
    assert len(graphs) == 1
    targets = {getattr(n.target, "__name__", str(n.target)) for n in graphs[0].graph.nodes if n.op == "call_function"}
    assert not targets & {"_canonical_mask", "_none_or_dtype"}
    assert ("masked_fill_" in str(graphs[0].code)) is with_mask


def test_stateful_torch_is_never_a_graph_op() -> None:
    assert {"manual_seed", "set_rng_state", "set_default_device", "synchronize"} <= rules.STATEFUL_TORCH
    assert not rules.is_graph_op(torch.set_num_threads)  # a torch C function, but stateful


@pytest.mark.parametrize(
    ("fn", "library"),
    [
        (logging.getLogger, "logging"),
        (stenograph.reset, "stenograph"),
        (torch.optim.Optimizer.zero_grad, "torch._compile"),  # torch._disable_dynamo's wrapper
        (torch.optim.lr_scheduler.StepLR.step, "torch.optim.lr_scheduler"),
        (torch.optim.Adam.step, None),  # an optimizer's step is traced (variables/optimizers.py)
        (torch.autograd.grad, "torch.autograd"),
        (torch.autograd.backward, "torch.autograd"),
        (torch.func.grad, "torch.func"),
        (torch._dynamo.reset, "torch._dynamo"),
        (user_function, None),
        (torch.nn.functional.relu, None),
        (torch.no_grad.__enter__, None),  # grad_mode is modelled
    ],
)
def test_untraced_libraries(fn, library) -> None:
    assert rules.untraced_library(fn) == library
    assert rules.is_untraced_library(fn) is (library is not None)


def test_an_lr_schedulers_wrapper_of_step_is_traced() -> None:
    """A scheduler replaces `opt.step` by a wrapper of its own module (untraced) that marks the
    step as called; tracing it captures the step inside."""
    opt = torch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=0.1)
    torch.optim.lr_scheduler.StepLR(opt, step_size=1)
    assert rules.untraced_library(opt.step) is None
    assert rules.untraced_library(torch.optim.lr_scheduler.StepLR.get_lr) == "torch.optim.lr_scheduler"


def test_tensor_methods() -> None:
    assert rules.is_tensor_method(torch.Tensor.add)
    assert rules.is_tensor_method(torch.Tensor.__add__)
    assert not rules.is_tensor_method(torch.add)
    assert not rules.is_tensor_method(user_function)


def test_trusted_modules() -> None:
    for name in ("torch", "torch.nn.functional", "math", "operator", "builtins"):
        assert rules.is_trusted_module(name)
    for name in ("torchvision", "mymodel", "__main__", "numpy"):
        assert not rules.is_trusted_module(name)


def test_classes() -> None:
    assert rules.is_user_class(UserClass)
    assert rules.is_user_class(UserModule)
    assert rules.is_user_class(ValueError)  # exceptions are raised and caught in traced code
    assert not rules.is_user_class(dict)
    assert not rules.is_user_class(nn.Linear)
    assert not rules.is_user_class(torch.Size)
    assert rules.is_torch_module_class(nn.Linear)
    assert not rules.is_torch_module_class(UserModule)
    assert torch.Size in rules.TORCH_CLASSES and torch.no_grad in rules.TORCH_CLASSES


@pytest.mark.parametrize(
    "value", [1, 2.5, True, "a", b"b", None, ..., torch.float32, torch.device("cpu"), range(3), slice(1), (1, (2.0,))]
)
def test_literals(value) -> None:
    assert rules.is_literal(value)


@pytest.mark.parametrize("value", [[1], {"a": 1}, object(), Point(1, 2), (1, [2]), torch.Size([1]), user_function])
def test_not_literals(value) -> None:
    assert not rules.is_literal(value)


def test_trace_time_constants() -> None:
    assert rules.trace_constant(torch.is_grad_enabled) is torch.is_grad_enabled
    assert rules.trace_constant(torch.jit.is_scripting)() is False
    assert rules.trace_constant(torch.add) is None
    assert rules.is_state_reader(torch._C._get_tracing_state)
    assert rules.is_state_reader(torch.is_grad_enabled)
    assert not rules.is_state_reader(torch._C._set_grad_enabled)


def test_builtins() -> None:
    assert len in rules.BUILTIN_PURE and isinstance in rules.BUILTIN_PURE
    assert print not in rules.BUILTIN_PURE
    assert rules.BUILTIN_REFUSED[print] == "call to print"
    assert id not in rules.BUILTIN_REFUSED  # modelled: the real id, guarded by identity
    assert rules.is_dict_key_constant(int) and not rules.is_dict_key_constant([])


def test_tensor_tables() -> None:
    assert "dtype" in rules.TENSOR_METADATA and "shape" not in rules.TENSOR_METADATA
    assert "T" in rules.TENSOR_PROPERTIES
    assert "size" in rules.TENSOR_METADATA_METHODS
    assert "storage_offset" in rules.TENSOR_GUARDED_METADATA_METHODS
    assert rules.TENSOR_DATA_METHODS["item"] == "Tensor.item() reads the tensor's value"


def test_policy_tables_live_only_in_trace_rules() -> None:
    """No other module of the package keeps a module-level table of the policy's names."""
    root = Path(stenograph.__file__).parent
    names = {n for n in vars(rules) if n.isupper()}
    old = {"_NOT_TRACED", "_NOT_TRACED_TORCH", "_NOT_TRACED_AUTOGRAD", "_TORCH_OP_MODULES", "_STATEFUL_TORCH",
           "_PURE", "_REFUSED", "_TORCH_CLASSES", "_LITERALS", "_DATA_METHODS", "_METADATA_METHODS"}  # fmt: skip
    defined = []
    for path in sorted(root.rglob("*.py")):
        if path.name == "trace_rules.py":
            continue
        for node in ast.parse(path.read_text()).body:
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            for target in targets:
                if isinstance(target, ast.Name) and target.id in names | old:
                    defined.append(f"{path.relative_to(root)}: {target.id}")
    assert not defined, defined
