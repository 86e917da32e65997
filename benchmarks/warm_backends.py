"""Backend artifacts (issue 28): cold compile vs loading the stored artifact in a fresh process.

The model is a stack of 6 Transformer blocks (nn.MultiheadAttention, LayerNorm, a GELU
feed-forward, as in transformer_block.py), trained: one forward and backward. Per backend:

1. a *cold* process, with an empty Inductor cache directory, captures and compiles the model
   with a backend that calls `compile_with_artifact`, runs it forward and backward, and writes
   the artifacts and the inputs its graphs got to a file. `backend s` is the time spent in
   `compile_with_artifact` (what an artifact saves; capture is the frontend's part), `first call
   s` the whole first forward and backward;
2. a *load* process, with another empty Inductor cache directory, imports (`import s`: torch,
   stenograph, the loader and what AOTAutograd and Inductor import to run compiled code, which a
   tiny artifact of the same backend loaded first pays, together with Inductor's per-process
   set-up such as its vector-ISA probe), loads the model's artifacts (`load s`), runs them
   forward and backward on the recorded inputs and checks the results against the cold process's.

`--plain` also times the backend as `backend(gm, example_inputs)` in a cold process, without an
artifact (Inductor then compiles the backward at the first backward call), to show what storing
costs; `step ms` compares the compiled and the loaded callables' forward+backward.

    python benchmarks/warm_backends.py --backends eager,aot_eager,inductor --plain
    python benchmarks/warm_backends.py --device cuda --backends inductor,inductor:reduce-overhead
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

BACKENDS = ["eager", "aot_eager", "inductor", "inductor:max-autotune-no-cudagraphs", "inductor:reduce-overhead"]


def _model(device: str):
    import torch
    import torch.nn as nn

    class Block(nn.Module):
        def __init__(self, d_model: int = 512, heads: int = 8) -> None:
            super().__init__()
            self.attn = nn.MultiheadAttention(d_model, heads, batch_first=True)
            self.norm1 = nn.LayerNorm(d_model)
            self.norm2 = nn.LayerNorm(d_model)
            self.ffn = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            attended, _ = self.attn(x, x, x)
            x = self.norm1(x + attended)
            return self.norm2(x + self.ffn(x))

    torch.manual_seed(0)
    return nn.Sequential(*[Block() for _ in range(6)]).to(device)


def _backend(spec: str):
    from stenograph.backends import inductor_backend, lookup_backend

    name, _, mode = spec.partition(":")
    return inductor_backend(mode=mode) if mode else lookup_backend(name)


def _sync(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def _clone(x):
    import torch

    return x.detach().clone().requires_grad_(x.requires_grad) if isinstance(x, torch.Tensor) else x


def _step(fn, inputs: list) -> list:
    """Forward and backward of a weighted sum of the outputs; returns outputs and input grads."""
    import torch

    args = [_clone(x) for x in inputs]
    outputs = fn(*args)
    outputs = list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]
    grads = []
    live = [o for o in outputs if isinstance(o, torch.Tensor) and o.requires_grad]
    if live:
        sum((o * (k + 1)).sum() for k, o in enumerate(live)).backward()
        grads = [x.grad for x in args if isinstance(x, torch.Tensor) and x.requires_grad]
    return [o.detach() for o in outputs if isinstance(o, torch.Tensor)] + grads


def _step_ms(fn, inputs: list, device: str, iters: int) -> float:
    _step(fn, inputs)
    _step(fn, inputs)
    _sync(device)
    start = time.perf_counter()
    for _ in range(iters):
        _step(fn, inputs)
    _sync(device)
    return (time.perf_counter() - start) / iters * 1e3


def cold(spec: str, device: str, out: str, plain: bool, iters: int) -> dict:
    import torch

    import stenograph
    from stenograph.backends.artifacts import compile_with_artifact

    backend = _backend(spec)
    graphs: list[dict] = []
    spent = [0.0]

    def storing(gm, example_inputs):
        start = time.perf_counter()
        if plain:
            compiled, artifact = backend(gm, example_inputs), None
        else:
            compiled, artifact = compile_with_artifact(backend, gm, example_inputs)
        spent[0] += time.perf_counter() - start
        graph = {"compiled": compiled, "artifact": artifact, "inputs": None}
        graphs.append(graph)

        def call(*args):
            if graph["inputs"] is None:
                graph["inputs"] = [_clone(a) for a in args]
            return compiled(*args)

        return call

    def tiny(t):
        return torch.relu(t) * 2 + 1

    tiny_inputs = [torch.randn(64, device=device, requires_grad=True)]
    tiny_graphs: list = []

    def storing_tiny(gm, example_inputs):
        compiled, artifact = compile_with_artifact(backend, gm, example_inputs)
        tiny_graphs.append(artifact)
        return compiled

    stenograph.compile(tiny, backend=storing_tiny)(*tiny_inputs).sum().backward()
    model = _model(device)
    x = torch.randn(2, 32, 512, device=device)
    compiled_model = stenograph.compile(model, backend=storing)
    _sync(device)
    start = time.perf_counter()
    compiled_model(x).sum().backward()
    _sync(device)
    first = time.perf_counter() - start
    result = {"backend": spec, "graphs": len(graphs), "backend_s": spent[0], "first_call_s": first}
    if plain:
        return result
    result["artifact_bytes"] = sum(len(g["artifact"] or b"") for g in graphs)
    result["stored"] = sum(g["artifact"] is not None for g in graphs)
    result["compiled_step_ms"] = sum(_step_ms(g["compiled"], g["inputs"], device, iters) for g in graphs)
    torch.save(
        {
            "tiny": tiny_graphs,
            "graphs": [
                {"artifact": g["artifact"], "inputs": g["inputs"], "expected": _step(g["compiled"], g["inputs"])}
                for g in graphs
            ],
        },
        out,
    )
    return result


def load(device: str, out: str, iters: int) -> dict:
    start = time.perf_counter()
    import torch

    import stenograph  # noqa: F401
    from stenograph.backends.artifacts import load_artifact

    stored = torch.load(out, weights_only=False)
    for artifact in stored["tiny"]:
        if artifact is not None:
            load_artifact(artifact)
    _sync(device)
    imported = time.perf_counter() - start
    start = time.perf_counter()
    loaded = [load_artifact(g["artifact"]) for g in stored["graphs"]]
    _sync(device)
    load_s = time.perf_counter() - start
    start = time.perf_counter()
    results = [_step(fn, g["inputs"]) for fn, g in zip(loaded, stored["graphs"])]
    _sync(device)
    first_run = time.perf_counter() - start
    same = all(
        len(got) == len(want) and all(torch.allclose(a, b, rtol=1e-3, atol=1e-4) for a, b in zip(got, want))
        for got, want in zip(results, (g["expected"] for g in stored["graphs"]))
    )
    step = sum(_step_ms(fn, g["inputs"], device, iters) for fn, g in zip(loaded, stored["graphs"]))
    return {"import_s": imported, "load_s": load_s, "first_run_s": first_run, "same": same, "loaded_step_ms": step}


def _child(args: list[str], cache: str) -> dict:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache}
    env.pop("TORCHINDUCTOR_FORCE_DISABLE_CACHES", None)
    done = subprocess.run(
        ["nice", sys.executable, __file__, *args], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--plain", action="store_true", help="also time the backend without storing")
    parser.add_argument("--iters", type=int, default=3)
    parser.add_argument("--json", help="write the rows here")
    parser.add_argument("--role", choices=["cold", "load"], help=argparse.SUPPRESS)
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "cold":
        print(json.dumps(cold(args.spec, args.device, args.out, args.plain, args.iters)))
        return
    if args.role == "load":
        print(json.dumps(load(args.device, args.out, args.iters)))
        return
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for spec in args.backends.split(","):
            out = os.path.join(scratch, spec.replace(":", "_") + ".pt")
            common = ["--device", args.device, "--iters", str(args.iters), "--spec", spec, "--out", out]
            row = _child(["--role", "cold", *common], tempfile.mkdtemp(dir=scratch))
            if args.plain:
                plain = _child(["--role", "cold", "--plain", *common], tempfile.mkdtemp(dir=scratch))
                row["plain_backend_s"] = plain["backend_s"]
                row["plain_first_call_s"] = plain["first_call_s"]
            row.update(_child(["--role", "load", *common], tempfile.mkdtemp(dir=scratch)))
            row["load_over_cold"] = row["load_s"] / row["backend_s"]
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as file:
            json.dump(rows, file, indent=1)
    print(f"{'backend':38} {'backend s':>9} {'load s':>7} {'ratio':>6} {'import s':>8} {'KB':>7} {'same':>5}")
    for row in rows:
        print(
            f"{row['backend']:38} {row['backend_s']:9.2f} {row['load_s']:7.3f} {row['load_over_cold']:6.3f} "
            f"{row['import_s']:8.2f} {row['artifact_bytes'] / 1024:7.0f} {row['same']!s:>5}"
        )


if __name__ == "__main__":
    main()
