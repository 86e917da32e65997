"""Generators made in the compiled function and advanced there (`next()`, `send()`, a loop left
early), then returned or live at a graph break: the caller gets a real generator suspended at
the same `yield`, which goes on as eager's would (values, side effects, `send`/`throw`/`close`,
`finally` blocks). Where that state cannot be handed over, the frame runs eagerly.

torch.compile hands back a tuple iterator of the remaining values, computed (with their side
effects) before the call returns; the graph counts are compared with it, the behaviour with eager.
"""

from __future__ import annotations

import inspect
import types

import pytest
import torch

import stenograph

from ._support import assert_same, t, torch_graph_count


def _outcome(step):
    """What `step()` returns, or the exception it raises (class and message)."""
    try:
        return ("returned", step())
    except BaseException as e:  # noqa: BLE001 - the exception is the observation
        return ("raised", type(e).__name__, str(e))


def _observable(value):
    """`value` as the comparison sees it: a generator by its name and state."""
    if isinstance(value, types.GeneratorType):
        return ("generator", value.__qualname__, inspect.getgeneratorstate(value))
    return value


def check_suspended(
    fn, make_args, drive, cnt, capsys, *, graphs=1, torch_graphs=None, peer=True, eager_reason=None, calls=2
):
    """`fn` eagerly and compiled on `calls` fresh argument sets, each result then driven by
    `drive(result)` outside compiled code: what the call and the driving return (or raise), print
    and leave in the arguments must be eager's. `graphs`: stenograph's graph count over all calls;
    torch.compile's must be `torch_graphs` (default: the same; `peer=False` skips it).
    `eager_reason`: the frame runs eagerly, with a warning matching it."""
    compiled = stenograph.compile(fn, backend=cnt)
    for i in range(calls):
        seen = []
        for f in (fn, compiled):
            args = make_args(i)
            capsys.readouterr()
            if f is compiled and eager_reason is not None and i == 0:
                with pytest.warns(stenograph.StenographWarning, match=eager_reason):
                    result = f(*args)
            else:
                result = f(*args)
            printed = capsys.readouterr().out
            driven = _outcome(lambda result=result: drive(result))
            seen.append((printed, driven, capsys.readouterr().out, [_observable(a) for a in args]))
        assert_same(seen[1], seen[0], f"call {i}")
    assert cnt.frame_count == graphs, f"stenograph gave {cnt.frame_count} graphs, expected {graphs}"
    if peer and torch.__version__.startswith("2.13"):
        want = graphs if torch_graphs is None else torch_graphs
        assert torch_graph_count(fn, make_args, calls) == want


def _counting(t, log):
    log.append("started")
    yield t + 1
    log.append("after 1")
    yield t + 2
    log.append("after 2")


def test_the_returned_generator_goes_on_from_its_yield(cnt, capsys):
    def fn(x, log):
        g = _counting(x.sin(), log)
        next(g)
        return g

    def drive(g):
        assert isinstance(g, types.GeneratorType) and inspect.getgeneratorstate(g) == "GEN_SUSPENDED"
        return g.__name__, g.__qualname__, next(g), list(g)

    check_suspended(fn, lambda i: (t(3, seed=i), []), drive, cnt, capsys)


def test_the_rest_of_the_body_reads_its_inputs_when_pulled(cnt, capsys):
    def gen(x):
        yield x + 1
        yield x * 10  # eagerly read at this pull: after the caller's in-place change

    def fn(x):
        g = gen(x)
        next(g)
        return g, x

    def drive(result):
        g, x = result
        x.add_(100)
        return next(g)

    check_suspended(fn, lambda i: (t(3, seed=i),), drive, cnt, capsys)  # (torch.compile: x * 10 before)


def test_a_generator_whose_frame_refers_to_itself_runs_the_frame_eagerly(cnt, capsys):
    def gen(holder):
        me = holder[0]
        yield me
        yield holder

    def fn(x):
        holder = []
        g = gen(holder)
        holder.append(g)
        next(g)
        return g, x.sin()

    def drive(result):
        g, _ = result
        return next(g)[0] is g

    reason = "refers to itself"
    check_suspended(fn, lambda i: (t(3, seed=i),), drive, cnt, capsys, graphs=0, eager_reason=reason, peer=False)


def test_the_brief_repro_under_fullgraph():
    def gen_ret(t):
        def gen():
            yield t + 1
            yield t + 2

        g = gen()
        next(g)
        return g

    x = torch.randn(4)
    g = stenograph.compile(gen_ret, backend="eager", fullgraph=True)(x)
    torch.testing.assert_close(next(g), x + 2)
    with pytest.raises(StopIteration):
        next(g)


def _loop(t, n):
    acc = t
    for i in range(n):
        acc = acc * 2 + i
        yield acc
    print("done")
    return acc.sum()


