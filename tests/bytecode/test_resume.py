"""Resume functions: continuing an original function from an offset with a rebuilt frame."""

from __future__ import annotations

import sys
import traceback
import types

import bytecode as pybytecode
import pytest

from stenograph.bytecode import (
    ITERATOR_FROM_TUPLE,
    NULL_STACK_ENTRY,
    LastiStackEntry,
    build_resume_code,
    decoded,
    describe_handler,
    stack_arg_name,
    stack_depths,
)
from stenograph.bytecode.resume_code import PAIR_PARTS

NULL_BEFORE_CALLABLE = sys.version_info < (3, 13)  # stack order of a call's NULL slot
# a with block keeps its bound __exit__ on the stack; from 3.14 as a callable and its self or NULL
WITH_EXIT = [None] if sys.version_info < (3, 14) else [None, NULL_STACK_ENTRY]
# a for loop keeps its iterator on the stack; from 3.15 with an index or NULL beside it
BESIDE_ITERATOR = [] if sys.version_info < (3, 15) else [NULL_STACK_ENTRY]


def _offset(fn, opname, argval=None, nth=0):
    matches = [i for i in decoded(fn.__code__) if i.opname == opname and (argval is None or i.argval == argval)]
    return matches[nth].offset


_LOADS = ("LOAD_FAST", "LOAD_FAST_BORROW", "LOAD_FAST_LOAD_FAST", "LOAD_FAST_BORROW_LOAD_FAST_BORROW")


def _load_offset(fn, name, nth=0):
    """Offset of the nth instruction loading local `name` first (3.13+ pairs loads in one)."""

    def loads(i):
        return i.opname in _LOADS and (i.argval == name or (isinstance(i.argval, tuple) and i.argval[0] == name))

    return [i for i in decoded(fn.__code__) if loads(i)][nth].offset


def _const_offset(fn, value):
    """Offset of the load of the constant `value` (3.14+ loads small ints by LOAD_SMALL_INT)."""
    loads = ("LOAD_CONST", "LOAD_SMALL_INT")
    return next(i.offset for i in decoded(fn.__code__) if i.opname in loads and i.argval == value)


def _load_kind(opname):
    """LOAD_FAST for every single local load (checked, borrowed or plain), else the opname."""
    return "LOAD_FAST" if opname in ("LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_BORROW") else opname


def _call_offset(fn, nth=0):
    """Offset of the instruction that starts a call's execution (PRECALL on 3.11)."""
    names = {i.opname for i in decoded(fn.__code__)}
    return _offset(fn, "PRECALL" if "PRECALL" in names else "CALL", nth=nth)


def _resume(fn, offset, stack, live_locals, closure=None, **kwargs):
    code = build_resume_code(fn.__code__, offset, stack, live_locals, **kwargs)
    return types.FunctionType(code, fn.__globals__, code.co_name, None, closure)


def simple(x, y):
    a = x + 1
    b = a * y
    return b - x


def test_resume_at_statement_start_with_locals():
    offset = _load_offset(simple, "a")  # start of `b = a * y`
    resumed = _resume(simple, offset, 0, ["a", "y", "x"])
    # named like the original: tracebacks through resume code read like eager ones
    assert (resumed.__code__.co_name, resumed.__code__.co_qualname) == ("simple", "simple")
    assert resumed.__code__.co_varnames[:3] == ("a", "y", "x")
    # a = 10 as if x + 1 had produced it: b = 10 * 3, return 30 - 4
    assert resumed(10, 3, 4) == 26


def test_resume_at_binary_op_with_operands_on_the_stack():
    offset = _offset(simple, "BINARY_OP", nth=1)  # the `a * y`
    assert stack_depths(simple.__code__)[offset] == 2
    resumed = _resume(simple, offset, 2, ["x"])
    assert resumed.__code__.co_varnames[:3] == (stack_arg_name(0), stack_arg_name(1), "x")
    assert resumed(5, 6, 1) == 29  # b = 5 * 6; return b - 1


def helper(a, b, scale=1):
    return (a - b) * scale


def call_global(x):
    return helper(x, 2) + 1


