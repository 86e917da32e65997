"""What each compiler hands to AOTAutograd and Inductor, side by side (issue 17).

Both compilers capture one graph of the same model; this script records, for each, what reaches
`torch._inductor.compile_fx.compile_fx` and what compile_fx then hands to Inductor's inner
compiler, and prints the differences:

* at the backend: grad mode, placeholders (order, source, static marks), example inputs (real or
  fake, nn.Parameter or not, requires_grad), the graph module's metadata;
* at the inner compile (once per forward / backward graph): whether an inference or a joint graph
  was built, the keyword arguments (static_input_idxs, cudagraphs, layout_opt, ...), the layout
  optimisation that GraphLowering decided, the ATen graph (op counts), and the Inductor config.

    python benchmarks/handoff_diff.py --model conv --no-grad
    python benchmarks/handoff_diff.py --model bert --train          # needs transformers

It compiles with Inductor on the CPU by default (`--device cuda` on a GPU machine).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import sys
from typing import Any

os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

import stenograph  # noqa: E402


class SmallConvNet(nn.Module):
    """Conv / BatchNorm / ReLU blocks with a residual and a linear head: ResNet in miniature."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        self.block = nn.Sequential(
            nn.Conv2d(16, 16, 3, padding=1, bias=False),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.Conv2d(16, 16, 3, padding=1, bias=False),
            nn.BatchNorm2d(16),
        )
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        x = self.stem(x)
        x = torch.relu(x + self.block(x))
        return self.head(x.mean((2, 3)))


def make_model(name: str, device: str) -> tuple[nn.Module, tuple]:
    torch.manual_seed(0)
    if name == "conv":
        return SmallConvNet().to(device), (torch.randn(2, 3, 16, 16, device=device),)
    if name == "bert":
        from transformers import BertConfig, BertModel

        cfg = BertConfig(
            num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128, vocab_size=1000
        )
        return BertModel(cfg).to(device), (torch.randint(0, 1000, (2, 16), device=device),)
    raise SystemExit(f"unknown model {name}")


def describe_input(x: Any) -> str:
    if not isinstance(x, torch.Tensor):
        return f"{type(x).__name__}"
    kind = "fake" if isinstance(x, torch._subclasses.FakeTensor) else "real"
    param = "Parameter" if isinstance(x, nn.Parameter) else "Tensor"
    return f"{kind} {param} rg={x.requires_grad} {tuple(x.shape)} {x.dtype}"


class Recorder:
    """Wraps compile_fx for one compiler and records what it sees."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.inner: list[dict] = []
        self.layout: list[bool] = []

    def compile_fx(self, original: Any, gm: torch.fx.GraphModule, example_inputs: list, **kwargs: Any) -> Any:
        """Stands in for compile_fx: record its inputs, then compile with a recording inner compiler."""
        self.lines.append(f"compile_fx kwargs={sorted(kwargs)}")

        self.lines.append(f"grad_enabled={torch.is_grad_enabled()}")
        self.lines.append(f"gm.meta keys={sorted(gm.meta)}")
        self.lines.append(f"_param_name_to_source={getattr(gm, '_param_name_to_source', '<absent>')!r:.80}")
        self.lines.append(f"gm parameters={len(list(gm.parameters()))} buffers={len(list(gm.buffers()))}")
        ctx = torch._guards.TracingContext.try_get()
        has_fake = ctx is not None and ctx.fake_mode is not None
        self.lines.append(f"tracing context={ctx is not None} fake_mode={has_fake}")
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        for i, (node, ex) in enumerate(zip(placeholders, example_inputs)):
            static = node.meta.get("tensor_dict", {}).get("_dynamo_static_input_type")
            self.lines.append(f"  in[{i}] static={static} {describe_input(ex)}")
        return original(gm, example_inputs, inner_compile=self.inner_compile, **kwargs)

    def inner_compile(self, gm: torch.fx.GraphModule, example_inputs: list, **kwargs: Any) -> Any:
        from torch._inductor import config as inductor_config
        from torch._inductor.compile_fx import compile_fx_inner

        ops = collections.Counter(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        kw = {k: v for k, v in kwargs.items() if k not in ("get_decomp_fn", "compile_region_name")}
        self.inner.append(
            {
                "kwargs": kw,
                "n_inputs": len(example_inputs),
                "ops": ops,
                "config": inductor_config.get_config_copy(),
                "grad": torch.is_grad_enabled(),
            }
        )
        return compile_fx_inner(gm, example_inputs, **kwargs)


@contextlib.contextmanager
def record_layout(recorder: Recorder):
    """Patch compile_fx (both compilers import it at call time) and GraphLowering's layout choice."""
    import torch._inductor.compile_fx as compile_fx_module
    from torch._inductor.graph import GraphLowering

    original = GraphLowering.decide_layout_opt
    original_compile_fx = compile_fx_module.compile_fx
    compile_fx_module.compile_fx = lambda gm, inputs, **kw: recorder.compile_fx(original_compile_fx, gm, inputs, **kw)

    def wrapped(gm, *, is_inference):
        result = original(gm, is_inference=is_inference)
        recorder.layout.append(result)
        return result

    GraphLowering.decide_layout_opt = staticmethod(wrapped)
    try:
        yield
    finally:
        GraphLowering.decide_layout_opt = staticmethod(original)
        compile_fx_module.compile_fx = original_compile_fx


