"""Round-trip (disassemble + assemble) every code object of real modules and run the results.

Equivalence is checked on what matters for execution: the instruction stream, which handler
covers each instruction (with its depth and lasti), source positions, signature metadata and the
docstring slot. Running checks then substitute rebuilt functions into the real modules.
"""

from __future__ import annotations

import dis
import io
import types

import pytest
from roundtrip_support import (
    CORPUS_MODULES,
    CodeRecorder,
    equivalence_problems,
    iter_code_objects,
    load_fixture,
    module_code_objects,
    outcome,
    patch_module,
    rebuild_function,
)

from stenograph.bytecode import disassemble, roundtrip


@pytest.mark.parametrize("modname", CORPUS_MODULES)
def test_every_code_object_roundtrips_equivalently(modname):
    if modname.startswith("torch"):
        pytest.importorskip("torch")
    codes = module_code_objects(modname)
    assert len(codes) >= 4
    failures = {}
    for code in codes:
        problems = equivalence_problems(code, roundtrip(code))
        if problems:
            failures[f"{code.co_qualname}:{code.co_firstlineno}"] = problems
    assert not failures


def test_fixture_code_objects_roundtrip_equivalently():
    samples = load_fixture("samples")
    functions = {id(fn): fn for fn, _, _ in samples.CASES}
    for fn in functions.values():
        for code in iter_code_objects(fn.__code__):
            assert equivalence_problems(code, roundtrip(code)) == [], code.co_qualname


def test_long_jumps_need_extended_args():
    """The fixture really exercises EXTENDED_ARG jumps, in the original and the rebuilt code."""
    samples = load_fixture("samples")
    for code in (samples.long_jumps.__code__, roundtrip(samples.long_jumps.__code__)):
        assert any(i.opname == "EXTENDED_ARG" for i in dis.get_instructions(code))


def test_recursive_roundtrip_replaces_nested_code():
    samples = load_fixture("samples")
    new = roundtrip(samples.closures.__code__, recursive=True)
    originals = set(map(id, iter_code_objects(samples.closures.__code__)))
    nested = list(iter_code_objects(new))
    assert len(nested) == len(list(iter_code_objects(samples.closures.__code__)))
    assert not originals & set(map(id, nested))


def test_docstring_slot_is_preserved():
    def no_doc():
        return "not a docstring"

    def with_doc():
        """doc"""
        return 1

    for fn in (no_doc, with_doc):
        rebuilt = types.FunctionType(roundtrip(fn.__code__), {})
        assert rebuilt.__doc__ == fn.__doc__


def test_exception_depths_are_kept_from_the_original():
    # A handler reached after `return` inside `try`: the case where recomputing depths in the
    # `bytecode` package goes wrong.
    def f(xs):
        for x in xs:
            try:
                return x
            except Exception:
                pass
        return None

    bc = disassemble(f.__code__)
    assert all(isinstance(getattr(i, "stack_depth", 0), int) for i in bc)
    new = roundtrip(f.__code__)
    assert equivalence_problems(f.__code__, new) == []


@pytest.mark.parametrize("case_index", range(len(load_fixture("samples").CASES)), ids=lambda i: str(i))
def test_rebuilt_fixture_functions_behave_the_same(case_index):
    fn, args, kwargs = load_fixture("samples").CASES[case_index]
    expected = outcome(fn, *args, **kwargs)
    rebuilt = rebuild_function(fn)
    with CodeRecorder() as rec:
        actual = outcome(rebuilt, *args, **kwargs)
    assert actual == expected
    assert rebuilt.__code__ in rec.codes


def _assert_ran(rec: CodeRecorder, rebuilt: set, *names: str) -> None:
    ran = {c.co_qualname for c in rec.codes & rebuilt}
    missing = [n for n in names if n not in ran]
    assert not missing, f"rebuilt code not executed: {missing}"


