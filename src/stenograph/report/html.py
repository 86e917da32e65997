"""The HTML report: one self-contained file (inline CSS and SVG, no script, no network).

Per compiled frame: each compilation's graph (code and node diagram), graph break with the user's
source lines highlighted, guards, recompile reason and timings (capture, backend compile, per
call). On top, a summary and the plots people would rather look at than read.
"""

from __future__ import annotations

import os
import time
from html import escape

from .highlight import python_html
from .model import CompileRecord, FrameRecord, Session
from .svg import graph_diagram, grouped_bars, stacked_bars

CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #1d2430;
       background: #f6f7f9; }
header { background: #1d2430; color: #fff; padding: 18px 28px; }
header h1 { margin: 0 0 4px; font-size: 22px; }
header .meta { color: #b8c2d0; font-size: 12px; }
main { padding: 18px 28px 60px; max-width: 1400px; }
h2 { font-size: 18px; margin: 28px 0 10px; }
h3 { font-size: 15px; margin: 14px 0 6px; }
.cards { display: flex; flex-wrap: wrap; gap: 10px; }
.card { background: #fff; border: 1px solid #dde2ea; border-radius: 8px; padding: 10px 16px; min-width: 110px; }
.card .n { font-size: 22px; font-weight: 600; }
.card .l { font-size: 12px; color: #5b6675; }
.plots { display: flex; flex-wrap: wrap; gap: 20px; background: #fff; border: 1px solid #dde2ea;
         border-radius: 8px; padding: 14px; margin-top: 14px; }
table { border-collapse: collapse; background: #fff; }
th, td { border: 1px solid #dde2ea; padding: 4px 8px; text-align: left; vertical-align: top; font-size: 13px; }
th { background: #eef1f5; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
section.frame { background: #fff; border: 1px solid #dde2ea; border-radius: 8px; padding: 4px 18px 14px;
                margin: 18px 0; }
section.frame > h2 { margin-top: 12px; }
.loc { color: #5b6675; font-size: 12px; font-weight: normal; }
details.compile { border-top: 1px solid #e6e9ee; padding: 6px 0; }
details.compile > summary { cursor: pointer; font-weight: 600; }
details > summary { cursor: pointer; }
.badge { display: inline-block; border-radius: 10px; padding: 0 8px; font-size: 11px; font-weight: 600;
         margin-left: 6px; vertical-align: 1px; }
.ok { background: #dff3e3; color: #1f6b33; } .break { background: #fff0d6; color: #8a5a00; }
.failed { background: #fde0e0; color: #9b1c1c; } .recompile { background: #e4ebfb; color: #23408e; }
.compiling { background: #eee; color: #555; }
pre { background: #f7f8fa; border: 1px solid #e3e7ee; border-radius: 6px; padding: 8px 10px; overflow: auto;
      font: 12px/1.4 ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; max-height: 480px; }
pre.src { padding: 6px 0; }
pre.src .line { display: block; padding: 0 10px; }
pre.src .line.hl { background: #ffe3a3; font-weight: 600; }
pre.src .ln { color: #8a94a3; display: inline-block; width: 4em; }
.kw { color: #8b2fc9; } .str { color: #a2541c; } .num { color: #0b7a75; } .com { color: #6a7683; }
.why { background: #fff8e6; border-left: 4px solid #f0b429; padding: 6px 10px; margin: 6px 0; }
.why.fail { background: #fdecec; border-color: #d64545; }
.why.rec { background: #eef3fd; border-color: #4e79a7; }
.diagram { overflow: auto; max-height: 560px; border: 1px solid #e3e7ee; border-radius: 6px; background: #fcfcfd; }
.diagram svg text.name { font-weight: 600; }
svg text.title { font-weight: 600; }
.note { color: #5b6675; }
"""


def ms(seconds: float | None) -> str:
    return "–" if seconds is None else f"{seconds * 1e3:.1f} ms"


def us(seconds: float | None) -> str:
    return "–" if seconds is None else f"{seconds * 1e6:.1f} µs"


def render(session: Session) -> str:
    """The whole report as one HTML string."""
    created = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(session.created or time.time()))
    versions = ", ".join(f"{k} {v}" for k, v in session.versions.items())
    body = [
        f"<header><h1>{escape(session.title)}</h1>",
        f'<div class="meta">{escape(session.command)}<br>{created} · {escape(versions)}</div></header>',
        "<main>",
        _summary(session),
        _frame_table(session),
        *(_frame(session, frame) for frame in _ordered(session)),
        "</main>",
    ]
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(session.title)}</title><style>{CSS}</style></head><body>"
        + "\n".join(body)
        + "</body></html>\n"
    )


def write(session: Session, path: str) -> str:
    """Write the report to `path`; returns its absolute path."""
    path = os.path.abspath(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(render(session))
    return path


def _ordered(session: Session) -> list[FrameRecord]:
    """Each user frame followed by its resume functions."""
    ordered: list[FrameRecord] = []
    for frame in session.frames:
        if frame.resume_of is None or session.frame(frame.resume_of) is None:
            ordered.append(frame)
            ordered += [f for f in session.frames if f.resume_of == frame.frame_id and f is not frame]
    return ordered


def _frame_name(frame: FrameRecord) -> str:
    return f"[{frame.frame_id}] {frame.name}"


def _summary(session: Session) -> str:
    compiles = session.compiles()
    graphs = sum(c.graph is not None for c in compiles)
    breaks = sum(c.graph_break is not None for c in compiles)
    recompiles = sum(c.recompile is not None for c in compiles)
    failed = sum(c.failure is not None for c in compiles)
    compile_s = sum((c.capture_s or 0) + (c.backend_s or 0) for c in compiles)
    calls = sum(c.calls.count for c in compiles)
    cards = [
        (len(session.frames), "frames compiled"),
        (len(compiles), "compilations"),
        (graphs, "graphs"),
        (breaks, "graph breaks"),
        (recompiles, "recompiles"),
        (failed, "run eagerly"),
        (f"{compile_s:.2f} s", "compile time"),
        (calls, "timed calls"),
    ]
    html = ['<h2 id="summary">Summary</h2><div class="cards">']
    html += [f'<div class="card"><div class="n">{n}</div><div class="l">{escape(t)}</div></div>' for n, t in cards]
    html.append("</div>")
    if not session.frames:
        html.append('<p class="note">Nothing was compiled.</p>')
        return "\n".join(html)
    frames = _ordered(session)
    labels = [_frame_name(f) for f in frames]
    counts = grouped_bars(
        "Graphs, graph breaks and recompiles per frame",
        labels,
        [
            ("graphs", [float(f.graph_count) for f in frames]),
            ("graph breaks", [float(f.break_count) for f in frames]),
            ("recompiles", [float(f.recompile_count) for f in frames]),
        ],
    )
    phases = stacked_bars(
        "Time per phase (ms)",
        labels,
        [
            ("capture", [sum(c.capture_s or 0 for c in f.compiles) * 1e3 for f in frames]),
            ("backend compile", [sum(c.backend_s or 0 for c in f.compiles) * 1e3 for f in frames]),
            ("calls (compiled code)", [sum(c.calls.total_s for c in f.compiles) * 1e3 for f in frames]),
        ],
        " ms",
    )
    html.append(f'<div class="plots">{counts}{phases}</div>')
    return "\n".join(html)


def _frame_table(session: Session) -> str:
    if not session.frames:
        return ""
    rows = []
    for frame in _ordered(session):
        compiles = frame.compiles
        compile_s = sum((c.capture_s or 0) + (c.backend_s or 0) for c in compiles)
        calls = sum(c.calls.count for c in compiles)
        medians = [c.calls.median_s for c in compiles if c.calls.median_s is not None]
        rows.append(
            f'<tr><td><a href="#frame-{frame.frame_id}">{escape(_frame_name(frame))}</a></td>'
            f"<td>{escape(frame.filename)}:{frame.firstlineno}</td>"
            f'<td class="num">{len(compiles)}</td><td class="num">{frame.graph_count}</td>'
            f'<td class="num">{frame.break_count}</td><td class="num">{frame.recompile_count}</td>'
            f'<td class="num">{ms(compile_s)}</td><td class="num">{calls}</td>'
            f'<td class="num">{us(min(medians)) if medians else "–"}</td></tr>'
        )
    head = (
        "<tr><th>frame</th><th>where</th><th>compilations</th><th>graphs</th><th>breaks</th>"
        "<th>recompiles</th><th>compile time</th><th>calls</th><th>per call (median)</th></tr>"
    )
    return f'<h2 id="frames">Frames</h2><table>{head}{"".join(rows)}</table>'


def _frame(session: Session, frame: FrameRecord) -> str:
    parent = session.frame(frame.resume_of) if frame.resume_of is not None else None
    subtitle = ""
    if parent is not None:
        subtitle = f" — resumes {escape(_frame_name(parent))} after a graph break"
    html = [
        f'<section class="frame" id="frame-{frame.frame_id}">',
        f'<h2>{escape(_frame_name(frame))}{subtitle} <span class="loc">{escape(frame.filename)}:'
        f"{frame.firstlineno}</span></h2>",
    ]
    for k, record in enumerate(frame.compiles):
        html.append(_compile(record, open_=k == 0))
    html.append("</section>")
    return "\n".join(html)


def _badges(record: CompileRecord) -> str:
    status = record.status
    text = {"ok": "compiled", "break": "graph break", "failed": "runs eagerly", "compiling": "unfinished"}[status]
    badges = f'<span class="badge {status}">{text}</span>'
    if record.recompile is not None:
        badges += '<span class="badge recompile">recompile</span>'
    return badges


def _compile(record: CompileRecord, open_: bool) -> str:
    timing = ""
    if record.compiled:
        timing = f" · capture {ms(record.capture_s)} · backend {ms(record.backend_s)}"
    if record.calls.count:
        timing += f" · {record.calls.count} calls, median {us(record.calls.median_s)}"
    graph = record.graph
    ops = f" · {_plural(graph.op_count, 'op')}" if graph is not None else ""
    html = [
        f'<details class="compile" id="compile-{record.compile_id.replace("/", "-")}"{" open" if open_ else ""}>',
        f'<summary>[{record.compile_id}]{_badges(record)}<span class="loc">{ops}{timing}</span></summary>',
    ]
    if record.recompile is not None:
        rec = record.recompile
        new = f"<br>new value: <code>{escape(rec.new_value)}</code>" if rec.new_value is not None else ""
        html.append(
            f'<div class="why rec"><b>Recompiled:</b> a guard of [{escape(rec.failed)}] failed: '
            f"<code>{escape(rec.check)}</code>{new}</div>"
        )
    if record.failure is not None:
        html.append(f'<div class="why fail"><b>Runs eagerly:</b> {escape(record.failure)}</div>')
    for line in record.cache:
        html.append(f'<div class="why"><b>Persisted cache:</b> {escape(line)}</div>')
    if record.graph_break is not None:
        html.append(_graph_break(record))
    if record.ddp_split is not None:
        summary, _, pieces = record.ddp_split.partition("\n")
        html.append(f'<div class="why"><b>Split for DDP:</b> {escape(summary)}</div>')
        html.append(f"<details><summary>Pieces</summary><pre>{escape(pieces)}</pre></details>")
    if graph is not None:
        html.append(f"<h3>Graph ({_plural(graph.op_count, 'op')}, {_plural(graph.input_count, 'input')})</h3>")
        html.append(f"<pre>{python_html(graph.code)}</pre>")
        unfold = " open" if len(graph.nodes) <= 60 else ""
        html.append(f"<details{unfold}><summary>Node diagram</summary>")
        html.append(f'<div class="diagram">{graph_diagram(graph.nodes)}</div></details>')
    elif record.compiled:
        html.append('<p class="note">No tensor operations: no graph.</p>')
    if record.guards:
        html.append(f"<h3>Guards ({len(record.guards)})</h3><ul>")
        html += [f"<li><code>{escape(g)}</code></li>" for g in record.guards]
        html.append("</ul>")
        guard = python_html(record.guard_source)
        html.append(f"<details><summary>Guard function</summary><pre>{guard}</pre></details>")
    if record.transformed_source:
        html.append(
            f"<details><summary>Transformed code</summary><pre>{python_html(record.transformed_source)}</pre></details>"
        )
    if record.compiled or record.calls.count:
        html.append(_timings(record))
    if record.stack:
        frames = "\n".join(f"{f}:{line} in {name}: {text}" for f, line, name, text in record.stack)
        html.append(f"<details><summary>Compiled from</summary><pre>{escape(frames)}</pre></details>")
    html.append("</details>")
    return "\n".join(html)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _graph_break(record: CompileRecord) -> str:
    brk = record.graph_break
    assert brk is not None
    html = [
        f'<div class="why"><b>Graph break</b> at {escape(brk.filename)}:{brk.line}: '
        f'{escape(brk.reason)} <span class="loc">({escape(brk.instruction)})</span></div>'
    ]
    if brk.context:
        lines = []
        for number, text in brk.context:
            klass = "line hl" if number == brk.line else "line"
            lines.append(f'<span class="{klass}"><span class="ln">{number}</span>{escape(text)}</span>')
        html.append(f'<pre class="src">{"".join(lines)}</pre>')
    if len(brk.user_stack) > 1:
        stack = "\n".join(
            f'File "{f}", line {line}, in {name}\n    {str(text).strip()}'
            for f, line, name, text in reversed(brk.user_stack)
        )
        html.append(f"<details><summary>User stack</summary><pre>{escape(stack)}</pre></details>")
    return "\n".join(html)


def _timings(record: CompileRecord) -> str:
    calls = record.calls
    cells = [
        ("capture", ms(record.capture_s)),
        ("backend compile", ms(record.backend_s)),
        ("calls", str(calls.count)),
        ("first call", us(calls.first_s)),
        ("median call", us(calls.median_s)),
        ("total in calls", ms(calls.total_s) if calls.count else "–"),
    ]
    head = "".join(f"<th>{name}</th>" for name, _ in cells)
    row = "".join(f'<td class="num">{value}</td>' for _, value in cells)
    return f"<h3>Timings</h3><table><tr>{head}</tr><tr>{row}</tr></table>"
