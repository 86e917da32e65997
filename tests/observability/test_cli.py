"""The `stenograph` command: `run` a script (report and structured trace), `report` from a saved
trace, `demo`; and the trace rendered by PyTorch's real `tlparse`."""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess

import pytest

from stenograph import cli
from stenograph.cli import demo
from stenograph.report import from_trace

from ._support import SCRIPTS, run_cli

BREAKS_SCRIPT = os.path.join(SCRIPTS, "breaks_and_recompiles.py")


@pytest.fixture(scope="module")
def traced_run(tmp_path_factory):
    """`stenograph run` on a script with a graph break and recompiles, with STENOGRAPH_TRACE set."""
    work = tmp_path_factory.mktemp("run")
    trace_dir = work / "trace"
    result = run_cli(
        ["run", "--report", str(work / "out" / "report.html"), BREAKS_SCRIPT, "--flag", "x"],
        cwd=str(work),
        env={"STENOGRAPH_TRACE": str(trace_dir)},
    )
    return work, trace_dir, result


def test_run_runs_the_script_with_its_arguments(traced_run):
    _, _, result = traced_run
    assert result.returncode == 0, result.stderr
    assert "done --flag x" in result.stdout
    assert result.stdout.count("between graphs") == 8  # 4 compiled calls, 4 eager ones


def test_run_writes_the_report(traced_run):
    work, _, result = traced_run
    path = work / "out" / "report.html"
    assert f"stenograph: report written to {path}" in result.stderr
    assert f"stenograph: structured trace (for tlparse) at {work / 'trace'}" in result.stderr
    text = path.read_text()
    assert "stenograph run breaks_and_recompiles.py" in text
    assert "call to print" in text
    assert '<span class="line hl"><span class="ln">15</span>    print(&quot;between graphs&quot;)</span>' in text
    assert "Recompiled:" in text and "L[&#x27;n&#x27;] == 1" in text
    assert re.search(r"\d+ calls, median [\d.]+ µs", text)


def test_run_writes_a_trace_that_reads_back(traced_run):
    _, trace_dir, _ = traced_run
    (trace,) = glob.glob(str(trace_dir / "stenograph_trace_*.log"))
    session = from_trace.load(trace)
    ids = [c.compile_id for c in session.compiles()]
    assert ids == ["0/0", "0/1", "1/0", "1/1", "1/2"]
    assert session.frames[0].compiles[0].graph_break.reason == "call to print"
    assert session.frames[1].resume_of == 0
    assert sum(c.calls.count for c in session.compiles()) == 8  # 4 calls, each a frame and a resume


def test_report_command_builds_the_report_from_the_trace(traced_run):
    work, trace_dir, _ = traced_run
    result = run_cli(["report", str(trace_dir), "-o", str(work / "from-trace.html")], cwd=str(work))
    assert result.returncode == 0, result.stderr
    text = (work / "from-trace.html").read_text()
    assert "stenograph report" in text
    for compile_id in ("[0/0]", "[0/1]", "[1/0]", "[1/1]", "[1/2]"):
        assert compile_id in text
    assert '<span class="line hl"><span class="ln">15</span>' in text


def test_report_command_without_a_trace_fails_clearly(tmp_path, capsys):
    assert cli.main(["report", str(tmp_path)]) == 2
    assert "no stenograph_trace_*.log" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("tlparse") is None, reason="tlparse is not installed (pip install tlparse)")