def test_json_with_rebuilt_encoder_and_decoder(monkeypatch):
    import json
    import json.decoder
    import json.encoder
    import json.scanner

    data = {
        "name": 'stenograph \u2603 "quoted" \\ back\nslash',
        "numbers": [0, -1, 2.5, 1e100, True, False, None],
        "nested": {"empty_list": [], "empty_dict": {}, "deep": [[1, [2, [3, {"k": "v"}]]]]},
        "unicode": "\U0001f600 \x00 \x1f",
    }
    texts = [
        json.dumps(data),
        json.dumps(data, indent=2, sort_keys=True),
        json.dumps(data, ensure_ascii=False, separators=(",", ":")),
    ]
    with pytest.raises(json.JSONDecodeError) as bad:
        json.loads('{"a": [1, 2,]}')

    rebuilt = set()
    for module in (json, json.decoder, json.encoder, json.scanner):
        rebuilt |= patch_module(monkeypatch, module)
    # route through the pure-Python implementations, which are the rebuilt ones now
    monkeypatch.setattr(json.decoder, "scanstring", json.decoder.py_scanstring)
    monkeypatch.setattr(json.scanner, "make_scanner", json.scanner.py_make_scanner)
    monkeypatch.setattr(json.encoder, "c_make_encoder", None)
    monkeypatch.setattr(json.encoder, "encode_basestring", json.encoder.py_encode_basestring)
    monkeypatch.setattr(json.encoder, "encode_basestring_ascii", json.encoder.py_encode_basestring_ascii)

    with CodeRecorder() as rec:
        new_texts = [
            json.dumps(data),
            json.dumps(data, indent=2, sort_keys=True),
            json.dumps(data, ensure_ascii=False, separators=(",", ":")),
        ]
        decoded = [json.loads(t, cls=json.JSONDecoder) for t in new_texts]
        with pytest.raises(json.JSONDecodeError) as new_bad:
            json.loads('{"a": [1, 2,]}', cls=json.JSONDecoder)
    assert new_texts == texts
    assert decoded == [data] * 3
    assert (new_bad.value.msg, new_bad.value.pos) == (bad.value.msg, bad.value.pos)
    _assert_ran(
        rec,
        rebuilt,
        "dumps",
        "_make_iterencode.<locals>._iterencode_dict",
        "_make_iterencode.<locals>._iterencode_list",
        "py_make_scanner.<locals>._scan_once",
        "JSONObject",
        "JSONArray",
        "py_scanstring",
        "py_encode_basestring_ascii",
    )


def _argparse_scenario(argparse):
    parser = argparse.ArgumentParser(prog="tool", description="A tool.", epilog="Bye.")
    parser.add_argument("-p", "--paths", nargs="+", help="input paths", metavar="PATH")
    parser.add_argument("-v", "--verbose", action="count", default=0)
    parser.add_argument("--level", type=int, choices=range(5), default=2, help="level %(default)s")
    parser.add_argument("--tag", action="append", default=[], dest="tags")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--fast", action="store_true")
    group.add_argument("--slow", action="store_false", dest="fast")
    sub = parser.add_subparsers(dest="command")
    run = sub.add_parser("run", help="run it")
    run.add_argument("--times", type=int, default=1)
    run.add_argument("rest", nargs=argparse.REMAINDER)
    results = [
        vars(parser.parse_args(["-p", "a", "b", "-vv", "--level", "3", "--tag", "x", "--tag", "y"])),
        vars(parser.parse_args(["--fast", "run", "--times", "4", "extra", "--flag"])),
        parser.format_help(),
        run.format_usage(),
    ]
    for bad in (["--level", "9"], ["--fast", "--slow"], ["-p"], ["bogus"]):
        stderr = io.StringIO()
        parser._print_message = lambda message, file=None, stderr=stderr: stderr.write(message)
        try:
            parser.parse_args(bad)
        except SystemExit as exc:
            results.append((exc.code, stderr.getvalue()))
    return results


def test_argparse_with_rebuilt_methods(monkeypatch):
    import argparse

    monkeypatch.setenv("COLUMNS", "80")
    expected = _argparse_scenario(argparse)
    rebuilt = patch_module(monkeypatch, argparse)
    with CodeRecorder() as rec:
        actual = _argparse_scenario(argparse)
    assert actual == expected
    _assert_ran(
        rec,
        rebuilt,
        "ArgumentParser.parse_known_args",
        "ArgumentParser._parse_known_args",
        "ArgumentParser._parse_known_args.<locals>.consume_optional",
        "HelpFormatter._format_usage",
        "_SubParsersAction.__call__",
        "ArgumentParser.error",
    )


