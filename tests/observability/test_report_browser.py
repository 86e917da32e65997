"""The report opened in a real browser (headless Chromium): what it shows and how it looks.

Needs Debian's `chromium` package (`apt-get install -y chromium`); skipped without it.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
import torch

import stenograph
from stenograph.report import html, recorder

from ._support import breaking, png_pixels

CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="headless Chromium not installed (apt-get install -y chromium)"
)

HEADER = (0x1D, 0x24, 0x30)  # the report's header background
HIGHLIGHT = (0xFF, 0xE3, 0xA3)  # the graph-break line
GRAPHS_BAR = (0x4E, 0x79, 0xA7)  # first series of the plots


@pytest.fixture(scope="module")
def report_file(tmp_path_factory):
    stenograph.reset()
    rec = recorder.Recorder(time_calls=True, title="browser test").start()
    try:
        g = stenograph.compile(breaking, backend="eager")
        for x, n in [(torch.randn(4), 1), (torch.randn(4), 2), (torch.randn(8), 2)]:
            g(x, n)
    finally:
        rec.stop()
        stenograph.reset()
    return html.write(rec.session, str(tmp_path_factory.mktemp("report") / "report.html"))


def chromium(*args: str) -> subprocess.CompletedProcess:
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def test_browser_renders_the_content(report_file):
    result = chromium("--dump-dom", f"file://{report_file}")
    assert result.returncode == 0, result.stderr
    dom = result.stdout
    assert "<h1>browser test</h1>" in dom
    assert dom.count("<svg") >= 4  # two plots, a diagram per graph
    assert "Graphs, graph breaks and recompiles per frame" in dom
    assert "call to print" in dom
    assert '<span class="line hl">' in dom
    assert "Recompiled:" in dom
    assert re.search(r"\[\d+/\d+\]", dom)  # compile ids


def test_screenshot_shows_header_plots_and_the_highlighted_break(report_file, tmp_path):
    shot = tmp_path / "shot.png"
    result = chromium("--window-size=1200,1700", f"--screenshot={shot}", f"file://{report_file}")
    assert result.returncode == 0, result.stderr
    width, height, colours = png_pixels(str(shot))
    assert (width, height) == (1200, 1700)
    assert len(colours) > 50  # text, code colouring, plots: not a blank page
    assert HEADER in colours
    assert GRAPHS_BAR in colours
    assert HIGHLIGHT in colours