def test_resume_before_call_with_null_on_the_stack():
    offset = _call_offset(call_global)
    stack = [NULL_STACK_ENTRY, helper, 7, 2] if NULL_BEFORE_CALLABLE else [helper, NULL_STACK_ENTRY, 7, 2]
    resumed = _resume(call_global, offset, stack, [])
    # NULL slots take no argument: the callable and the two call arguments do
    assert resumed.__code__.co_argcount == 3
    assert resumed(helper, 7, 2) == 6


def call_with_keywords(x):
    return helper(x, 1, scale=3)


def test_resume_at_call_with_keyword_names():
    """KW_NAMES (3.11, 3.12) is state, not stack: resuming at the call must still pass scale.
    From 3.13 CALL_KW takes the names from the stack instead."""
    names_on_stack = sys.version_info >= (3, 13)
    offset = _offset(call_with_keywords, "CALL_KW" if names_on_stack else "CALL")
    n = stack_depths(call_with_keywords.__code__)[offset]
    assert n == 5 + names_on_stack  # NULL, helper, x, 1, 3 (and ("scale",))
    stack = [NULL_STACK_ENTRY, helper, 9, 1, 3] if NULL_BEFORE_CALLABLE else [helper, NULL_STACK_ENTRY, 9, 1, 3]
    args = (helper, 9, 1, 3, ("scale",)) if names_on_stack else (helper, 9, 1, 3)
    resumed = _resume(call_with_keywords, offset, stack + [7] * names_on_stack, [])
    assert resumed(*args) == 24


def call_method(items, v):
    items.append(v)
    return items


def test_resume_before_method_call_with_self_on_the_stack():
    offset = _call_offset(call_method)
    # a method call leaves (method, self) where a plain call has (NULL, callable)
    resumed = _resume(call_method, offset, 3, ["items"])
    items = [1]
    assert resumed(list.append, items, 2, items) == [1, 2]


def loop(xs, scale):
    total = 0
    for x in xs:
        total += x * scale
    return total


def test_resume_inside_a_for_loop_body():
    dec = decoded(loop.__code__)
    for_iter = next(i for i in dec if i.opname == "FOR_ITER")
    offset = dec.instructions[for_iter.index + 2].offset  # after STORE_FAST x: `total += ...`
    assert stack_depths(loop.__code__)[offset] == 1 + len(BESIDE_ITERATOR)  # just the iterator
    resumed = _resume(loop, offset, [None, *BESIDE_ITERATOR], ["total", "x", "scale"])
    # current x = 3, already accumulated 100, still to come: 4, 5
    assert resumed(iter([4, 5]), 100, 3, 10) == 100 + 30 + 40 + 50


def test_iterator_passed_as_a_tuple_of_remaining_values():
    dec = decoded(loop.__code__)
    for_iter = next(i for i in dec if i.opname == "FOR_ITER")
    offset = dec.instructions[for_iter.index + 2].offset
    resumed = _resume(loop, offset, [ITERATOR_FROM_TUPLE, *BESIDE_ITERATOR], ["total", "x", "scale"])
    assert resumed((4, 5), 100, 3, 10) == 100 + 30 + 40 + 50


def test_resume_at_the_loop_header_continues_iteration():
    offset = _offset(loop, "FOR_ITER")
    resumed = _resume(loop, offset, [None, *BESIDE_ITERATOR], ["total", "scale"])
    assert resumed(iter([1, 2]), 5, 2) == 11


def closure_user(a):
    b = a * 2
    get = lambda: a + b  # noqa: E731 - a and b are cell variables
    b += 1
    return get() + b


def test_live_cell_variables_are_passed_as_values():
    assert set(closure_user.__code__.co_cellvars) == {"a", "b"}
    dec = decoded(closure_user.__code__)
    make_fn = next(i for i in dec if i.opname == "MAKE_FUNCTION")
    offset = next(i for i in dec if i.lineno == make_fn.lineno).offset  # start of `get = ...`
    resumed = _resume(closure_user, offset, 0, ["a", "b"])
    # a = 3, b = 10: get() = 3 + 11 after `b += 1`
    assert resumed(3, 10) == 14 + 11


