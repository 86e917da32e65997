"""Decoding: instruction records, offset map, exception table, jump targets, stack depths."""

from __future__ import annotations

import dis
import gc
import sys
import types

import pytest
from roundtrip_support import CORPUS_MODULES, load_fixture, module_code_objects

from stenograph.bytecode import (
    ExceptionEntry,
    Instr,
    decode,
    decoded,
    exception_entries,
    jump_target,
    stack_depths,
)
from stenograph.bytecode.instructions import _cache


def _corpus(modname):
    if modname.startswith("torch"):
        pytest.importorskip("torch")
    return module_code_objects(modname)


@pytest.mark.parametrize("modname", CORPUS_MODULES)
def test_decode_matches_dis_and_offsets_resolve(modname):
    for code in _corpus(modname):
        raw = [i for i in dis.get_instructions(code) if i.opname != "EXTENDED_ARG"]
        dec = decoded(code)
        assert [(i.opname, i.offset, i.arg) for i in dec] == [(i.opname, i.offset, i.arg) for i in raw]
        for index, instr in enumerate(dec):
            assert instr.index == index
            assert dec.index_of_offset[instr.offset] == index
            if instr.target is not None:
                # every jump lands on a decoded instruction (EXTENDED_ARG prefixes resolved)
                assert dec.at(instr.target).offset == instr.target
                assert dec.at(instr.target).is_jump_target
        for entry in dec.exception_entries:
            assert entry.target in dec.index_of_offset


@pytest.mark.parametrize("modname", CORPUS_MODULES)
def test_exception_table_matches_dis(modname):
    parse = getattr(dis, "_parse_exception_table", None)
    if parse is None:
        pytest.skip("no dis._parse_exception_table on this Python")
    for code in _corpus(modname):
        expected = [(e.start, e.end, e.target, e.depth, e.lasti) for e in parse(code)]
        got = [(e.start, e.end, e.target, e.depth, e.lasti) for e in exception_entries(code)]
        assert got == expected, code.co_qualname


@pytest.mark.parametrize("modname", CORPUS_MODULES)
def test_stack_depths_are_consistent_and_bounded(modname):
    for code in _corpus(modname):
        depths = stack_depths(code)  # raises on inconsistent paths
        assert depths[0] == 0
        assert max(depths.values()) <= code.co_stacksize, code.co_qualname


def test_instr_record_fields():
    def f(x):
        if x:
            return x + 1
        return None

    instrs = decode(f.__code__)
    assert all(isinstance(i, Instr) for i in instrs)
    assert instrs[0].opname == "RESUME"
    jumps = [i for i in instrs if i.is_jump]
    assert len(jumps) == 1
    target = decoded(f.__code__).at(jumps[0].target)
    assert target.is_jump_target
    assert jump_target(jumps[0]) == jumps[0].target
    raw_jump = next(i for i in dis.get_instructions(f) if i.offset == jumps[0].offset)
    assert jump_target(raw_jump) == jumps[0].target
    assert jump_target(instrs[0]) is None
    line = f.__code__.co_firstlineno
    load = next(i for i in instrs if i.opname in ("LOAD_FAST", "LOAD_FAST_BORROW"))
    assert load.lineno == line + 1 and load.starts_line
    binop = next(i for i in instrs if i.opname == "BINARY_OP")
    assert binop.lineno == line + 2 and not binop.starts_line
    assert binop.positions.col_offset is not None


def test_jumps_over_extended_args_resolve():
    long_jumps = load_fixture("samples").long_jumps
    dec = decoded(long_jumps.__code__)
    prefixes = [i.offset for i in dis.get_instructions(long_jumps) if i.opname == "EXTENDED_ARG"]
    assert prefixes
    for offset in prefixes:
        assert dec.instructions[dec.index_of_offset[offset]].offset > offset


def test_exception_entries_and_handler_lookup():
    def f(x):
        try:
            y = 1 / x
        except ZeroDivisionError:
            y = 0
        return y

    dec = decoded(f.__code__)
    assert dec.exception_entries and all(isinstance(e, ExceptionEntry) for e in dec.exception_entries)
    div = next(i for i in dec if i.opname == "BINARY_OP")
    entry = dec.handler_at(div.offset)
    assert entry is not None and entry.covers(div.offset) and not entry.lasti
    assert dec.at(entry.target).opname == "PUSH_EXC_INFO"
    assert dec.handler_at(dec.instructions[-1].offset) is None or dec.instructions[-1].opname != "RETURN_VALUE"


def test_stack_depths_in_a_loop_and_call():
    def f(xs):
        total = 0
        for x in xs:
            total += abs(x)
        return total

    dec = decoded(f.__code__)
    depths = stack_depths(f.__code__)
    for_iter = next(i for i in dec if i.opname == "FOR_ITER")
    loop = 1 + (sys.version_info >= (3, 15))  # the iterator (and from 3.15 its index or NULL)
    assert depths[for_iter.offset] == loop
    store_x = dec.next(for_iter)
    assert depths[store_x.offset] == loop + 1  # and the next value
    call = next(i for i in dec if i.opname == "CALL")
    # the loop, total, NULL, abs, x (3.11/3.12 order: NULL before the callable)
    assert depths[call.offset] == loop + 4


def test_decoded_is_cached_per_code_object_and_released():
    namespace = {}
    exec("def g(a):\n    return a * 2\n", namespace)
    code = namespace.pop("g").__code__
    first = decoded(code)
    assert decoded(code) is first
    twin = code.replace()  # equal, but a different object
    assert decoded(twin) is not first
    size = len(_cache)
    del code, twin
    gc.collect()
    assert len(_cache) <= size - 2


def test_decoded_code_holds_no_code_reference():
    namespace = {}
    exec("def h():\n    return 1\n", namespace)
    code = namespace.pop("h").__code__
    dec = decoded(code)
    assert not any(ref is code for ref in gc.get_referents(dec))
    assert sys.getrefcount(code) <= 3
    assert isinstance(dec.instructions, tuple)
    assert isinstance(code, types.CodeType)
