"""`config.enable_trace_unittest`: a test's own assertions traced inside compiled code (how
torch's suite compiles whole test bodies), and otherwise a graph break."""

from __future__ import annotations

import unittest

import pytest
import torch

import stenograph


class _Case(unittest.TestCase):
    __test__ = False  # a helper, not a test of its own

    def runTest(self):  # noqa: N802 - unittest's name
        pass


def _body(case, x):
    case.assertTrue(issubclass(int, int))
    case.assertFalse(issubclass(int, (str, float)))
    case.assertEqual(x.shape, (3,))
    case.assertIn(2, [1, 2])
    with case.assertRaises(TypeError):
        issubclass(1, int)
    return x + 1


def test_assertions_traced_into_one_graph_when_enabled(cnt):
    case = _Case()
    x = torch.ones(3)
    with stenograph.config.patch(enable_trace_unittest=True):
        result = stenograph.optimize_assert(cnt)(_body)(case, x)
    torch.testing.assert_close(result, x + 1)
    assert cnt.frame_count == 1


def test_assertions_break_the_graph_by_default():
    with pytest.raises(stenograph.Unsupported, match="unittest is not traced"):
        stenograph.optimize_assert("eager")(_body)(_Case(), torch.ones(3))
    x = torch.ones(3)
    torch.testing.assert_close(stenograph.compile(_body, backend="eager")(_Case(), x), x + 1)


def test_a_failing_assertion_fails_as_eagerly():
    def fails(case, x):
        case.assertEqual(x.shape, (4,))
        return x

    with stenograph.config.patch(enable_trace_unittest=True), pytest.raises(AssertionError):
        stenograph.compile(fails, backend="eager")(_Case(), torch.ones(3))
