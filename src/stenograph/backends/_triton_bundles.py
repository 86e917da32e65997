"""Only the Triton kernels a stored Inductor graph runs, not every kernel its compile built.

Inductor bundles with each compiled graph the Triton kernels compiled while it was made
(`CompiledFxGraph._triton_bundle`), so that loading the graph finds them in Triton's cache. Under
`max-autotune` that is every candidate it benchmarked as well: for ResNet-50 on an H100 the bundle
held 182 MB, of which the graph runs a few. A warm process read, checked, unpickled and copied all
of it before its first call (about 1 s of its 1.2-1.8 s).

What the graph runs is named in its wrapper's source (`triton_poi_fused_add_0`, ...); Triton names
a kernel's cached files after the kernel (`<name>.cubin`, `<name>.json`, `__grp__<name>.json`).
A kernel is kept when one of its files is named after a kernel of the wrapper. Dropping too much
cannot change a result: a kernel missing from the bundle is compiled again when the graph loads.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from collections.abc import Iterator
from typing import Any

_NAME = re.compile(r"\btriton_\w+")


def _kernel_name(filename: str) -> str:
    return filename.removeprefix("__grp__").split(".", 1)[0]


def used_kernels(bundle: Any, source_code: str) -> Any:
    """`bundle` (a `TritonBundle`) keeping the kernels the wrapper `source_code` names."""
    names = set(_NAME.findall(source_code))
    kept = [
        kernel
        for kernel in bundle.kernel_artifacts
        if any(_kernel_name(artifact.filename) in names for artifact in kernel.artifacts)
    ]
    return dataclasses.replace(bundle, kernel_artifacts=kept)


@contextlib.contextmanager
def pruned(entry: Any) -> Iterator[None]:
    """While inside, the forward and backward graphs of AOTAutograd's `entry` bundle only the
    kernels they run (the compiled graphs in this process are left as they were after)."""
    changed: list[tuple[Any, Any]] = []
    try:
        for part in (getattr(entry, "compiled_fw", None), getattr(entry, "compiled_bw", None)):
            result = getattr(part, "result", None)
            bundle = getattr(result, "_triton_bundle", None)
            source = getattr(result, "source_code", None)
            if bundle is None or not isinstance(source, str) or not hasattr(bundle, "kernel_artifacts"):
                continue
            changed.append((result, bundle))
            result._triton_bundle = used_kernels(bundle, source)
        yield
    finally:
        for result, bundle in changed:
            result._triton_bundle = bundle