def test_tlparse_renders_the_trace(traced_run, tmp_path):
    _, trace_dir, _ = traced_run
    (trace,) = glob.glob(str(trace_dir / "stenograph_trace_*.log"))
    out = tmp_path / "tl"
    result = subprocess.run(
        ["tlparse", trace, "-o", str(out), "--no-browser"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    stats = result.stdout + result.stderr
    assert "Stats { ok:" in stats and "fail" not in stats and "unknown" not in stats
    index = (out / "index.html").read_text()
    # compile ids in the stack trie, coloured like torch.compile's: restarts (graph breaks) and ok
    assert "class='status-break'>[0/0]</a>" in index
    assert "class='status-break'>[0/1]</a>" in index
    for compile_id in ("[1/0]", "[1/1]", "[1/2]"):
        assert f"class='status-ok'>{compile_id}</a>" in index
    assert "breaks_and_recompiles.py:13 in f" in index
    assert "2 restart(s) and/or compilation failure(s)" in index
    failures = (out / "failures_and_restarts.html").read_text()
    assert failures.count("RestartAnalysis") == 2 and "call to print" in failures
    directory = json.loads((out / "compile_directory.json").read_text())
    graph_files = [a["name"] for a in directory["[0/0_1]"]["artifacts"]]
    assert any(name.startswith("dynamo_output_graph") for name in graph_files)
    assert any(name.startswith("dynamo_guards") for name in graph_files)
    assert any(name.startswith("compilation_metrics") for name in graph_files)
    assert any(a["name"].startswith("recompile_reasons") for a in directory["[1/1]"]["artifacts"])
    graph = next(out.glob("-_0_0_1/dynamo_output_graph_*.txt")).read_text()
    assert 'mul: "f32[4]" = x * 2' in graph
    guards = next(out.glob("-_0_0_1/dynamo_guards_*.html")).read_text()
    assert "L[&#39;x&#39;]: Tensor torch.float32 cpu size=[4]" in guards
    metrics = next(out.glob("-_1_1_0/compilation_metrics_*.html")).read_text()
    assert "Graph Ops: 5" in metrics or "Graph Ops: 4" in metrics


def test_torch_trace_variable_is_honoured_and_exit_status_kept(tmp_path):
    script = os.path.join(SCRIPTS, "exits_with_status.py")
    result = run_cli(["run", script], cwd=str(tmp_path), env={"TORCH_TRACE": str(tmp_path / "tt")})
    assert result.returncode == 3
    assert (tmp_path / "stenograph-report.html").exists()  # the default path, in the working directory
    (trace,) = glob.glob(str(tmp_path / "tt" / "stenograph_trace_*.log"))
    assert [c.compile_id for c in from_trace.load(trace).compiles()] == ["0/0"]


def test_run_writes_the_report_when_the_script_raises(tmp_path):
    result = run_cli(["run", "--report", "r.html", os.path.join(SCRIPTS, "raises.py")], cwd=str(tmp_path))
    assert result.returncode == 1
    assert "RuntimeError: the user's script failed" in result.stderr
    assert "double" in (tmp_path / "r.html").read_text()


def test_run_a_missing_script(tmp_path, capsys):
    assert cli.main(["run", str(tmp_path / "nope.py")]) == 2
    assert "no such script" in capsys.readouterr().err


def test_demo_prints_what_it_captured_and_writes_the_report(tmp_path, capsys):
    report = tmp_path / "demo.html"
    demo.main(backend="eager", report_path=str(report))
    out = capsys.readouterr().out
    for part in (
        "1. A straight-line function becomes one graph",
        "graphs: 1, ops: 3",
        "def ___guard(x, y):",
        "recompiled because:",
        "L['n'] == 2 (got 3)",
        "Graph Count: 2",
        "call to print",
        "Tensor.item()",
        "eager vs stenograph (backend='eager')",
        "ms/call",
        f"HTML report of every compilation above: {report}",
    ):
        assert part in out, part
    text = report.read_text()
    assert "TransformerBlock.forward" in text and "squared_distance" in text


def test_demo_shows_paths_under_the_current_directory_relative_to_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    inside = os.path.join(os.getcwd(), "src", "demo.py")
    assert demo._relative(f'File "{inside}", line 3') == 'File "src/demo.py", line 3'
    assert demo._relative('File "/elsewhere/demo.py", line 3') == 'File "/elsewhere/demo.py", line 3'


@pytest.mark.slow
def test_demo_command_with_the_default_backend(tmp_path):
    result = run_cli(["demo"], cwd=str(tmp_path), timeout=900)
    assert result.returncode == 0, result.stderr
    backend = demo.cpu_backend()
    assert f"stenograph({backend})" in result.stdout and "speedup" in result.stdout
    assert (tmp_path / "stenograph-report.html").exists()
