"""The HTML report's content, built live from a recorder and read back from a structured trace."""

from __future__ import annotations

import re

import pytest
import torch
from helpers import line_of

import stenograph
from stenograph import structured_trace
from stenograph.report import from_trace, html, recorder
from stenograph.report.model import CallStats, resume_parent

from ._support import breaking

BREAK_LINE = line_of(breaking, "print(")


@pytest.fixture
def session():
    rec = recorder.Recorder(time_calls=True, title="test report").start()
    try:
        g = stenograph.compile(breaking, backend="eager")
        for x, n in [(torch.randn(4), 1), (torch.randn(4), 1), (torch.randn(4), 2), (torch.randn(8), 2)]:
            g(x, n)
    finally:
        rec.stop()
    return rec.session


def test_recorder_builds_frames_and_compilations(session):
    names = [f.name for f in session.frames]
    assert names[0] == "breaking" and names[1].startswith("__resume_at_")
    main, resume = session.frames[0], session.frames[1]
    assert resume.resume_of == main.frame_id
    assert [c.status for c in main.compiles] == ["break", "break"]
    assert main.compiles[0].graph_break.line == BREAK_LINE
    assert main.compiles[0].graph_break.reason == "call to print"
    assert main.compiles[1].recompile.check.startswith("L['x']: Tensor torch.float32 cpu size=[4]")
    assert "size=[8]" in main.compiles[1].recompile.new_value
    assert main.compiles[1].recompile.failed == main.compiles[0].compile_id
    assert resume.compiles[1].recompile.check == "L['n'] == 1"
    assert resume.compiles[1].recompile.new_value == "2"


def test_calls_are_timed_only_while_recording(session):
    main = session.frames[0]
    assert main.compiles[0].calls.count == 3  # three calls with 4 elements
    assert main.compiles[1].calls.count == 1
    assert main.compiles[0].calls.median_s > 0
    stenograph.reset()
    g = stenograph.compile(breaking, backend="eager")
    g(torch.randn(4), 1)
    entry = g.__stenograph_cache__.entries[0]
    assert not hasattr(entry.fn, "__wrapped__")  # not recording: the plain transformed function


def test_report_html_has_every_part(session):
    text = html.render(session)
    assert text.startswith("<!DOCTYPE html>")
    for part in (
        "test report",
        "Graphs, graph breaks and recompiles per frame",
        "Time per phase (ms)",
        "[0/0]".replace("0/0", session.frames[0].compiles[0].compile_id),
        "breaking",
        "resumes [",
        "call to print",
        "Guard function",
        "Transformed code",
        "Node diagram",
        "median call",
        "Recompiled:",
    ):
        assert part in text, part
    highlighted = re.search(r'<span class="line hl"><span class="ln">(\d+)</span>([^<]*)</span>', text)
    assert highlighted is not None
    assert int(highlighted.group(1)) == BREAK_LINE
    assert "print(&quot;between graphs&quot;)" in highlighted.group(2)


def test_report_is_self_contained(session):
    text = html.render(session)
    assert "<script" not in text
    assert "<link" not in text
    assert not re.search(r'(src|href)="(https?:)?//', text)
    assert text.count("<svg") >= 3  # two plots and graph diagrams


def test_empty_session_renders():
    text = html.render(recorder.Recorder(time_calls=False).session)
    assert "Nothing was compiled." in text


def test_trace_round_trip_gives_the_same_report_data(session, tmp_path):
    writer = structured_trace.TraceWriter(str(tmp_path / "stenograph_trace_1_2.log"))
    writer.header(session.versions)
    for frame in session.frames:
        for record in frame.compiles:
            writer.on_record("started", frame, record)
            if record.recompile is not None:
                writer.on_record("recompile", frame, record)
            if record.graph_break is not None:
                writer.on_record("graph_break", frame, record)
            writer.on_record("compiled", frame, record)
    writer.write_call_times(session.frames)
    writer.close()
    loaded = from_trace.load(str(tmp_path))
    assert loaded.versions == session.versions
    assert [(f.frame_id, f.name, f.resume_of) for f in loaded.frames] == [
        (f.frame_id, f.name, f.resume_of) for f in session.frames
    ]
    for before, after in zip(session.compiles(), loaded.compiles()):
        assert after.compile_id == before.compile_id
        assert after.graph.code == before.graph.code
        assert after.graph.nodes == before.graph.nodes
        assert after.guards == before.guards
        assert after.guard_source.rstrip() == before.guard_source.rstrip()
        assert after.transformed_source.rstrip() == before.transformed_source.rstrip()
        assert after.graph_break == before.graph_break
        assert after.recompile == before.recompile
        assert after.calls == before.calls
        assert after.capture_s == pytest.approx(before.capture_s)
        assert after.backend_s == pytest.approx(before.backend_s)


def test_call_stats_keep_the_first_call_apart():
    stats = CallStats()
    for seconds in (1.0, 0.1, 0.3, 0.2):
        stats.add(seconds)
    assert stats.count == 4 and stats.first_s == 1.0 and stats.median_s == pytest.approx(0.2)


def test_resume_parent():
    assert resume_parent("__resume_at_40_forward") == "forward"
    assert resume_parent("forward") is None


def test_a_frame_that_gives_up_is_reported_and_traced(tmp_path):
    def add_one(x):
        return x + 1

    rec = recorder.Recorder(time_calls=False).start()
    try:
        g = stenograph.compile(add_one, backend="eager")
        with stenograph.config.patch(recompile_limit=1), pytest.warns(stenograph.StenographWarning):
            g(torch.randn(2))
            g(torch.randn(2, 2))
    finally:
        rec.stop()
    (frame,) = rec.session.frames
    failed = frame.compiles[1]
    assert failed.status == "failed" and failed.failure == "recompile limit (1) reached"
    assert failed.recompile is not None and "(got" not in failed.recompile.check
    assert "Runs eagerly:</b> recompile limit (1) reached" in html.render(rec.session)
    writer = structured_trace.TraceWriter(str(tmp_path / "stenograph_trace_1_1.log"))
    writer.on_record("started", frame, frame.compiles[0])
    writer.on_record("compiled", frame, frame.compiles[0])
    writer.on_record("recompile", frame, failed)
    writer.on_record("failed", frame, failed)
    writer.close()
    trace = (tmp_path / "stenograph_trace_1_1.log").read_text()
    assert '"fail_type": "RecompileLimitExceeded"' in trace
    loaded = from_trace.load(str(tmp_path))
    assert loaded.compiles()[1].failure == "recompile limit (1) reached"
