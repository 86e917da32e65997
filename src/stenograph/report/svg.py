"""Inline SVG for the report: bar charts and FX graph diagrams, drawn here so the report needs no
JavaScript library and no network."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from .model import NodeRecord

PALETTE = ("#4e79a7", "#e15759", "#f28e2b", "#76b7b2", "#59a14f", "#b07aa1")
OP_COLOURS = {
    "placeholder": "#e8f3e8",
    "call_function": "#e3edf9",
    "call_method": "#efe6f5",
    "call_module": "#fbeede",
    "get_attr": "#f4f4f4",
    "output": "#eeeeee",
}


def _text(x: float, y: float, text: str, anchor: str = "start", size: int = 12, cls: str = "") -> str:
    klass = f' class="{cls}"' if cls else ""
    return f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}"{klass}>{escape(text)}</text>'


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _title_and_legend(title: str, series: Sequence[tuple[str, Sequence[float]]], left: int, spacing: int) -> list[str]:
    """A chart's title, then one colour swatch and name per series in a row starting at `left`."""
    parts = [_text(0, 16, title, size=14, cls="title")]
    for k, (name, _) in enumerate(series):
        x = left + k * spacing
        parts.append(f'<rect x="{x}" y="26" width="10" height="10" fill="{PALETTE[k % len(PALETTE)]}"/>')
        parts.append(_text(x + 14, 35, name, size=11))
    return parts


def grouped_bars(
    title: str, labels: Sequence[str], series: Sequence[tuple[str, Sequence[float]]], unit: str = ""
) -> str:
    """Horizontal bars: one group per label, one bar per series (e.g. graphs and breaks per frame)."""
    bar, gap, label_w, plot_w = 14, 10, 260, 420
    group_h = bar * len(series) + gap
    top = 46
    height = top + group_h * len(labels) + 10
    peak = max([v for _, values in series for v in values] + [1e-12])
    parts = _title_and_legend(title, series, label_w, 130)
    for i, label in enumerate(labels):
        y0 = top + i * group_h
        parts.append(_text(label_w - 8, y0 + group_h / 2, _shorten(label, 38), anchor="end", size=11))
        for k, (_, values) in enumerate(series):
            value = values[i]
            width = plot_w * value / peak
            y = y0 + k * bar
            colour = PALETTE[k % len(PALETTE)]
            parts.append(
                f'<rect x="{label_w}" y="{y}" width="{max(width, 0.5):.1f}" height="{bar - 2}" fill="{colour}">'
                f"<title>{escape(label)}: {value:g}{unit}</title></rect>"
            )
            parts.append(_text(label_w + width + 4, y + bar - 4, f"{value:g}{unit}", size=10))
    width = label_w + plot_w + 70
    return _svg(width, height, parts, title)


def stacked_bars(title: str, labels: Sequence[str], series: Sequence[tuple[str, Sequence[float]]], unit: str) -> str:
    """Horizontal stacked bars (e.g. capture / backend / calls time per frame)."""
    bar, label_w, plot_w, top = 18, 260, 420, 46
    height = top + (bar + 8) * len(labels) + 10
    totals = [sum(values[i] for _, values in series) for i in range(len(labels))]
    peak = max(totals + [1e-12])
    parts = _title_and_legend(title, series, label_w, 140)
    for i, label in enumerate(labels):
        y = top + i * (bar + 8)
        parts.append(_text(label_w - 8, y + bar - 5, _shorten(label, 38), anchor="end", size=11))
        x = float(label_w)
        for k, (name, values) in enumerate(series):
            width = plot_w * values[i] / peak
            if width > 0:
                parts.append(
                    f'<rect x="{x:.1f}" y="{y}" width="{width:.1f}" height="{bar}" '
                    f'fill="{PALETTE[k % len(PALETTE)]}"><title>{escape(label)} {name}: '
                    f"{values[i]:.2f}{unit}</title></rect>"
                )
            x += width
        parts.append(_text(x + 4, y + bar - 5, f"{totals[i]:.1f}{unit}", size=10))
    return _svg(label_w + plot_w + 80, height, parts, title)


def graph_diagram(nodes: Sequence[NodeRecord], max_nodes: int = 400) -> str:
    """The FX graph as boxes and arrows, inputs at the top, each node one row below its inputs."""
    if len(nodes) > max_nodes:
        return f'<p class="note">{len(nodes)} nodes: too many to draw; the code above lists them all.</p>'
    layer: dict[str, int] = {}
    for node in nodes:
        layer[node.name] = 1 + max((layer[i] for i in node.inputs if i in layer), default=-1)
    rows: dict[int, list[NodeRecord]] = {}
    for node in nodes:
        rows.setdefault(layer[node.name], []).append(node)
    box_w, box_h, gap_x, gap_y, pad = 168, 38, 16, 34, 8
    widest = max(len(r) for r in rows.values())
    width = pad * 2 + widest * (box_w + gap_x)
    height = pad * 2 + len(rows) * (box_h + gap_y)
    centre: dict[str, tuple[float, float]] = {}
    boxes: list[str] = []
    for depth, row in sorted(rows.items()):
        row_w = len(row) * (box_w + gap_x) - gap_x
        x0 = (width - row_w) / 2
        y = pad + depth * (box_h + gap_y)
        for k, node in enumerate(row):
            x = x0 + k * (box_w + gap_x)
            centre[node.name] = (x + box_w / 2, y)
            fill = OP_COLOURS.get(node.op, "#ffffff")
            target = node.target if node.op != "output" else "return"
            tip = f"{node.name} = {node.op} {node.target} {node.shape}".strip()
            boxes.append(
                f'<g class="node"><title>{escape(tip)}</title>'
                f'<rect x="{x:.1f}" y="{y}" width="{box_w}" height="{box_h}" rx="6" fill="{fill}" stroke="#8899aa"/>'
                + _text(x + box_w / 2, y + 15, _shorten(node.name, 24), anchor="middle", size=11, cls="name")
                + _text(x + box_w / 2, y + 30, _shorten(f"{target} {node.shape}".strip(), 28), anchor="middle", size=9)
                + "</g>"
            )
    edges = []
    for node in nodes:
        x2, y2 = centre[node.name]
        for source in node.inputs:
            if source not in centre:
                continue
            x1, y1 = centre[source]
            y1 += box_h
            mid = (y1 + y2) / 2
            edges.append(
                f'<path d="M{x1:.1f},{y1:.1f} C{x1:.1f},{mid:.1f} {x2:.1f},{mid:.1f} {x2:.1f},{y2 - 2:.1f}" '
                f'fill="none" stroke="#8899aa" marker-end="url(#arrow)"/>'
            )
    defs = (
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#8899aa"/></marker></defs>'
    )
    return _svg(width, height, [defs, *edges, *boxes], "graph diagram")


def _svg(width: float, height: float, parts: list[str], label: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" role="img" aria-label="{escape(label)}">' + "".join(parts) + "</svg>"
    )
