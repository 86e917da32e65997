"""`optimizer.step()` of torch.optim optimizers traced into a graph.

A training step (zero_grad, forward and loss, backward, step) is two graphs, as with torch.compile:
the forward and loss, and the step, which updates the parameters and the optimizer's state (step
counts, moments, momentum buffers) in place. zero_grad and backward run eagerly at graph breaks.
Missing state is created for real before the first step is traced, so the first call's graph is
the one later calls use. Results equal eager's bit for bit: the step count is read as a Python
number in the graph (an unbacked float), so bias corrections are eager's float64 arithmetic.
"""

import copy

import helpers
import pytest
import torch
from torch import nn

import stenograph
from stenograph.testing import CompileCounter, CompileCounterWithBackend

from ._support import t

OPTIMIZERS = {
    "sgd": lambda params: torch.optim.SGD(params, lr=0.1),
    "sgd_momentum": lambda params: torch.optim.SGD(params, lr=0.1, momentum=0.9, weight_decay=0.01),
    "sgd_foreach_nesterov": lambda params: torch.optim.SGD(params, lr=0.1, momentum=0.9, nesterov=True, foreach=True),
    "adam": lambda params: torch.optim.Adam(params, lr=0.01),
    "adam_foreach_amsgrad": lambda params: torch.optim.Adam(params, lr=0.01, foreach=True, amsgrad=True),
    "adamw": lambda params: torch.optim.AdamW(params, lr=0.01, weight_decay=0.1),
    "adamw_foreach": lambda params: torch.optim.AdamW(params, lr=0.01, weight_decay=0.1, foreach=True),
    "adamw_maximize": lambda params: torch.optim.AdamW(params, lr=0.01, maximize=True, foreach=False),
}
# SGD's momentum buffers appear in the first step: its state changes once more, and so does the graph
GRAPHS = {"sgd_momentum": 3, "sgd_foreach_nesterov": 3}
# other optimizers whose step is traced
MORE_OPTIMIZERS = {
    "rmsprop": lambda params: torch.optim.RMSprop(params, lr=0.01, momentum=0.9, centered=True),
    "adadelta": lambda params: torch.optim.Adadelta(params),
    "adamax": lambda params: torch.optim.Adamax(params, lr=0.01),
    "nadam": lambda params: torch.optim.NAdam(params, lr=0.01),
    "rprop": lambda params: torch.optim.Rprop(params, lr=0.01),
}
STEPS = 6
EXACT = {"rtol": 0, "atol": 0}


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))


def _train_step(model, opt):
    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return step


def _batch(i):
    return t(5, 4, seed=i), t(5, 1, seed=100 + i)


class _Pair:
    """The same model and optimizer twice: one trained eagerly, one through compiled code."""

    def __init__(self, make_opt, backend=None, make_step=_train_step):
        self.model_e = _model()
        self.model_c = copy.deepcopy(self.model_e)
        self.opt_e = make_opt(self.model_e.parameters())
        self.opt_c = make_opt(self.model_c.parameters())
        self.cnt = backend or CompileCounter()
        self.eager = make_step(self.model_e, self.opt_e)
        self.compiled = stenograph.compile(make_step(self.model_c, self.opt_c), backend=self.cnt)

    def step(self, i):
        x, y = _batch(i)
        loss_e = self.eager(x, y)
        loss_c = self.compiled(x, y)
        torch.testing.assert_close(loss_c, loss_e, **EXACT)
        self.assert_same()

    def assert_same(self):
        """Parameters, gradients and every state entry, parameter by parameter."""
        params_c, params_e = list(self.model_c.parameters()), list(self.model_e.parameters())
        for p_c, p_e in zip(params_c, params_e):
            torch.testing.assert_close(p_c, p_e, **EXACT)
            torch.testing.assert_close(p_c.grad, p_e.grad, **EXACT)
            state_c, state_e = self.opt_c.state.get(p_c), self.opt_e.state.get(p_e)
            assert (state_c is None) == (state_e is None)
            if state_e is None:
                continue
            assert list(state_c) == list(state_e)
            for key, value in state_e.items():
                if isinstance(value, torch.Tensor):
                    torch.testing.assert_close(state_c[key], value, **EXACT)
                else:
                    assert state_c[key] == value
        assert len(self.opt_c.state) == len(self.opt_e.state)


# -- results ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_training_steps_match_eager(name):
    pair = _Pair(OPTIMIZERS[name])
    for i in range(STEPS):
        pair.step(i)
    assert pair.cnt.frame_count == GRAPHS.get(name, 2)  # forward and loss; the step
    if not name.startswith("sgd"):
        assert [int(s["step"]) for s in pair.opt_c.state.values()] == [STEPS] * 4


