"""The differential fuzzer's fixed-seed run (CI) and checks that the fuzzer itself can fail.

Each generated program is run eagerly and compiled (backends eager and aot_eager), four calls
with fresh and changed inputs; a failure prints the program's source. The long run is
`python -m tests.fuzz --programs 5000 --seed N` (docs/testing.md).
"""

from __future__ import annotations

import dataclasses
import pathlib

import pytest
import torch

import stenograph

from .generator import ALL_FEATURES, DISABLED_BY_FINDINGS, Program, default_features, generate
from .object_model import generate_objects
from .runner import BACKENDS, check_program, run

CI_SEEDS = range(20)
CI_OBJECT_SEEDS = range(30)
# programs whose breaks lie inside helpers and closures, compiled with nested graph breaks
NESTED_FEATURES = frozenset(
    {"nested_breaks", "closures", "branches", "containers", "arith", "breaks", "inplace", "helpers", "globals"}
)
CI_NESTED_SEEDS = (101, 103, 104, 110, 111, 112, 118)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("seed", CI_SEEDS)
def test_generated_program_matches_eager(seed, backend):
    mismatches, _ = check_program(generate(seed, default_features(backend)), (backend,))
    if mismatches:
        pytest.fail("\n\n".join(m.report() for m in mismatches), pytrace=False)


@pytest.mark.parametrize("seed", CI_NESTED_SEEDS)
def test_nested_break_program_matches_eager(seed):
    """`config.nested_graph_breaks`: breaks inside inlined helpers (two calls deep, one inside a
    `no_grad` block) and closures writing their caller's cells, both backends."""
    program = generate(seed, NESTED_FEATURES)
    body = program.source[program.source.index("def f(") :]
    assert "h1(" in body or "h2(" in body or 'print("inner"' in body
    with stenograph.config.patch(nested_graph_breaks=True):
        mismatches, _ = check_program(program)
    if mismatches:
        pytest.fail("\n\n".join(m.report() for m in mismatches), pytrace=False)


@pytest.mark.parametrize("seed", CI_OBJECT_SEEDS)
def test_object_model_program_matches_eager(seed):
    """Attributes written then read through every path (object_model.py), both backends."""
    mismatches, _ = check_program(generate_objects(seed))
    if mismatches:
        pytest.fail("\n\n".join(m.report() for m in mismatches), pytrace=False)


def test_object_model_programs_mostly_return():
    """The object-model programs are well formed: few calls raise (a deleted attribute read
    where the generator could not tell), so most of what they do is compared."""
    raised = calls = 0
    for seed in range(2000, 2100):
        for call in run(generate_objects(seed), None).calls:
            calls += 1
            raised += isinstance(call.outcome, str) and call.outcome.startswith("raised")
    assert raised < 0.1 * calls, raised


_SAVED = sorted((pathlib.Path(__file__).parent / "findings").glob("*.py"))


@pytest.mark.parametrize("path", _SAVED, ids=[p.stem for p in _SAVED])
def test_saved_finding_programs_match_eager(path):
    """Programs of fixed findings, saved as found (the generator has changed since): they stay
    equal to eager on both backends."""
    program = Program(seed=0, source=path.read_text(), features=ALL_FEATURES, stable=False)
    mismatches, _ = check_program(program)
    if mismatches:
        pytest.fail("\n\n".join(m.report() for m in mismatches), pytrace=False)


def test_same_seed_same_program():
    assert generate(7).source == generate(7).source
    assert generate(7).source != generate(8).source


def test_disabled_features_are_named_features():
    assert DISABLED_BY_FINDINGS.keys() <= ALL_FEATURES
    for reason, backends in DISABLED_BY_FINDINGS.values():
        assert reason.startswith("F") and set(backends) <= set(BACKENDS)
    for backend in BACKENDS:
        off = {feature for feature, (_, backends) in DISABLED_BY_FINDINGS.items() if backend in backends}
        assert default_features(backend) == ALL_FEATURES - off


def test_programs_are_well_formed_and_terminate():
    """300 programs of every feature run eagerly: they finish, and most return (few raise)."""
    raised = 0
    for seed in range(1000, 1300):
        program = generate(seed, ALL_FEATURES)
        for call in run(program, None).calls:
            raised += isinstance(call.outcome, str) and call.outcome.startswith("raised")
    assert raised < 0.1 * 300 * 4, raised


def _off_by_one(gm, example_inputs):
    def wrong(*args):
        out = gm(*args)
        return type(out)(o + 1 if isinstance(o, torch.Tensor) and o.is_floating_point() else o for o in out)

    return wrong


def test_a_wrong_backend_is_caught(monkeypatch):
    """The harness reports a backend that changes results (the fuzzer can fail)."""
    program = generate(3)
    monkeypatch.setattr("stenograph.testing.lookup_backend", lambda name: _off_by_one)
    mismatches, _ = check_program(program, ("eager",))
    assert mismatches and all(m.backend == "eager" for m in mismatches)
    assert "seed 3" in mismatches[0].report() and "def f(" in mismatches[0].report()


def test_a_changed_global_is_caught():
    """A compiled run whose module state ends differently is reported (globals are compared)."""
    program = generate(3)
    source = program.source.replace(
        "def f(x, y, n, s, flag, lst, d, mode, obj, opt=_MISSING):\n",
        "def f(x, y, n, s, flag, lst, d, mode, obj, opt=_MISSING):\n"
        "    if stenograph.is_compiling():\n        G_LOG.append(1)\n",
    )
    mismatches, _ = check_program(dataclasses.replace(program, source=source), ("eager",))
    assert [m.what.split(":")[0] for m in mismatches][:1] == ["globals / class attributes"], mismatches


def test_a_changed_object_is_caught():
    """An object-model run whose objects end differently is reported (their state is compared)."""
    program = generate_objects(5)
    extra = "        if stenograph.is_compiling():\n            G_OBJ.k = 99\n"
    source = program.source.replace("        acc = x * 0.5\n", "        acc = x * 0.5\n" + extra)
    assert source != program.source
    mismatches, _ = check_program(dataclasses.replace(program, source=source), ("eager",))
    assert [m.what.split(":")[0] for m in mismatches][:1] == ["globals / class attributes"], mismatches
