"""Triton's and torch's source hashes are remembered per installation (`_source_digests`): a
later process takes them from Inductor's cache folder instead of reading both packages again,
and anything changed under either package (or a damaged record) makes it compute them anew.

Triton is not installed on the CPU machines the suite runs on: each process here passes a
stand-in package whose `triton_key` counts its calls. Every run is a fresh process, as warm
starts are (torch's hash can be given a value once per process only)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

SRC = pathlib.Path(__file__).resolve().parents[2] / "src"

FAKE_CACHE = """
import functools
calls = []


@functools.lru_cache(None)
def triton_key():
    calls.append(1)
    return "9.9.9-" + open(__file__).read().count("x").__str__()
"""

PROGRAM = """
import json
import torch
from torch._inductor.codecache import torch_key
import fake_triton
from fake_triton.runtime import cache as triton_cache
from stenograph.backends import _source_digests

_source_digests.remember_or_compute(fake_triton, triton_cache)
print(json.dumps({
    "computed": len(triton_cache.calls),
    "triton_key": triton_cache.triton_key(),
    "torch_key": torch_key().hex(),
    "replaced": not hasattr(triton_cache.triton_key, "cache_info"),
}))
"""


def _packages(tmp_path: pathlib.Path) -> pathlib.Path:
    root = tmp_path / "site"
    (root / "fake_triton" / "runtime").mkdir(parents=True)
    (root / "fake_triton" / "__init__.py").write_text("__version__ = '9.9.9'\n")
    (root / "fake_triton" / "runtime" / "__init__.py").write_text("")
    (root / "fake_triton" / "runtime" / "cache.py").write_text(FAKE_CACHE)
    return root


def _run(tmp_path: pathlib.Path, site: pathlib.Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHINDUCTOR")}
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(SRC)])
    env["TORCHINDUCTOR_CACHE_DIR"] = str(tmp_path / "inductor")
    done = subprocess.run([sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _records(tmp_path: pathlib.Path) -> list[pathlib.Path]:
    return sorted((tmp_path / "inductor" / "stenograph-source-digests").glob("*.json"))


def test_a_later_process_takes_the_remembered_hashes(tmp_path):
    site = _packages(tmp_path)
    first = _run(tmp_path, site)
    assert first["computed"] == 1 and not first["replaced"]
    assert len(_records(tmp_path)) == 1
    second = _run(tmp_path, site)
    assert second["computed"] == 0 and second["replaced"]
    assert (second["triton_key"], second["torch_key"]) == (first["triton_key"], first["torch_key"])


def test_a_changed_file_or_a_damaged_record_computes_them_again(tmp_path):
    site = _packages(tmp_path)
    first = _run(tmp_path, site)
    cache_py = site / "fake_triton" / "runtime" / "cache.py"
    cache_py.write_text(FAKE_CACHE + "# xx\n")  # what the hash reads changed: so does the value
    changed = _run(tmp_path, site)
    assert changed["computed"] == 1 and changed["triton_key"] != first["triton_key"]
    for record in _records(tmp_path):
        record.write_text("{not json")
    damaged = _run(tmp_path, site)
    assert damaged["computed"] == 1 and damaged["triton_key"] == changed["triton_key"]
    assert _run(tmp_path, site)["computed"] == 0
