"""Running programs in fresh processes against one cache folder, as a user's runs would.

Each test writes a program (a script that compiles something, calls it and calls `report()`),
runs it in a new Python process with `STENOGRAPH_CACHE_DIR` set, changes something (the source,
an argument, the environment) and runs it again. `report()` prints the program's results and what
the compiler did: how many frames compiled, how many persisted entries were installed, stored or
rejected, and the results' distance from eager's.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

SRC = pathlib.Path(__file__).resolve().parents[2] / "src"
TESTS = pathlib.Path(__file__).resolve().parents[1]

# the start of every program: strict settings, and the events counted
PRELUDE = """
import json, sys, warnings
import torch
import stenograph
from stenograph import events

stenograph.config.suppress_errors = False
warnings.simplefilter("error", stenograph.StenographWarning)
_seen = []
events.subscribe(_seen.append)


def report(**values):
    counts = {"compiled": sum(isinstance(e, events.FrameCompiled) for e in _seen)}
    for outcome in events.CacheOutcome:
        counts[outcome.name.lower()] = sum(
            isinstance(e, events.CacheLookup) and e.outcome is outcome for e in _seen
        )
    details = [f"{e.outcome.value}: {e.detail}" for e in _seen if isinstance(e, events.CacheLookup)]
    print("REPORT " + json.dumps({**counts, "details": details, **values}))


def distance(a, b):
    return max((x.float() - y.float()).abs().max().item() for x, y in zip(a, b))
"""


def write_program(path: pathlib.Path, body: str) -> pathlib.Path:
    path.write_text(PRELUDE + body)
    return path


def run(program: pathlib.Path, cache: pathlib.Path | None, *args: str, env: dict | None = None) -> dict:
    """Run `program` in a fresh process; its report as a dict."""
    environment = {k: v for k, v in os.environ.items() if k != "STENOGRAPH_CACHE_DIR"}
    environment["PYTHONPATH"] = os.pathsep.join([str(SRC), str(TESTS), environment.get("PYTHONPATH", "")])
    if cache is not None:
        environment["STENOGRAPH_CACHE_DIR"] = str(cache)
    environment.update(env or {})
    done = subprocess.run(
        [sys.executable, str(program), *args], env=environment, capture_output=True, text=True, timeout=600
    )
    reports = [line for line in done.stdout.splitlines() if line.startswith("REPORT ")]
    if done.returncode != 0 or not reports:
        pytest.fail(f"{program.name} failed (exit {done.returncode}):\n{done.stdout}\n{done.stderr}", pytrace=False)
    result = json.loads(reports[-1][len("REPORT ") :])
    result["stderr"] = done.stderr
    return result