@pytest.mark.parametrize("name", sorted(MORE_OPTIMIZERS))
def test_other_optimizers_match_eager(name):
    pair = _Pair(MORE_OPTIMIZERS[name])
    for i in range(STEPS):
        pair.step(i)
    assert pair.cnt.frame_count == 2


def test_aot_eager_training_steps_match_eager():
    """AOTAutograd functionalises the in-place updates of parameters and state (graph inputs)."""
    for name in ("sgd_momentum", "adam"):
        pair = _Pair(OPTIMIZERS[name], backend=CompileCounterWithBackend("aot_eager"))
        for i in range(4):
            pair.step(i)
        assert pair.cnt.frame_count == GRAPHS.get(name, 2)


@pytest.mark.parametrize("make_opt", [torch.optim.Adagrad, torch.optim.RAdam])
def test_untraced_optimizers_run_their_step_eagerly(make_opt):
    """Adagrad passes its step size where a Python number goes, RAdam decides on its state's
    values: their step runs eagerly at a graph break."""
    pair = _Pair(lambda params: make_opt(params, lr=0.01))
    for i in range(3):
        pair.step(i)
    assert pair.cnt.frame_count == 1


def _clipped_train_step(model, opt):
    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        for p in model.parameters():
            p.grad.mul_(0.9)  # gradients read from the parameters and changed in place
        opt.step()
        return loss + norm

    return step


def test_gradients_clipped_and_scaled_before_the_step_match_eager():
    pair = _Pair(OPTIMIZERS["adamw_foreach"], make_step=_clipped_train_step)
    for i in range(4):
        pair.step(i)


def test_step_with_a_closure_matches_eager():
    model_e = _model()
    model_c = copy.deepcopy(model_e)
    opt_e = torch.optim.SGD(model_e.parameters(), lr=0.1)
    opt_c = torch.optim.SGD(model_c.parameters(), lr=0.1)
    x, y = _batch(0)

    def closure_for(model, opt):
        def closure():
            opt.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            return loss

        return closure

    compiled = stenograph.compile(lambda: opt_c.step(closure_for(model_c, opt_c)), backend="eager")
    for _ in range(3):
        torch.testing.assert_close(compiled(), opt_e.step(closure_for(model_e, opt_e)), **EXACT)
    for p_c, p_e in zip(model_c.parameters(), model_e.parameters()):
        torch.testing.assert_close(p_c, p_e, **EXACT)


class _Lion(torch.optim.Optimizer):
    """An optimizer written in Python that sets up its state inside `step`."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.99)):
        super().__init__(params, {"lr": lr, "betas": betas})

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["exp_avg"] = torch.zeros_like(p)
                exp_avg = state["exp_avg"]
                beta1, beta2 = group["betas"]
                update = exp_avg * beta1 + p.grad * (1 - beta1)
                p.add_(update.sign(), alpha=-group["lr"])
                exp_avg.mul_(beta2).add_(p.grad, alpha=1 - beta2)


def test_optimizer_written_in_python_makes_its_state_in_the_first_graph(compiles):
    """`self.state[p]` of a parameter without state: a new dict, filled in the graph and stored
    into the optimizer's state after it; the second call compiles for the state that now exists."""
    pair = _Pair(lambda params: _Lion(params, lr=0.01))
    pair.step(0)
    assert all(set(s) == {"exp_avg"} for s in pair.opt_c.state.values()) and len(pair.opt_c.state) == 4
    pair.step(1)
    after_second = len(compiles)
    for i in range(2, 4):
        pair.step(i)
    assert len(compiles) == after_second
    assert pair.cnt.frame_count == 3  # forward and loss; the first step; later steps


# -- graphs and compilations --------------------------------------------------------------------


def _graphs_per_call(compile_fn, make_opt, calls=4):
    """Graphs after each call of a compiled training step, then of a compiled `opt.step`."""
    model = _model()
    opt = make_opt(model.parameters())
    cnt = CompileCounter()
    step = compile_fn(_train_step(model, opt), cnt)
    counts = []
    for i in range(calls):
        step(*_batch(i))
        counts.append(cnt.frame_count)
    model(_batch(0)[0]).sum().backward()
    alone = CompileCounter()
    compiled_step = compile_fn(opt.step, alone)
    for _ in range(calls):
        compiled_step()
    return counts, alone.frame_count


@pytest.mark.parametrize("name", ["sgd_momentum", "adam"])
def test_graph_counts_match_torch_compile(name):
    ours = _graphs_per_call(lambda fn, cnt: stenograph.compile(fn, backend=cnt), OPTIMIZERS[name])
    peer = helpers.torch_peer(
        lambda: _graphs_per_call(lambda fn, cnt: torch.compile(fn, backend=cnt), OPTIMIZERS[name])
    )
    assert ours == ([2, 3, 3, 3] if name == "sgd_momentum" else [2, 2, 2, 2], 1)
    assert peer == ours


