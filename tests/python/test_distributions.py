"""torch.distributions objects made and used inside compiled code: constructed, sampled and
scored in one graph, as torch.compile captures them.

Their argument checks branch on tensor values (`if not torch._is_all_true(valid)`), one graph
break each; as torch.compile does, stenograph turns the process-wide default validation off before
its first compile, so eager code of the process agrees with compiled code. A distribution made
with `validate_args=True` still checks, and its invalid arguments raise eager's ValueError.
"""

from __future__ import annotations

import pytest
import torch
from torch import distributions as D

import stenograph

from ._support import check, t


def _normal(m, s):
    n = D.Normal(m, s.abs() + 0.1)
    return n.rsample(), n.log_prob(m), n.entropy(), n.cdf(m), n.mean, n.stddev


def _categorical(m, s):
    c = D.Categorical(logits=m)
    return c.log_prob(c.sample()), c.entropy(), c.probs


def _independent(m, s):
    n = D.Independent(D.Normal(m, s.abs() + 0.1), 1)
    return n.log_prob(m * 0.5), n.entropy(), n.rsample()


def _multivariate_normal(m, s):
    n = D.MultivariateNormal(m, scale_tril=torch.diag_embed(s.abs() + 0.5))
    return n.log_prob(m * 2), n.rsample()


def _bernoulli(m, s):
    b = D.Bernoulli(logits=m)
    return b.log_prob((s > 0).float()), b.entropy(), b.sample()


def _tanh_normal(m, s):
    d = D.TransformedDistribution(D.Normal(m, s.abs() + 0.1), [D.TanhTransform()])
    action = d.rsample()
    return action, d.log_prob(torch.tanh(m) * 0.9)


def _kl(m, s):
    return D.kl_divergence(D.Normal(m, s.abs() + 0.1), D.Normal(m * 0, s.abs() + 1))


def _beta_gamma_dirichlet(m, s):
    return (
        D.Beta(m.abs() + 1, s.abs() + 1).log_prob(torch.full_like(m, 0.3)),
        D.Gamma(m.abs() + 1, s.abs() + 1).log_prob(torch.full_like(m, 0.3)),
        D.Dirichlet(m.abs() + 1).log_prob(torch.softmax(s, -1)),
    )


def _mixture(m, s):
    mix = D.MixtureSameFamily(D.Categorical(logits=m), D.Normal(m, s.abs() + 0.1))
    return mix.log_prob(torch.zeros(m.shape[:-1]))


class _Scaled(D.Categorical):
    """A user's subclass of a torch distribution, passed in as a class."""


def _subclass_passed_in(m, s, cls=_Scaled):
    c = cls(logits=m)
    return c.log_prob(c.sample()) + c.probs.sum(-1) + c.logits.sum(-1)


CASES = [
    _normal,
    _categorical,
    _independent,
    _multivariate_normal,
    _bernoulli,
    _tanh_normal,
    _kl,
    _beta_gamma_dirichlet,
    _mixture,
    _subclass_passed_in,
]


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__.strip("_"))
def test_distribution_made_sampled_and_scored_in_one_graph(cnt, fn):
    # results, the RNG stream (sampling draws from it) and gradients through rsample/log_prob
    # equal eager's; one graph, as torch.compile makes
    check(fn, lambda i: (t(4, 3, seed=i, grad=True), t(4, 3, seed=i + 5, grad=True)), cnt, grads=True)


@pytest.fixture
def default_validation():
    """Leaves the process default as stenograph's first compile set it (off)."""
    yield
    D.Distribution.set_default_validate_args(False)


def _policy(mu, scale, validate):
    n = D.Normal(mu, scale, validate_args=validate)
    return n.log_prob(mu + 0.5)


def test_explicit_validation_still_checks_and_raises_eagers_error(cnt):
    compiled = stenograph.compile(_policy, backend=cnt)
    mu = t(3)
    good = torch.ones(3)
    torch.testing.assert_close(compiled(mu, good, True), _policy(mu, good, True))
    bad = -torch.ones(3)  # a negative scale: outside Normal's support for `scale`
    with pytest.raises(ValueError, match="scale") as eager_error:
        _policy(mu, bad, True)
    with pytest.raises(ValueError, match="scale") as compiled_error:
        compiled(mu, bad, True)
    assert str(compiled_error.value) == str(eager_error.value)
    # without validation the same arguments run in one graph, as eager does without checks
    torch.testing.assert_close(compiled(mu, bad, False), _policy(mu, bad, False), equal_nan=True)


def test_first_compile_turns_default_validation_off_as_torch_compile_does(cnt, default_validation):
    stenograph.compile(lambda x: x + 1, backend=cnt)(torch.ones(1))
    assert D.Distribution._validate_args is False


def test_turning_default_validation_back_on_recompiles(cnt, default_validation):
    fn = lambda mu, scale: D.Normal(mu, scale).log_prob(mu)  # noqa: E731
    compiled = stenograph.compile(fn, backend=cnt)
    mu = t(3)
    compiled(mu, torch.ones(3))
    assert cnt.frame_count == 1
    D.Distribution.set_default_validate_args(True)
    # the trace read the class default: the guard on it fails, the new trace validates
    with pytest.raises(ValueError, match="scale"):
        compiled(mu, -torch.ones(3))
    torch.testing.assert_close(compiled(mu, torch.ones(3)), fn(mu, torch.ones(3)))