def test_cells_as_freevars_share_the_callers_cells():
    dec = decoded(closure_user.__code__)
    make_fn = next(i for i in dec if i.opname == "MAKE_FUNCTION")
    offset = next(i for i in dec if i.lineno == make_fn.lineno).offset
    code = build_resume_code(closure_user.__code__, offset, 0, [], cells_as_freevars=True)
    assert code.co_cellvars == ()
    assert code.co_freevars == closure_user.__code__.co_cellvars
    cells = {"a": types.CellType(3), "b": types.CellType(10)}
    closure = tuple(cells[name] for name in code.co_freevars)
    resumed = types.FunctionType(code, globals(), code.co_name, None, closure)
    assert resumed() == 25
    assert cells["b"].cell_contents == 11  # the caller's cell was updated in place
    with pytest.raises(ValueError, match="cell variable"):
        build_resume_code(closure_user.__code__, offset, 0, ["a"], cells_as_freevars=True)


def make_inner(k):
    def inner(x):
        y = x + k
        return y * k

    return inner


def test_free_variables_come_from_the_original_closure():
    inner = make_inner(4)
    offset = _load_offset(inner, "y")
    resumed = _resume(inner, offset, 0, ["y"], closure=inner.__closure__)
    assert resumed.__code__.co_freevars == ("k",)
    assert resumed(5) == 20
    with pytest.raises(ValueError, match="free variable"):
        build_resume_code(inner.__code__, offset, 0, ["k"])


class Base:
    def scale(self, v):
        return v * 10


class Derived(Base):
    def compute(self, v):
        w = abs(v)
        return super().scale(w) + 1

    def compute_bare(self, v):
        w = abs(v)
        s = super()
        return s.scale(w) + 2


@pytest.mark.parametrize(("method", "expected"), [(Derived.compute, 31), (Derived.compute_bare, 32)])
def test_zero_argument_super_works_when_stack_arguments_come_first(method, expected):
    offset = _call_offset(method)  # abs(v): the stack holds the call, self is not first
    stack = [NULL_STACK_ENTRY, abs, -3] if NULL_BEFORE_CALLABLE else [abs, NULL_STACK_ENTRY, -3]
    resumed = _resume(method, offset, stack, ["self"], closure=method.__closure__)
    for _ in range(3):  # also after the interpreter has specialized the instructions
        assert resumed(abs, -3, Derived()) == expected


def unbound_reader(x):
    y = x + 1
    z = x * 2
    return y + z


def test_missing_local_raises_unbound_local_error_not_a_crash():
    offset = _load_offset(unbound_reader, "x", nth=1)  # start of `z = x * 2`
    resumed = _resume(unbound_reader, offset, 0, ["x"])  # y deliberately not passed
    with pytest.raises(UnboundLocalError):
        resumed(3)


def divide(x):
    a = x - 1
    b = 10 / a
    return b


def test_tracebacks_point_at_the_original_lines():
    offset = _const_offset(divide, 10)
    resumed = _resume(divide, offset, 0, ["a"])
    assert resumed(4) == 10 / 4
    with pytest.raises(ZeroDivisionError) as info:
        resumed(0)
    frame = traceback.extract_tb(info.value.__traceback__)[-1]
    assert frame.lineno == divide.__code__.co_firstlineno + 2
    assert frame.filename == divide.__code__.co_filename


def _late_pair(fillers):
    """`a * b` read by one 3.13+ pair instruction, after `fillers` other locals and `x`."""
    names = [f"v{i}" for i in range(fillers)]
    source = (
        f"def late_pair(x):\n    {' = '.join(names)} = x\n    a = x + 1\n    b = x + 2\n"
        f"    return a * b + {' + '.join(names)}\n"
    )
    namespace = {}
    exec(source, namespace)
    return namespace["late_pair"], names


@pytest.mark.parametrize("fillers", [13, 14, 15])
def test_a_pair_of_locals_past_index_15_reads_the_right_locals(fillers):
    """Resumed at `return a * b ...` with `a` and `b` passed behind `fillers + 1` other arguments,
    they sit at index 14-17, past the 4 bits a pair instruction holds each index in: each must
    still read itself."""
    fn, names = _late_pair(fillers)
    resumed = _resume(fn, _load_offset(fn, "a"), 0, [*names, "x", "a", "b"])
    assert resumed(*[1] * fillers, 2, 3, 4) == 3 * 4 + fillers


def test_prologue_extra_runs_before_the_jump():
    offset = _load_offset(simple, "a")
    extra = [pybytecode.Instr("LOAD_CONST", 100), pybytecode.Instr("STORE_FAST", "x")]
    resumed = _resume(simple, offset, 0, ["a", "y"], prologue_extra=extra)
    assert resumed(2, 3) == 6 - 100


