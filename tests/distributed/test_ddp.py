"""DistributedDataParallel on 2 gloo processes: `compile(DDP(model))` and `DDP(compile(model))`
train as eager DDP does (losses per step, gradients), with the graph split at DDP's buckets
(`config.optimize_ddp`, one autograd node per piece) or whole, and no recompile after the first
step. Each test is one spawn running every scenario in turn (a spawn costs seconds)."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

import stenograph
from stenograph.testing import CompileCounterWithBackend

from .ddp_models import EncoderStack, TinyTransformer, compiled_function_nodes, expected_pieces, module_bytes
from .launch import run_workers
from .recording import CompileRecord

STEPS = 5
MODELS = {"tiny": TinyTransformer, "encoder": EncoderStack}
# (wrap order, optimize_ddp): eager DDP first, the reference of the others
SPLIT = [("eager", False), ("outer", True), ("inner", True)]
ALL = [*SPLIT, ("outer", False), ("inner", False)]


def _optimizer(name: str, params: object) -> torch.optim.Optimizer:
    if name == "sgd":
        return torch.optim.SGD(params, lr=0.05, momentum=0.9)
    return torch.optim.AdamW(params, lr=1e-2)


def _train(
    rank: int,
    world_size: int,
    model_name: str,
    optimizer: str,
    cap: int,
    scenarios: list[tuple[str, bool]],
    ignore: tuple[str, ...] = (),
) -> dict[str, dict]:
    """Each scenario trains a fresh copy of one model for STEPS steps on this rank's data."""
    results = {}
    for wrap, optimize in scenarios:
        stenograph.reset()
        torch.manual_seed(0)
        model = MODELS[model_name]()
        if ignore:
            DDP._set_params_and_buffers_to_ignore_for_model(model, list(ignore))
        counter = CompileCounterWithBackend("aot_eager")
        with stenograph.config.patch(optimize_ddp=optimize):
            if wrap == "eager":
                net = DDP(model, bucket_cap_mb=cap / 2**20)
            elif wrap == "outer":
                net = stenograph.compile(DDP(model, bucket_cap_mb=cap / 2**20), backend=counter)
            else:
                net = DDP(stenograph.compile(model, backend=counter), bucket_cap_mb=cap / 2**20)
            opt = _optimizer(optimizer, net.parameters())
            data = torch.Generator().manual_seed(100 + rank)
            run: dict = {"losses": [], "graphs": [], "nodes": [], "grads": None}
            record = CompileRecord()
            with record, warnings.catch_warnings():
                warnings.simplefilter("error", stenograph.StenographWarning)  # no frame may give up
                _steps(net, model, opt, data, counter, run)
            run["breaks"] = sorted(set(record.breaks))
        results[f"{wrap}-{'split' if optimize else 'whole'}"] = run
    return results


def _steps(net: nn.Module, model: nn.Module, opt: torch.optim.Optimizer, data: torch.Generator, counter, run: dict):
    """STEPS training steps, recorded into `run`: losses, graphs so far, compiled autograd nodes,
    and the first step's gradients."""
    for _ in range(STEPS):
        x, target = torch.randn(2, 5, 8, generator=data), torch.randn(2, 5, 4, generator=data)
        loss = F.mse_loss(net(x), target)
        run["nodes"].append(compiled_function_nodes(loss))
        loss.backward()
        if run["grads"] is None:
            run["grads"] = [p.grad.clone() for p in model.parameters() if p.grad is not None]
        opt.step()
        opt.zero_grad()
        run["losses"].append(loss.item())
        run["graphs"].append(counter.frame_count)


def _check_as_eager(results: dict[str, dict], pieces: int) -> None:
    """Every compiled scenario matches eager DDP on its rank; the split one has `pieces` graphs
    (each an autograd node of its own), the whole one 1, and neither compiles after step 1."""
    eager = results.pop("eager-whole")
    assert eager["graphs"] == [0] * STEPS
    for name, run in results.items():
        for step, (got, want) in enumerate(zip(run["losses"], eager["losses"])):
            assert abs(got - want) <= 1e-5, f"{name} step {step}: loss {got} != {want}"
        for got, want in zip(run["grads"], eager["grads"], strict=True):
            torch.testing.assert_close(got, want, rtol=0, atol=1e-5, msg=name)
        expected = pieces if name.endswith("split") else 1
        assert run["graphs"] == [expected] * STEPS, name
        assert run["nodes"] == [expected] * STEPS, name
        if name.startswith("outer"):
            # DDP's forward around the captured module: its bookkeeping runs as one call before and
            # one after (its reducer's C methods are not breaks of their own), and the context
            # DDP runs the module in is entered and left eagerly
            assert all(
                "DDP's bookkeeping" in reason or "_inside_ddp_forward" in reason or "next() on generator" in reason
                for reason in run["breaks"]
            ), (name, run["breaks"])
            assert sum("DDP's bookkeeping" in reason for reason in run["breaks"]) == 2, (name, run["breaks"])
        else:
            assert run["breaks"] == [], (name, run["breaks"])


def test_tiny_transformer_trains_as_eager_ddp_split_at_its_buckets():
    """Both wrap orders, split (the runs with optimize_ddp off are in the slow test)."""
    cap = 4096
    pieces = expected_pieces(module_bytes(TinyTransformer()), cap)
    assert pieces == 5
    for rank_results in run_workers(_train, "tiny", "sgd", cap, SPLIT, timeout=400):
        _check_as_eager(rank_results, pieces)


@pytest.mark.slow
def test_whole_graphs_encoder_layers_and_ignored_parameters_train_as_eager_ddp():
    results = run_workers(_train_more, timeout=900)
    for whole, encoder, ignoring in results:
        _check_as_eager(whole, 5)
        _check_as_eager(encoder, _encoder_pieces())
        _check_as_eager(ignoring, _ignoring_pieces())


def _train_more(rank: int, world_size: int) -> tuple[dict, dict, dict]:
    """The tiny model with optimize_ddp on and off; nn.TransformerEncoderLayer with AdamW; and
    the tiny model with block 1 ignored by DDP."""
    whole = _train(rank, world_size, "tiny", "sgd", 4096, ALL)
    encoder = _train(rank, world_size, "encoder", "adamw", 4096, ALL)
    ignoring = _train(rank, world_size, "tiny", "sgd", 256, SPLIT, IGNORED)
    return whole, encoder, ignoring


IGNORED = tuple(name for name, _ in TinyTransformer().named_parameters() if name.startswith("blocks.1."))


def _ignoring_pieces() -> int:
    model = TinyTransformer()
    counted = {id(p) for name, p in model.named_parameters() if name not in IGNORED}
    pieces = expected_pieces(module_bytes(model, counted), 256)
    assert pieces < expected_pieces(module_bytes(model), 256)
    return pieces


def _encoder_pieces() -> int:
    """An encoder layer's parameters complete at three ops (attention with its projections, the
    first norm, then linear1, linear2 and norm2 each): bucketed at those ops, from the end."""
    sizes = []
    model = EncoderStack()
    sizes.append(_bytes(model.embed))
    for layer in model.blocks:
        sizes += [_bytes(layer.self_attn), _bytes(layer.norm1), _bytes(layer.linear1)]
        sizes += [_bytes(layer.linear2), _bytes(layer.norm2)]
    sizes.append(_bytes(model.head))
    return expected_pieces(sizes, 4096)


def _bytes(module: nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in module.parameters())