def test_step_alone_is_one_graph_and_first_state_is_made_before_it(compiles):
    """`stenograph.compile(opt.step)`: one graph, compiled on the first call only; the state
    the first step creates (step counts, moments) exists when the graph runs."""
    model_e = _model()
    model_c = copy.deepcopy(model_e)
    opt_e = torch.optim.Adam(model_e.parameters(), lr=0.01)
    opt_c = torch.optim.Adam(model_c.parameters(), lr=0.01)
    for model in (model_e, model_c):
        model(_batch(0)[0]).sum().backward()
    cnt = CompileCounter()
    compiled_step = stenograph.compile(opt_c.step, backend=cnt)
    assert len(opt_c.state) == 0
    compiled_step()
    opt_e.step()
    first = len(compiles)
    assert [int(s["step"]) for s in opt_c.state.values()] == [1] * 4
    for _ in range(4):
        compiled_step()
        opt_e.step()
    assert len(compiles) == first  # no call after the first compiles anything
    assert cnt.frame_count == 1
    assert [int(s["step"]) for s in opt_c.state.values()] == [5] * 4
    for p_c, p_e in zip(model_c.parameters(), model_e.parameters()):
        torch.testing.assert_close(p_c, p_e, **EXACT)
        for key in ("step", "exp_avg", "exp_avg_sq"):
            torch.testing.assert_close(opt_c.state[p_c][key], opt_e.state[p_e][key], **EXACT)


def test_momentum_buffers_made_by_the_first_step_compile_once_more(compiles):
    """SGD makes its momentum buffers inside the first step (in the graph, stored into the state
    after it); the second call compiles for the state that now has them, the third nothing."""
    pair = _Pair(OPTIMIZERS["sgd_momentum"])
    pair.step(0)
    assert all("momentum_buffer" in s for s in pair.opt_c.state.values())
    pair.step(1)
    after_second = len(compiles)
    pair.step(2)
    assert len(compiles) == after_second
    assert pair.cnt.frame_count == 3


# -- guards -------------------------------------------------------------------------------------


def test_lr_change_recompiles_once_then_is_symbolic():
    pair = _Pair(OPTIMIZERS["adam"])
    pair.step(0)
    pair.step(1)
    assert pair.cnt.frame_count == 2
    for i, lr in enumerate((0.005, 0.002, 0.001), start=2):
        for opt in (pair.opt_e, pair.opt_c):
            opt.param_groups[0]["lr"] = lr
        pair.step(i)
    assert pair.cnt.frame_count == 3  # the first change compiles the step with lr as an input


def test_lr_change_with_floats_specialised_recompiles_each_time():
    with stenograph.config.patch(specialize_float=True):
        pair = _Pair(OPTIMIZERS["sgd"])
        pair.step(0)
        for i, lr in enumerate((0.05, 0.02), start=1):
            for opt in (pair.opt_e, pair.opt_c):
                opt.param_groups[0]["lr"] = lr
            pair.step(i)
        assert pair.cnt.frame_count == 4


def _scheduled_counts(compile_fn):
    model = _model()
    opt = OPTIMIZERS["adam"](model.parameters())
    scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    cnt = CompileCounter()
    step = compile_fn(_train_step(model, opt), cnt)
    for i in range(4):
        step(*_batch(i))
        scheduler.step()
    return cnt.frame_count


def test_lr_scheduler_steps_match_eager_and_torch_compile():
    """A scheduler wraps `opt.step` (its wrapper is traced, so the step inside is captured) and
    sets a new lr after each step: one recompile, then lr is a graph input, as torch.compile."""
    pair = _Pair(OPTIMIZERS["adam"])
    schedulers = [torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5) for opt in (pair.opt_e, pair.opt_c)]
    for i in range(5):
        pair.step(i)
        for scheduler in schedulers:
            scheduler.step()
    assert pair.opt_c.param_groups[0]["lr"] == pair.opt_e.param_groups[0]["lr"] == 0.01 / 32
    assert pair.cnt.frame_count == 3
    assert helpers.torch_peer(lambda: _scheduled_counts(lambda fn, cnt: torch.compile(fn, backend=cnt))) == 3


def test_param_group_added_recompiles_and_its_state_starts():
    def first_layer_only(params):
        return torch.optim.Adam(list(params)[:2], lr=0.01)

    pair = _Pair(first_layer_only)
    pair.step(0)
    for model, opt in ((pair.model_e, pair.opt_e), (pair.model_c, pair.opt_c)):
        opt.add_param_group({"params": list(model[2].parameters()), "lr": 0.02})
    for i in range(1, 4):
        pair.step(i)
    assert pair.cnt.frame_count == 3
    assert [int(s["step"]) for s in pair.opt_c.state.values()] == [4, 4, 3, 3]


