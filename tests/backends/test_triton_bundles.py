"""A stored Inductor graph bundles only the Triton kernels its wrapper runs (`_triton_bundles`):
max-autotune's benchmarked candidates are left out, and the live graph keeps its own bundle."""

from __future__ import annotations

import types

from torch._inductor.triton_bundler import TritonBundle, TritonKernelArtifact, TritonKernelArtifacts

from stenograph.backends import _triton_bundles

WRAPPER = """
triton_poi_fused_add_0 = async_compile.triton('triton_poi_fused_add_0', '''
def triton_poi_fused_add_0(in_ptr0, out_ptr0, xnumel, XBLOCK):
    pass
''')
triton_tem_fused_convolution_1 = async_compile.triton('triton_tem_fused_convolution_1', '''...''')
"""


def _kernel(name: str, digest: str) -> TritonKernelArtifacts:
    files = [f"{name}.cubin", f"{name}.json", f"__grp__{name}.json"]
    return TritonKernelArtifacts(digest, 0, [TritonKernelArtifact(f, b"x" * 8) for f in files])


def _bundle() -> TritonBundle:
    kernels = [
        _kernel("triton_poi_fused_add_0", "a"),
        _kernel("triton_convolution2d_7", "b"),  # a benchmarked candidate
        _kernel("triton_tem_fused_convolution_1", "c"),
        _kernel("triton_tem_fused_convolution_10", "d"),  # a name that only starts like one used
    ]
    return TritonBundle(kernels, [])


def test_only_the_kernels_the_wrapper_names_are_kept():
    kept = _triton_bundles.used_kernels(_bundle(), WRAPPER)
    assert [k.kernel_hash for k in kept.kernel_artifacts] == ["a", "c"]
    assert kept.static_autotuners == []


def test_the_entry_is_pruned_only_while_it_is_stored():
    bundle = _bundle()
    forward = types.SimpleNamespace(result=types.SimpleNamespace(_triton_bundle=bundle, source_code=WRAPPER))
    backward = types.SimpleNamespace(result=types.SimpleNamespace(_triton_bundle=None, source_code=""))
    entry = types.SimpleNamespace(compiled_fw=forward, compiled_bw=backward)
    with _triton_bundles.pruned(entry):
        assert len(forward.result._triton_bundle.kernel_artifacts) == 2
    assert forward.result._triton_bundle is bundle
    assert backward.result._triton_bundle is None
