"""`code_tables.CodeTable`: equal code objects are different keys, and an item goes with its key."""

from __future__ import annotations

import gc

from stenograph.code_tables import CodeTable


def _code(source: str, filename: str):
    namespace: dict = {}
    exec(compile(source, filename, "exec"), namespace)
    return namespace["f"].__code__


def test_equal_code_objects_are_different_keys():
    first, second = _code("def f():\n    return 1\n", "a.py"), _code("def f():\n    return 1\n", "b.py")
    assert first == second and first is not second  # CPython's code equality leaves the file out
    table: CodeTable[str] = CodeTable()
    table[first] = "first"
    assert second not in table and table.get(second) is None
    assert table.setdefault(second, "second") == "second"
    assert (table[first], table[second], len(table)) == ("first", "second", 2)


def test_an_item_goes_when_its_key_dies():
    kept, dropped = _code("def f():\n    return 2\n", "a.py"), _code("def f():\n    return 3\n", "a.py")
    table: CodeTable[int] = CodeTable()
    table[kept], table[dropped] = 2, 3
    del dropped
    gc.collect()
    assert len(table) == 1 and list(table) == [kept]
    table.clear()
    assert len(table) == 0 and kept not in table