def test_loop_state_locals_and_the_return_value(cnt, capsys):
    def fn(x):
        g = _loop(x, 4)
        next(g)
        g.send(None)
        return g

    def drive(g):
        items = list(g)
        return items, _outcome(lambda: next(g))

    # torch.compile exhausts the generator to rebuild it, meets the print and runs the frame eagerly
    check_suspended(fn, lambda i: (t(3, seed=i),), drive, cnt, capsys, torch_graphs=0)


def _doubled(items):
    for v in items:
        yield v * 2


def _numbered(items):
    for i, v in enumerate(items):
        yield v * i


@pytest.mark.parametrize("gen", [_doubled, _numbered])
def test_a_loop_over_a_list_reads_it_live(cnt, capsys, gen):

    def fn(x):
        items = [x, x + 1]
        g = gen(items)
        next(g)
        return g, items

    def drive(result):
        g, items = result
        items.append(torch.ones(3))
        return list(g)

    # torch.compile exhausts the generator to rebuild it, refuses its mutations and runs the frame eagerly
    check_suspended(fn, lambda i: (t(3, seed=i),), drive, cnt, capsys, torch_graphs=0)


def _accumulate(total, log):
    while True:
        try:
            v = yield total
        except ValueError as e:
            log.append(f"caught {e}")
            v = -1
        if v is None:
            return total
        total = total + v


def test_send_and_throw_after_the_return(cnt, capsys):
    def fn(x, log):
        g = _accumulate(x, log)
        next(g)
        g.send(x * 2)
        return g

    def drive(g):
        out = [g.send(torch.ones(3)), g.throw(ValueError("bad")), g.send(torch.ones(3))]
        return out, _outcome(lambda: g.send(None)), _outcome(lambda: g.throw(KeyError("k")))

    check_suspended(fn, lambda i: (t(3, seed=i), []), drive, cnt, capsys)


def _guarded(t, log):
    try:
        yield t + 1
        yield t + 2
    finally:
        log.append("finally")
        print("cleanup")


class _Manager:
    def __init__(self, log):
        self.log = log

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, *exc):
        self.log.append(f"exit {exc[0].__name__ if exc[0] else None}")
        return False


def _managed(t, manager):
    with manager:
        yield t + 1
        yield t + 2


@pytest.mark.parametrize("how", ["close", "drop", "exhaust"])
def test_finally_runs_when_the_caller_closes_drops_or_exhausts_it(cnt, capsys, how):
    def fn(x, log):
        g = _guarded(x, log)
        next(g)
        return [g, log]

    def drive(holder):
        before = list(holder[1])
        if how == "close":
            holder[0].close()
        elif how == "drop":
            del holder[0]  # the last reference: CPython closes it now
        else:
            list(holder[0])
        return before, list(holder[-1])

    # torch.compile exhausts the generator to rebuild it, refuses its mutations and runs the frame eagerly
    check_suspended(fn, lambda i: (t(3, seed=i), []), drive, cnt, capsys, torch_graphs=0)


def test_a_with_block_around_the_yield_exits_when_closed(cnt, capsys):
    def fn(x, log):
        g = _managed(x, _Manager(log))
        next(g)
        return g

    def drive(g):
        return next(g), g.close(), _outcome(lambda: next(g))

    # torch.compile cannot trace the user manager's __enter__ into the generator it rebuilds
    check_suspended(fn, lambda i: (t(3, seed=i), []), drive, cnt, capsys, peer=False)


def test_a_generator_sharing_cells_with_the_frame_and_with_its_own_closures(cnt, capsys):
    def fn(x):
        count = 0

        def gen():
            nonlocal count
            k = 1
            scaled = lambda: x * k * count  # noqa: E731 - a closure over the body's own cell
            while True:
                count += 1
                yield scaled
                k += 1

        def read():
            return count

        g = gen()
        first = next(g)
        return g, first, read, x.cos()

    def drive(result):
        g, first, read, _ = result
        before = first()
        second = next(g)
        return before, first(), second is first, read(), second()

    # torch.compile fails on the closure made in the generator (it runs the frame eagerly)
    check_suspended(fn, lambda i: (t(3, seed=i),), drive, cnt, capsys, peer=False)


def _inner(t, log):
    got = yield t + 1
    log.append(f"inner got {got}")
    yield t + 2
    return "inner result"


def _outer(t, log):
    r = yield from _inner(t, log)
    log.append(r)
    yield t + 3


def test_suspended_inside_yield_from(cnt, capsys):
    def fn(x, log):
        g = _outer(x, log)
        next(g)
        return g

    def drive(g):
        inner = g.gi_yieldfrom
        return inner.__qualname__, g.send("sent"), list(g), g.gi_yieldfrom

    check_suspended(fn, lambda i: (t(3, seed=i), []), drive, cnt, capsys)


def test_a_generator_expression_advanced_then_returned(cnt, capsys):
    def fn(x):
        items = [x, x + 1, x + 2]
        g = (v * 2 for v in items)
        next(g)
        return g, items

    def drive(result):
        g, items = result
        items.pop()
        return list(g)

    # torch.compile exhausts the generator to rebuild it, refuses its mutations and runs the frame eagerly
    check_suspended(fn, lambda i: (t(3, seed=i),), drive, cnt, capsys, torch_graphs=0)