def test_state_reset_recompiles_and_starts_over():
    pair = _Pair(OPTIMIZERS["adam"])
    for i in range(3):
        pair.step(i)
    for opt in (pair.opt_e, pair.opt_c):
        opt.state.clear()
    for i in range(3, 6):
        pair.step(i)
    assert [int(s["step"]) for s in pair.opt_c.state.values()] == [3] * 4
    assert pair.cnt.frame_count == 3


def test_loaded_state_is_read_from_the_optimizer_on_every_call():
    """`load_state_dict` puts new tensors (and reordered group dicts) in place: the compiled step
    reads them through the optimizer, never keeps the old ones."""
    pair = _Pair(OPTIMIZERS["adam"])
    for i in range(2):
        pair.step(i)
    saved = copy.deepcopy(pair.opt_e.state_dict())
    for i in range(2, 4):
        pair.step(i)
    for opt in (pair.opt_e, pair.opt_c):
        opt.load_state_dict(copy.deepcopy(saved))
    for i in range(4, 6):
        pair.step(i)
    assert [int(s["step"]) for s in pair.opt_c.state.values()] == [4] * 4


def _zero_grad_then_step(set_to_none):
    def make(model, opt):
        def step(x, y):
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.zero_grad(set_to_none=set_to_none)
            opt.step()
            return loss

        return step

    return make


@pytest.mark.parametrize("set_to_none", [True, False])
def test_zero_grad_then_step(set_to_none):
    """set_to_none=True: no gradients, the step changes nothing (None is guarded); False: zero
    gradients, Adam still moves by its moments."""
    pair = _Pair(OPTIMIZERS["adam"])
    pair.step(0)
    pair.step(1)
    make = _zero_grad_then_step(set_to_none)
    eager = make(pair.model_e, pair.opt_e)
    compiled = stenograph.compile(make(pair.model_c, pair.opt_c), backend=pair.cnt)
    for i in range(2, 4):
        torch.testing.assert_close(compiled(*_batch(i)), eager(*_batch(i)), **EXACT)
        pair.assert_same()
    steps = [int(s["step"]) for s in pair.opt_c.state.values()]
    assert steps == ([2] * 4 if set_to_none else [4] * 4)
    # one more graph, this function's forward: the step's frames are the optimizer's code, cached
    # for the training step too (zero gradients fit its graph; None ones give a step without ops)
    assert pair.cnt.frame_count == 3
    pair.step(4)  # gradients again: the cached graphs still fit
    assert pair.cnt.frame_count == 3


# -- steps that run eagerly -------------------------------------------------------------------------


def test_fused_step_runs_eagerly_with_its_reason():
    pair = _Pair(lambda params: torch.optim.Adam(params, lr=0.01, fused=True))
    for i in range(3):
        pair.step(i)
    assert pair.cnt.frame_count == 1
    reasons = stenograph.explain(pair.compiled)(*_batch(3)).break_reasons
    assert any("Adam with fused=True: its step runs eagerly" in r.reason for r in reasons)


def test_capturable_step_on_cpu_raises_as_eagerly():
    """torch.optim skips its device check under a compiler; the step runs eagerly and raises."""
    pair = _Pair(lambda params: torch.optim.Adam(params, lr=0.01, capturable=True))
    with pytest.raises(AssertionError, match="capturable=True") as eager_error:
        pair.eager(*_batch(0))
    with pytest.raises(AssertionError, match="capturable=True") as compiled_error:
        pair.compiled(*_batch(0))
    assert str(compiled_error.value) == str(eager_error.value)


def test_profiler_range_of_a_compiled_step():
    """The step's `record_function` range is traced away while no profiler records (guarded); a
    profiler running shows it, entered eagerly around the same step graph."""
    pair = _Pair(OPTIMIZERS["adam"], make_step=lambda model, opt: lambda x, y: opt.step())
    for model in (pair.model_e, pair.model_c):
        model(_batch(0)[0]).sum().backward()
    pair.compiled(None, None)
    pair.eager(None, None)
    with torch.profiler.profile() as prof:
        pair.compiled(None, None)
    pair.eager(None, None)
    names = [e.name for e in prof.events()]
    assert names.count("Optimizer.step#Adam.step") == 1
    pair.assert_same()
    assert pair.cnt.frame_count == 1


def test_step_is_captured_after_torch_compile_patched_the_optimizer_classes():
    """torch.compile, on first use in a process, wraps every optimizer class's `_init_group` to
    keep its own tracer out; the step is still one graph (the method under the wrapper is traced)."""
    helpers.torch_peer(lambda: torch.compile(lambda x: x + 1, backend="eager")(torch.ones(1)))
    assert torch.optim.Adam._init_group.__globals__["__name__"] == "torch._dynamo.eval_frame"
    pair = _Pair(OPTIMIZERS["adam"])
    for i in range(3):
        pair.step(i)
    assert pair.cnt.frame_count == 2
