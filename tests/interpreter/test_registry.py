"""The opcode registry: one row per opcode and version range, the running Python's tables built
from it, and the eager renderings the graph-break writer takes from it."""

from __future__ import annotations

import dis
import sys
import types

import pytest

from stenograph.errors import Unsupported
from stenograph.graph.breaks import can_break_at
from stenograph.interpreter.opcodes import REGISTRY, handlers_for_running_python, renderings_for_running_python
from stenograph.interpreter.registry import OLDEST, SUPPORTED, OpcodeRegistry, Row, running_version

RUNNING = sys.version_info[:2]

# The instructions a graph break can stop at (and run eagerly), per version.
BREAKABLE_ON_ALL = {
    "CALL", "CALL_FUNCTION_EX", "LOAD_ATTR", "STORE_ATTR", "BINARY_SUBSCR", "STORE_SUBSCR",
    "DELETE_SUBSCR", "BINARY_OP", "COMPARE_OP", "IS_OP", "CONTAINS_OP", "GET_ITER", "FOR_ITER",
    "STORE_GLOBAL", "BEFORE_WITH", "UNPACK_SEQUENCE", "RAISE_VARARGS", "FORMAT_VALUE",
    "UNARY_NEGATIVE", "UNARY_INVERT", "UNARY_NOT",
    "MATCH_CLASS", "MATCH_MAPPING", "MATCH_SEQUENCE", "MATCH_KEYS", "GET_LEN", "RERAISE",
    "WITH_EXCEPT_START",
}  # fmt: skip
_POP_JUMPS = ("TRUE", "FALSE", "NONE", "NOT_NONE")
BREAKABLE = {
    (3, 11): BREAKABLE_ON_ALL
    | {"LOAD_METHOD", "UNARY_POSITIVE", "JUMP_IF_TRUE_OR_POP", "JUMP_IF_FALSE_OR_POP"}
    | {f"POP_JUMP_{d}_IF_{k}" for d in ("FORWARD", "BACKWARD") for k in _POP_JUMPS},
    (3, 12): BREAKABLE_ON_ALL | {"BINARY_SLICE", "STORE_SLICE"} | {f"POP_JUMP_IF_{k}" for k in _POP_JUMPS},
}
BREAKABLE[(3, 13)] = BREAKABLE[(3, 12)] - {"FORMAT_VALUE"} | {
    "TO_BOOL", "CALL_KW", "CONVERT_VALUE", "FORMAT_SIMPLE", "FORMAT_WITH_SPEC",
}  # fmt: skip
BREAKABLE[(3, 14)] = BREAKABLE[(3, 13)] - {"BINARY_SUBSCR", "BEFORE_WITH"} | {"LOAD_SPECIAL"}
BREAKABLE[(3, 15)] = BREAKABLE[(3, 14)]


def _nop(f, inst):
    return None


def _other(f, inst):
    return None


def _render(site, inst):
    return [], []


def _rows_covering(opname: str, version: tuple[int, int]) -> list[Row]:
    return [row for row in REGISTRY.rows[opname] if row.applies_to(version)]


# -- the registry's own tables ---------------------------------------------------------------------


@pytest.mark.parametrize("version", SUPPORTED, ids=lambda v: f"{v[0]}.{v[1]}")
def test_every_claimed_opcode_is_covered_by_exactly_one_row(version):
    table = REGISTRY.table(version)
    assert table
    for opname, row in table.items():
        assert _rows_covering(opname, version) == [row], opname


def test_claimed_opcodes_exist_on_the_running_python():
    """The running table names only real instructions of this Python (a row that outlived its
    opcode, or one registered too early, would show up here)."""
    claimed = set(handlers_for_running_python())
    assert claimed - set(dis.opmap) == set()


def test_rows_of_one_opcode_do_not_overlap():
    for opname, rows in REGISTRY.rows.items():
        for i, row in enumerate(rows):
            assert row.opname == opname
            assert row.max_ver is None or row.min_ver <= row.max_ver, row.describe()
            for other in rows[i + 1 :]:
                assert not row.overlaps(other), (row.describe(), other.describe())
                assert not any(row.applies_to(v) and other.applies_to(v) for v in SUPPORTED)


@pytest.mark.parametrize("version", SUPPORTED, ids=lambda v: f"{v[0]}.{v[1]}")
def test_every_breakable_opcode_has_a_rendering(version):
    renderings = REGISTRY.renderings(version)
    assert set(renderings) == BREAKABLE[version]
    assert all(callable(r) for r in renderings.values())


@pytest.mark.parametrize("version", SUPPORTED, ids=lambda v: f"{v[0]}.{v[1]}")
def test_a_row_restricted_to_a_range_is_absent_outside_it(version):
    table = REGISTRY.table(version)
    restricted = [row for rows in REGISTRY.rows.values() for row in rows if row.min_ver != OLDEST or row.max_ver]
    assert restricted
    for row in restricted:
        if row.applies_to(version):
            assert table[row.opname] is row
        else:
            assert table.get(row.opname) is not row, row.describe()