def with_varargs(*args, **kwargs):
    n = len(args)
    return n + len(kwargs)


def test_varargs_become_plain_positional_locals():
    offset = _load_offset(with_varargs, "n")
    code = build_resume_code(with_varargs.__code__, offset, 0, ["n", "kwargs"])
    assert code.co_argcount == 2
    assert not code.co_flags & (0x04 | 0x08)  # CO_VARARGS | CO_VARKEYWORDS
    resumed = types.FunctionType(code, globals())
    assert resumed(3, {"a": 1}) == 4


def test_resume_code_is_well_formed():
    offset = _call_offset(call_global)
    code = build_resume_code(call_global.__code__, offset, 4, [])
    dec = decoded(code)
    assert dec.instructions[0].opname == "RESUME"
    depths = stack_depths(code)
    assert max(depths.values()) <= code.co_stacksize
    first_jump = next(i for i in dec if i.opname == "JUMP_FORWARD")
    assert depths[first_jump.target] == 4


@pytest.mark.parametrize("modname", ["argparse", "json.decoder", "torch.nn.modules.conv"])
def test_resume_codes_build_across_real_functions(modname):
    """Every plain function of a real module, resumed at a few offsets, assembles into code
    whose stack at the jump target is exactly the original's at that offset."""
    from roundtrip_support import module_code_objects

    if modname.startswith("torch"):
        pytest.importorskip("torch")
    built = refused = 0
    for code in module_code_objects(modname):
        if code.co_flags & 0x3A0 or not code.co_flags & 0x1:  # generators/coroutines; not optimized
            continue
        dec = decoded(code)
        depths = stack_depths(code)
        candidates = [
            i
            for i in dec.instructions[1:]
            if i.offset in depths and i.opname not in ("RESUME", "MAKE_CELL", "COPY_FREE_VARS")
        ]
        first_body = next(k for k, i in enumerate(dec) if i.opname == "RESUME")
        candidates = [i for i in candidates if i.index > first_body]
        for instr in candidates[:: max(1, len(candidates) // 6)]:
            depth = depths[instr.offset]
            live = [n for n in code.co_varnames if n not in code.co_cellvars][:3]
            try:
                new = build_resume_code(code, instr.offset, depth, live)
            except NotImplementedError as exc:
                assert "running" in str(exc) and dec.handler_at(instr.offset) is not None
                refused += 1
                continue
            new_dec = decoded(new)
            jump = next(i for i in new_dec if i.opname == "JUMP_FORWARD")
            assert stack_depths(new)[jump.target] == depth
            # a pair is split into its parts; a load may become checked
            first = PAIR_PARTS.get(instr.opname, (instr.opname,))[0]
            assert _load_kind(new_dec.at(jump.target).opname) in (_load_kind(first), "KW_NAMES", "PRECALL")
            built += 1
    assert built > 20 and built > refused


# --- exception-handling regions -------------------------------------------------------------


def in_try(x):
    try:
        y = int(x)
    except ValueError:
        y = 0
    return y + 1


class Recorder:
    """A context manager that logs its calls and suppresses exceptions when told to."""

    def __init__(self, suppress):
        self.suppress = suppress
        self.log = []

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, tp, val, tb):
        self.log.append(("exit", tp and tp.__name__))
        return self.suppress


def in_with(cm, x):
    with cm:
        cm.value = 10 / x
    return "after"


def test_resume_inside_a_try_body_keeps_its_handler():
    offset = _offset(in_try, "LOAD_GLOBAL", "int")
    assert decoded(in_try.__code__).handler_at(offset) is not None
    resumed = _resume(in_try, offset, 0, ["x"])
    assert resumed("41") == 42
    assert resumed("nope") == 1  # ValueError went to the original except clause


def test_resume_inside_a_with_body_keeps_its_exit():
    offset = _const_offset(in_with, 10)
    assert stack_depths(in_with.__code__)[offset] == len(WITH_EXIT)  # the bound __exit__
    resumed = _resume(in_with, offset, WITH_EXIT, ["x", "cm"])
    cm = Recorder(suppress=False)
    assert resumed(cm.__exit__, 2, cm) == "after"
    assert cm.log == [("exit", None)] and cm.value == 5
    cm = Recorder(suppress=True)
    assert resumed(cm.__exit__, 0, cm) == "after"
    assert cm.log == [("exit", "ZeroDivisionError")]
    cm = Recorder(suppress=False)
    with pytest.raises(ZeroDivisionError):
        resumed(cm.__exit__, 0, cm)
    assert cm.log == [("exit", "ZeroDivisionError")]


def test_resume_at_an_except_handler_entry():
    dec = decoded(in_try.__code__)
    entry = dec.handler_at(_offset(in_try, "LOAD_GLOBAL", "int"))
    assert not entry.lasti
    stack = [None] * entry.depth + [None]  # the exception goes on top
    resumed = _resume(in_try, entry.target, stack, [])
    assert resumed(_raised(ValueError("bad"))) == 1
    with pytest.raises(TypeError, match="other"):
        resumed(_raised(TypeError("other")))  # not matched: re-raised


def test_resume_at_a_with_handler_entry_with_lasti():
    dec = decoded(in_with.__code__)
    div = _offset(in_with, "BINARY_OP")
    entry = dec.handler_at(div)
    assert entry.lasti and entry.depth == len(WITH_EXIT)
    stack = [*WITH_EXIT, LastiStackEntry(div), None]  # __exit__, lasti, exception
    code = build_resume_code(in_with.__code__, entry.target, stack, [])
    assert code.co_argcount == 2
    lasti = next(i.argval for i in decoded(code) if i.opname == "LOAD_CONST")
    assert decoded(code).at(lasti * 2).opname == "BINARY_OP"  # the division, in the new code
    resumed = types.FunctionType(code, globals())
    cm = Recorder(suppress=True)
    assert resumed(cm.__exit__, _raised(ZeroDivisionError("z"))) == "after"
    cm = Recorder(suppress=False)
    with pytest.raises(ZeroDivisionError):
        resumed(cm.__exit__, _raised(ZeroDivisionError("z")))
    assert cm.log == [("exit", "ZeroDivisionError")]


def _raised(exc):
    """`exc` after a real raise: handlers may rely on its traceback (3.11's WITH_EXCEPT_START
    passes it to __exit__ unchecked), so a resume must hand over exceptions that were raised."""
    try:
        raise exc
    except BaseException as caught:
        return caught


def in_handler(x):
    try:
        return 1 / x
    except ZeroDivisionError:
        z = x + 100
        return z


def in_finally(x):
    try:
        y = 1 / x
    finally:
        z = x + 100
    return y + z


@pytest.mark.parametrize(("fn", "argval"), [(in_handler, 100), (in_finally, 100)])
def test_offsets_inside_running_handlers_are_not_implemented(fn, argval):
    dec = decoded(fn.__code__)
    offsets = [i.offset for i in dec if i.opname in ("LOAD_CONST", "LOAD_SMALL_INT") and i.argval == argval]
    in_handler_body = [o for o in offsets if dec.handler_at(o) is not None]
    assert in_handler_body
    depth = stack_depths(fn.__code__)[in_handler_body[-1]]
    with pytest.raises(NotImplementedError, match="handler"):
        build_resume_code(fn.__code__, in_handler_body[-1], depth, [])


def totals(start, n, log):
    total = start
    try:
        for i in range(n):
            try:
                sent = yield total + i
            except ValueError:
                sent = 100
            if sent is not None:
                total += sent
    finally:
        log.append(("finally", total))
    return total


def delegate(log):
    got = yield "inner 1"
    log.append(("inner got", got))
    yield "inner 2"
    return "inner done"


def delegating(make_inner, log):
    try:
        r = yield from make_inner(log)
    except KeyError as e:
        r = f"caught {e}"
    log.append(r)
    yield r
    raise StopIteration  # leaving a generator, it becomes a RuntimeError


async def coroutine(x):
    return x


def comprehension(xs):
    return [x + 1 for x in xs]


@pytest.mark.skipif(sys.version_info < (3, 12), reason="comprehensions are inlined from 3.12")
def test_resume_inside_an_inlined_comprehension():
    offset = _offset(comprehension, "BINARY_OP")
    dec = decoded(comprehension.__code__)
    assert describe_handler(dec, dec.handler_at(offset)) == "inlined comprehension"
    # saved outer `x` (unbound: NULL), the list so far, the iterator, then x and 1 for `x + 1`
    stack = [NULL_STACK_ENTRY, None, ITERATOR_FROM_TUPLE, *BESIDE_ITERATOR, None, None]
    assert stack_depths(comprehension.__code__)[offset] == len(stack)
    resumed = _resume(comprehension, offset, stack, [])
    assert resumed([10], (5, 6), 3, 1) == [10, 4, 6, 7]


def _states_after(generator, steps):
    """What each step (`("send", v)`, `("throw", exc)`, `("close",)`) gives, or raises."""
    seen = []
    for step in steps:
        try:
            seen.append(getattr(generator, step[0])(*step[1:]))
        except (StopIteration, RuntimeError) as e:
            seen.append((type(e).__name__, getattr(e, "value", None)))
    return seen


def test_a_generator_resumed_at_its_yield_is_suspended_there():
    """Started at the YIELD_VALUE with the value on the stack, the resume code's generator yields
    it on its first next() and then goes on as the original suspended there."""
    offset = _offset(totals, "YIELD_VALUE")
    depth = stack_depths(totals.__code__)[offset]  # the loop's iterator (beside it from 3.15), the value
    assert depth == 2 + len(BESIDE_ITERATOR)
    steps = [("send", 5), ("throw", ValueError()), ("send", None), ("close",), ("send", None)]
    original_log, resumed_log = [], []
    original = totals(10, 4, original_log)
    next(original)
    next(original)  # i == 1
    iterator = iter(range(4))
    next(iterator)
    next(iterator)
    live = ["start", "n", "log", "total", "i"]
    code = build_resume_code(totals.__code__, offset, [None, *BESIDE_ITERATOR, None], live)
    resumed = types.FunctionType(code, totals.__globals__, "totals")(iterator, "dropped", 10, 4, resumed_log, 10, 1)
    assert next(resumed) == "dropped"
    assert _states_after(resumed, steps) == _states_after(original, steps)
    assert resumed_log == original_log == [("finally", 115)]


@pytest.mark.parametrize("thrown", [None, KeyError("k")])
def test_a_generator_resumed_inside_yield_from(thrown):
    """The receiver goes under the yielded value: sends, throws and the delegate's return value
    pass through it as in the original (3.12+ keeps a handler of its own around that yield)."""
    offset = _offset(delegating, "YIELD_VALUE")
    # the delegate (with its NULL beside it from 3.15) under the yielded value
    assert stack_depths(delegating.__code__)[offset] == 2 + len(BESIDE_ITERATOR)
    original_log, resumed_log = [], []
    original = delegating(delegate, original_log)
    next(original)
    inner = delegate(resumed_log)
    next(inner)
    code = build_resume_code(delegating.__code__, offset, [None, *BESIDE_ITERATOR, None], ["make_inner", "log"])
    resumed = types.FunctionType(code, delegating.__globals__, "delegating")(inner, None, delegate, resumed_log)
    next(resumed)
    assert resumed.gi_yieldfrom is inner
    second = ("throw", thrown) if thrown is not None else ("send", "S")
    steps = [second, ("send", None), ("send", None), ("send", None)]
    assert _states_after(resumed, steps) == _states_after(original, steps)
    assert resumed_log == original_log


def test_coroutines_and_module_code_are_not_implemented():
    with pytest.raises(NotImplementedError, match="coroutine"):
        build_resume_code(coroutine.__code__, _load_offset(coroutine, "x"), 0, ["x"])
    module_code = compile("a = 1\nb = a + 1\n", "<m>", "exec")
    offset = decoded(module_code).instructions[-3].offset
    with pytest.raises(NotImplementedError, match="module or class body"):
        build_resume_code(module_code, offset, 0, [])


def test_invalid_requests_raise_value_error():
    offset = _offset(simple, "BINARY_OP", nth=1)
    with pytest.raises(ValueError, match="has 2 entries, got 1"):
        build_resume_code(simple.__code__, offset, 1, [])
    with pytest.raises(ValueError, match="not a local"):
        build_resume_code(simple.__code__, offset, 2, ["nope"])
    with pytest.raises(ValueError, match="duplicate"):
        build_resume_code(simple.__code__, offset, 2, ["x", "x"])
    with pytest.raises(ValueError, match="no instruction at offset"):
        build_resume_code(simple.__code__, offset + 1, 2, [])
    with pytest.raises(ValueError, match="frame-setup prefix"):
        build_resume_code(simple.__code__, 0, 0, [])