def run(compiler: str, model: nn.Module, args: tuple, no_grad: bool, train: bool) -> Recorder:
    rec = Recorder()
    if compiler == "stenograph":
        compiled = stenograph.compile(model, backend="inductor")
    else:
        compiled = torch.compile(model, backend="inductor")
    grad = torch.no_grad() if no_grad else contextlib.nullcontext()
    with record_layout(rec), grad:
        out = compiled(*args)
        if train:
            tensor = out if isinstance(out, torch.Tensor) else out[0]
            tensor.float().sum().backward()
    return rec


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="conv", choices=["conv", "bert"])
    p.add_argument("--device", default="cpu")
    p.add_argument("--no-grad", action="store_true", help="call under torch.no_grad() (inference)")
    p.add_argument("--train", action="store_true", help="train mode, forward + backward")
    a = p.parse_args()
    model, args = make_model(a.model, a.device)
    model.train(a.train)
    recs = {}
    for compiler in ("torch.compile", "stenograph"):
        recs[compiler] = run(compiler, model, args, a.no_grad, a.train)
        stenograph.reset()
        torch._dynamo.reset()
    for compiler, rec in recs.items():
        print(f"=== {compiler}: backend input")
        print("\n".join(rec.lines))
        print(f"  layout_opt decisions: {rec.layout}")
        for j, inner in enumerate(rec.inner):
            print(f"  inner[{j}] grad={inner['grad']} n_inputs={inner['n_inputs']} ops={sum(inner['ops'].values())}")
            for k, v in sorted(inner["kwargs"].items()):
                print(f"    {k} = {v!r:.200}")
    tc, st = recs["torch.compile"], recs["stenograph"]
    print("=== differences (torch.compile vs stenograph)")
    for j, (a_, b_) in enumerate(zip(tc.inner, st.inner)):
        for k in sorted(set(a_["kwargs"]) | set(b_["kwargs"])):
            if repr(a_["kwargs"].get(k)) != repr(b_["kwargs"].get(k)):
                print(f"  inner[{j}] kwarg {k}: {a_['kwargs'].get(k)!r:.120} vs {b_['kwargs'].get(k)!r:.120}")
        for k in sorted(set(a_["config"]) | set(b_["config"])):
            if repr(a_["config"].get(k)) != repr(b_["config"].get(k)):
                print(f"  inner[{j}] config {k}: {a_['config'].get(k)!r:.80} vs {b_['config'].get(k)!r:.80}")
        if a_["ops"] != b_["ops"]:
            print(
                f"  inner[{j}] ATen ops differ: only torch.compile {dict(a_['ops'] - b_['ops'])}, "
                f"only stenograph {dict(b_['ops'] - a_['ops'])}"
            )
    if len(tc.inner) != len(st.inner):
        print(f"  inner compiles: {len(tc.inner)} vs {len(st.inner)}")
    if tc.layout != st.layout:
        print(f"  layout_opt: {tc.layout} vs {st.layout}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