def test_per_version_rows_of_known_opcodes():
    on311, on312 = REGISTRY.table((3, 11)), REGISTRY.table((3, 12))
    for only_311 in ("LOAD_METHOD", "PRECALL", "JUMP_IF_TRUE_OR_POP", "POP_JUMP_FORWARD_IF_TRUE", "UNARY_POSITIVE"):
        assert only_311 in on311 and only_311 not in on312
    for only_312 in ("RETURN_CONST", "BINARY_SLICE", "END_FOR", "LOAD_FAST_AND_CLEAR", "POP_JUMP_IF_TRUE"):
        assert only_312 in on312 and only_312 not in on311
    # a behaviour that changed is two rows: handler and rendering both differ
    for changed in ("LOAD_ATTR", "FOR_ITER"):
        assert on311[changed] is not on312[changed]
        assert on311[changed].handler is not on312[changed].handler
        assert on311[changed].eager is not on312[changed].eager
    # one behaviour under two names shares the handler and the rendering
    assert on311["POP_JUMP_FORWARD_IF_NONE"].handler is on312["POP_JUMP_IF_NONE"].handler


# -- the running Python --------------------------------------------------------------------------


def test_running_tables_are_built_once_from_the_registry():
    assert handlers_for_running_python() is handlers_for_running_python()
    assert renderings_for_running_python() is renderings_for_running_python()
    assert handlers_for_running_python() == REGISTRY.handlers(RUNNING)
    assert renderings_for_running_python() == REGISTRY.renderings(RUNNING)


def test_the_break_writer_breaks_exactly_at_opcodes_with_a_rendering():
    for opname in dis.opmap:
        inst = types.SimpleNamespace(opname=opname)
        assert can_break_at(inst) == (opname in BREAKABLE[RUNNING]), opname


def test_an_unsupported_python_is_refused(monkeypatch):
    assert running_version() == RUNNING
    monkeypatch.setattr(sys, "version_info", (3, 99, 0, "final", 0))
    listed = r"3\.11, 3\.12, 3\.13, 3\.14 and 3\.15"
    with pytest.raises(Unsupported, match=rf"Python 3\.99 is not supported yet \({listed} are\)"):
        running_version()


# -- registering ---------------------------------------------------------------------------------


def test_version_ranges_of_new_rows():
    registry = OpcodeRegistry()
    registry.register("OLD_OP", max_ver=(3, 12))(_nop)
    registry.register("NEW_OP", min_ver=(3, 13), eager=_render)(_nop)
    registry.register("CHANGED", max_ver=(3, 12))(_nop)
    registry.register("CHANGED", min_ver=(3, 13), max_ver=(3, 14), eager=_render)(_other)
    assert registry.handlers((3, 12)) == {"OLD_OP": _nop, "CHANGED": _nop}
    assert registry.handlers((3, 13)) == {"NEW_OP": _nop, "CHANGED": _other}
    assert registry.handlers((3, 15)) == {"NEW_OP": _nop}
    assert registry.renderings((3, 12)) == {}
    assert registry.renderings((3, 14)) == {"NEW_OP": _render, "CHANGED": _render}
    assert registry.row("CHANGED", (3, 11)).handler is _nop
    assert registry.row("CHANGED", (3, 15)) is None
    assert registry.row("MISSING", (3, 12)) is None


def test_one_registration_covers_several_names():
    registry = OpcodeRegistry()
    assert registry.register("A", "B", min_ver=(3, 12), eager=_render)(_nop) is _nop
    assert [row.opname for rows in registry.rows.values() for row in rows] == ["A", "B"]
    assert registry.renderings((3, 12)) == {"A": _render, "B": _render}
    assert registry.table(OLDEST) == {}


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ({}, {}),
        ({}, {"min_ver": (3, 12)}),
        ({"max_ver": (3, 12)}, {"min_ver": (3, 12)}),
        ({"min_ver": (3, 12), "max_ver": (3, 13)}, {"min_ver": (3, 13), "max_ver": (3, 14)}),
        ({"min_ver": (3, 13)}, {"max_ver": (3, 14)}),
    ],
)
def test_overlapping_rows_are_refused(first, second):
    registry = OpcodeRegistry()
    registry.register("OP", **first)(_nop)
    with pytest.raises(ValueError, match="overlapping registrations"):
        registry.register("OP", **second)(_other)
    assert len(registry.rows["OP"]) == 1


def test_adjacent_rows_are_accepted_and_an_empty_range_is_refused():
    registry = OpcodeRegistry()
    registry.register("OP", max_ver=(3, 11))(_nop)
    registry.register("OP", min_ver=(3, 12), max_ver=(3, 12))(_other)
    registry.register("OP", min_ver=(3, 13))(_nop)
    assert [registry.row("OP", v).handler for v in ((3, 11), (3, 12), (3, 13), (3, 20))] == [_nop, _other, _nop, _nop]
    with pytest.raises(ValueError, match="empty version range"):
        registry.register("OTHER", min_ver=(3, 13), max_ver=(3, 12))(_nop)
