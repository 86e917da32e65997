"""Run in a fresh process by test_artifacts.py: load each stored artifact and replay its calls.

Usage: python _artifact_child.py CASES_FILE REPORT_FILE. CASES_FILE (torch.save) maps a case name
to its artifact and recorded calls (inputs, and what the compiled callable returned, left in the
inputs and gave as gradients). The report (JSON) says per case what differed, how long loading
took, how often a tracing or compiling function of torch ran while loading and replaying (a
profile hook watches their code objects, so it sees calls however they were imported), and
whether Inductor's CUDA-graph trees ran.
"""

from __future__ import annotations

import json
import os
import sys
import time

import torch

from stenograph.backends.artifacts import load_artifact


def _forbidden_code() -> dict[object, str]:
    """Code objects of the functions that trace or compile, by name."""
    import torch._functorch.aot_autograd as aot_autograd
    import torch._functorch.partitioners as partitioners
    import torch._inductor.compile_fx as compile_fx
    import torch._inductor.cpp_builder as cpp_builder
    import torch._inductor.graph as inductor_graph
    import torch.fx.experimental.proxy_tensor as proxy_tensor

    functions = {
        "aot_module_simplified": aot_autograd.aot_module_simplified,
        "create_aot_state": aot_autograd.create_aot_state,
        "min_cut_rematerialization_partition": partitioners.min_cut_rematerialization_partition,
        "make_fx": proxy_tensor.make_fx,
        "symbolic_trace": torch.fx.Tracer.trace,
        "compile_fx": compile_fx.compile_fx,
        "compile_fx_inner": compile_fx.compile_fx_inner,
        "GraphLowering": inductor_graph.GraphLowering.__init__,
        "CppBuilder.build": cpp_builder.CppBuilder.build,
    }
    return {fn.__code__: name for name, fn in functions.items()}


def _cuda_graphs_used() -> bool:
    from torch._inductor.cudagraph_trees import get_manager

    return get_manager(torch.cuda.current_device(), create_if_none_exists=False) is not None


def _clone(x: object) -> object:
    if isinstance(x, torch.Tensor):
        return x.detach().clone().requires_grad_(x.requires_grad)
    return x


def _aliases(outputs: list[object], inputs: list[object]) -> list[int | None]:
    """Per output, the input whose storage it shares (None: its own storage, or not a tensor)."""
    found: list[int | None] = []
    for out in outputs:
        match = None
        if isinstance(out, torch.Tensor):
            for i, x in enumerate(inputs):
                if isinstance(x, torch.Tensor) and out.untyped_storage().data_ptr() == x.untyped_storage().data_ptr():
                    match = i
        found.append(match)
    return found


def replay(fn, inputs: list[object]) -> dict[str, object]:
    """Call `fn` on copies of `inputs`; return its outputs, the inputs after the call, which inputs
    the outputs alias, and the gradients of a weighted sum of its outputs."""
    args = [_clone(x) for x in inputs]
    torch.manual_seed(0)  # the same random draws in both processes
    result = fn(*args)
    outputs = list(result) if isinstance(result, (tuple, list)) else [result]
    record = {
        "outputs": [o.detach().clone() if isinstance(o, torch.Tensor) else o for o in outputs],
        "after": [x.detach().clone() if isinstance(x, torch.Tensor) else x for x in args],
        "aliases": _aliases(outputs, args),
        "grads": None,
    }
    differentiable = [o for o in outputs if isinstance(o, torch.Tensor) and o.requires_grad]
    if differentiable:
        loss = sum((o * (k + 1)).sum() for k, o in enumerate(differentiable))
        loss.backward()
        record["grads"] = [x.grad if isinstance(x, torch.Tensor) else None for x in args]
    return record


def differences(expected: dict[str, object], got: dict[str, object]) -> list[str]:
    """What differs between two replays (empty when they agree)."""
    problems = []
    if expected["aliases"] != got["aliases"]:
        problems.append(f"aliases {got['aliases']} != {expected['aliases']}")
    for field in ("outputs", "after", "grads"):
        a, b = expected[field], got[field]
        if (a is None) != (b is None) or (a is not None and len(a) != len(b)):
            problems.append(f"{field}: {b!r:.200} != {a!r:.200}")
            continue
        for i, (x, y) in enumerate(zip(a or [], b or [])):
            if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
                if x.shape != y.shape or not torch.allclose(x, y, rtol=1e-4, atol=1e-5):
                    problems.append(f"{field}[{i}] differs")
            elif x != y:
                problems.append(f"{field}[{i}]: {y!r} != {x!r}")
    return problems


def main(cases_file: str, report_file: str) -> None:
    cases = torch.load(cases_file, weights_only=False)
    forbidden = _forbidden_code()
    calls: dict[str, int] = {}

    def profile(frame, event, arg):
        if event == "call" and frame.f_code in forbidden:
            name = forbidden[frame.f_code]
            if name == "CppBuilder.build":  # which library: the report says what was missing
                name += " " + os.path.basename(frame.f_locals["self"].get_target_file_path())
            calls[name] = calls.get(name, 0) + 1

    report = {}
    sys.setprofile(profile)
    try:
        for name, case in cases.items():
            start = time.perf_counter()
            fn = load_artifact(case["artifact"])
            seconds = time.perf_counter() - start
            problems = []
            for k, call in enumerate(case["calls"]):
                # three times: CUDA graphs warm up, record, then replay
                for _ in range(3):
                    torch.compiler.cudagraph_mark_step_begin()
                    problems += [f"call {k}: {p}" for p in differences(call["expected"], replay(fn, call["inputs"]))]
            report[name] = {"problems": problems, "load_seconds": seconds}
    finally:
        sys.setprofile(None)
    report["forbidden_calls"] = calls
    report["cuda_graphs"] = torch.cuda.is_available() and _cuda_graphs_used()
    with open(report_file, "w") as file:
        json.dump(report, file)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