def test_one_generator_reached_twice_is_one_generator(cnt, capsys):
    def fn(x):
        g = _loop(x, 3)
        next(g)
        return g, {"again": g}

    def drive(result):
        g, holder = result
        return holder["again"] is g, list(g)

    # torch.compile exhausts the generator to rebuild it, meets the print and runs the frame eagerly
    check_suspended(fn, lambda i: (t(3, seed=i),), drive, cnt, capsys, torch_graphs=0)


def test_an_iterator_in_the_body_reached_twice_stays_one_iterator(cnt, capsys):
    def gen(t):
        it = iter((t, t + 1, t + 2, t + 3))
        for v in it:
            yield v
            next(it)  # the loop and the local are one iterator

    def fn(x):
        g = gen(x)
        next(g)
        return g

    check_suspended(fn, lambda i: (t(3, seed=i),), list, cnt, capsys)


def test_a_generator_live_at_a_graph_break_is_pulled_after_it(cnt, capsys):
    def fn(x, log):
        g = _counting(x.sin(), log)
        a = next(g)
        torch._dynamo.graph_break()
        return a + next(g), g

    def drive(result):
        return result[0], list(result[1])

    # torch.compile runs the frame eagerly (0 graphs)
    check_suspended(fn, lambda i: (t(3, seed=i), []), drive, cnt, capsys, graphs=2, torch_graphs=0)


def test_a_generator_passed_in_is_advanced_eagerly(cnt, capsys):
    def fn(g, x):
        return next(g) * x, g

    def drive(result):
        return result[0], list(result[1])

    # next() of a real generator is a graph break in both (the graph after it)
    check_suspended(fn, lambda i: (_counting(t(3, seed=i), []), t(3)), drive, cnt, capsys)


def test_guards_recompile_where_the_suspension_point_depends_on_an_input(cnt):
    def gen(t, flag):
        if flag:
            yield t + 1
        yield t + 2
        yield t + 3

    def fn(x, flag):
        g = gen(x, flag)
        next(g)
        return g

    compiled = stenograph.compile(fn, backend=cnt)
    x = t(3)
    for flag in (True, True, False, False, True):
        assert_same(list(compiled(x, flag)), list(fn(x, flag)))
    assert cnt.frame_count == 2  # one per flag value; identical calls reuse the entry
    assert_same(list(compiled(t(4), True)), list(fn(t(4), True)))
    assert cnt.frame_count == 3  # a new shape


def _handling(t):
    try:
        raise KeyError("k")
    except KeyError:
        yield t + 1  # suspended while handling an exception
    yield t + 2


def _over_dict(d):
    for k in d:
        yield d[k]


def test_suspended_inside_an_except_block_runs_the_frame_eagerly(cnt, capsys):
    def fn(x):
        g = _handling(x.sin())
        next(g)
        return g

    reason = "suspended inside an except/finally block"
    with pytest.raises(stenograph.Unsupported, match=reason):
        stenograph.compile(fn, backend="eager", fullgraph=True)(t(3))
    stenograph.reset()
    # torch.compile rebuilds it as a tuple iterator (see the module docstring)
    check_suspended(fn, lambda i: (t(3, seed=i),), list, cnt, capsys, graphs=0, torch_graphs=1, eager_reason=reason)


def test_an_iterator_over_a_dict_in_the_body_is_the_dicts_own(cnt, capsys):
    def fn(x, d):
        g = _over_dict(d)
        next(g)
        return g, d, x.sin()

    def drive(result):
        g, d, _ = result
        d["c"] = torch.ones(3)  # eagerly the generator's next step raises: the dict changed size
        return list(g)

    # the rebuilt generator iterates the caller's dict itself, so the change raises there too
    make = lambda i: (t(3, seed=i), {"a": t(3, seed=i), "b": t(3)})  # noqa: E731
    check_suspended(fn, make, drive, cnt, capsys)


def test_a_suspended_generator_with_cleanup_live_at_a_break_runs_the_frame_eagerly(cnt, capsys):
    def fn(x, log):
        g = _guarded(x, log)
        a = next(g)
        print("break")
        return a + next(g), g

    def drive(result):
        return result[0], list(result[1])

    # the resumed code would hold it longer than the frame does (its cleanup would run late)
    reason = "left suspended inside a try/with block"
    check_suspended(fn, lambda i: (t(3, seed=i), []), drive, cnt, capsys, graphs=0, eager_reason=reason)


def test_a_suspended_generator_with_cleanup_dropped_at_the_return_runs_the_frame_eagerly(cnt, capsys):
    def fn(x, log):
        g = _guarded(x, log)
        return next(g) * 2

    reason = "left suspended inside a try/with block"
    # torch.compile captures it in one graph, and its generator's `finally` never runs
    make = lambda i: (t(3, seed=i), [])  # noqa: E731
    check_suspended(fn, make, lambda r: r, cnt, capsys, graphs=0, torch_graphs=1, eager_reason=reason)
