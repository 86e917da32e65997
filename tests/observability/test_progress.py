"""Long compilations show a status line on a terminal, and a final line with their duration."""

from __future__ import annotations

import io
import time

import torch

import stenograph
from stenograph.observability import progress


def slow_backend(gm, example_inputs):
    time.sleep(0.4)
    return gm.forward


def double(x):
    return x * 2


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_line_while_a_compilation_runs():
    stream = FakeTerminal()
    status = progress.Progress(stream, delay=0.05, interval=0.02).start()
    try:
        stenograph.compile(double, backend=slow_backend)(torch.ones(2))
    finally:
        status.stop()
    text = stream.getvalue()
    assert "\r\033[Kstenograph: compiling [" in text
    assert "] double at " in text
    assert "stenograph: compiled [" in text and text.rstrip("\r\033[K").endswith("s\n")


def test_short_compilations_print_nothing():
    stream = FakeTerminal()
    status = progress.Progress(stream, delay=30).start()
    try:
        stenograph.compile(double, backend="eager")(torch.ones(2))
    finally:
        status.stop()
    assert stream.getvalue() == ""


def test_only_on_a_terminal():
    assert progress.start_on_terminal(io.StringIO()) is None
    status = progress.start_on_terminal(FakeTerminal())
    assert status is not None
    status.stop()
