"""Which `ptxas` builds this process's Triton kernels: the one Inductor chooses, in every process.

Inductor points Triton at the `ptxas` torch ships (`TRITON_PTXAS_PATH`, where torch has one) on
its way to compiling a kernel. A process that loads compiled graphs from the persisted cache
reaches Triton by other paths (a kernel whose tuned configuration was not bundled is compiled
when it first runs) and, with the variable unset, builds with Triton's bundled `ptxas`. The
`ptxas` version is part of Triton's cache key: on an H200 host with torch 2.11 (cu130), the
compiling process's kernels were built by ptxas 12.8 and a warm process's by 13.0, so every
kernel the warm process compiled missed the cache the first process filled (0.2-0.3 s each, the
first warm Llama call paying 0.7 s of its 1 s). Setting it the same way in both processes keeps
one toolchain and one cache key.
"""

from __future__ import annotations

__all__ = ["use_inductors_ptxas"]


def use_inductors_ptxas() -> None:
    """Set `TRITON_PTXAS_PATH` as Inductor sets it before compiling a kernel (no-op where it is
    already set or torch ships no `ptxas`, as CPU builds do). Idempotent and cheap."""
    # torch._inductor is imported by the callers already (compiling or loading a graph)
    from torch._inductor.runtime.compile_tasks import _set_triton_ptxas_path

    _set_triton_ptxas_path()