def _collections_scenario(collections):
    c = collections.Counter("abracadabra")
    c.update({"z": 3})
    c.subtract("aaz")
    d = collections.Counter(a=1, q=2)
    point = collections.namedtuple("Point", "x y", defaults=[0])
    p = point(1)._replace(y=5)
    chain = collections.ChainMap({"a": 1}, {"a": 2, "b": 3}).new_child({"c": 4})
    ud = collections.UserDict(a=1)
    ud["b"] = 2
    ul = collections.UserList([3, 1, 2])
    ul.sort()
    us = collections.UserString("Hello") + "!"
    return (
        c.most_common(3),
        sorted((c + d).items()),
        sorted((c - d).items()),
        sorted((c & d).items()),
        sorted((c | d).items()),
        sorted(c.elements()),
        c.total(),
        p,
        p._asdict(),
        point._make([7, 8]),
        dict(chain),
        chain.parents.maps,
        dict(ud),
        list(ul),
        str(us.upper()),
        us.count("l"),
    )


def test_collections_with_rebuilt_functions(monkeypatch):
    import collections

    expected = _collections_scenario(collections)
    rebuilt = patch_module(monkeypatch, collections)
    with CodeRecorder() as rec:
        actual = _collections_scenario(collections)
    assert actual == expected
    _assert_ran(rec, rebuilt, "namedtuple", "Counter.most_common", "Counter.__init__", "ChainMap.__getitem__")


def _functools_scenario(functools):
    @functools.total_ordering
    class Version:
        def __init__(self, n):
            self.n = n

        def __eq__(self, other):
            return self.n == other.n

        def __lt__(self, other):
            return self.n < other.n

    @functools.singledispatch
    def show(x):
        return f"obj:{x!r}"

    @show.register
    def _(x: int):
        return f"int:{x}"

    @show.register(list)
    def _(x):
        return "list:" + ",".join(show(i) for i in x)

    class Lazy:
        calls = 0

        @functools.cached_property
        def value(self):
            Lazy.calls += 1
            return 42

    def original(a, b=1):
        """original doc"""
        return a + b

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        return original(*args, **kwargs) * 10

    cached = functools.lru_cache(maxsize=2)(lambda x: x * 3)
    lazy = Lazy()
    return (
        Version(1) <= Version(2),
        Version(3) > Version(2),
        Version(2) >= Version(2),
        show(1),
        show([1, "a"]),
        show(2.5),
        lazy.value,
        lazy.value,
        Lazy.calls,
        wrapper(1),
        wrapper.__name__,
        wrapper.__doc__,
        wrapper.__wrapped__ is original,
        [cached(i % 3) for i in range(6)],
        cached.cache_info().hits,
        functools.reduce(lambda a, b: a * b, range(1, 6)),
    )


def test_functools_with_rebuilt_functions(monkeypatch):
    import functools

    expected = _functools_scenario(functools)
    rebuilt = patch_module(monkeypatch, functools)
    with CodeRecorder() as rec:
        actual = _functools_scenario(functools)
    assert actual == expected
    _assert_ran(
        rec,
        rebuilt,
        "total_ordering",
        "singledispatch",
        "singledispatch.<locals>.dispatch",
        "cached_property.__get__",
        "update_wrapper",
        "lru_cache",
    )


def test_line_table_is_reencoded_validly_for_wide_columns():
    from stenograph.bytecode.linetable import line_table_is_valid

    code = load_fixture("samples").wide_columns.__code__
    assert max(p[3] or 0 for p in code.co_positions()) > 128
    raw = disassemble(code).to_code(compute_exception_stack_depths=False)
    if line_table_is_valid(raw):
        pytest.skip("the bytecode package encodes wide columns correctly now")
    new = roundtrip(code)
    assert line_table_is_valid(new)
    assert list(new.co_positions()) == list(code.co_positions())
