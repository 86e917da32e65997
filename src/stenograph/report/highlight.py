"""Python syntax colouring for the report's code blocks, with the standard `tokenize` module
(generated code and graph code read far better with keywords and strings set apart)."""

from __future__ import annotations

import io
import keyword
import token
import tokenize
from html import escape


def python_html(source: str) -> str:
    """`source` as HTML spans (kw, str, num, com, name); falls back to plain text if it won't tokenize."""
    lines = source.splitlines(keepends=True)
    out: list[str] = []
    row, col = 1, 0
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            (srow, scol), (erow, ecol) = tok.start, tok.end
            out.append(escape(_between(lines, (row, col), (srow, scol))))
            text = escape(tok.string)
            klass = _class(tok)
            out.append(f'<span class="{klass}">{text}</span>' if klass and text else text)
            row, col = erow, ecol
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return escape(source)
    out.append(escape(_between(lines, (row, col), (len(lines) + 1, 0))))
    return "".join(out)


def _class(tok: tokenize.TokenInfo) -> str:
    if tok.type == token.NAME and keyword.iskeyword(tok.string):
        return "kw"
    if tok.type == token.STRING:
        return "str"
    if tok.type == token.NUMBER:
        return "num"
    if tok.type == token.COMMENT:
        return "com"
    return ""


def _between(lines: list[str], start: tuple[int, int], end: tuple[int, int]) -> str:
    """Source text from `start` (row, col) up to `end`: the whitespace tokenize skips."""
    (srow, scol), (erow, ecol) = start, end
    if (srow, scol) >= (erow, ecol):
        return ""
    if srow == erow:
        return lines[srow - 1][scol:ecol] if srow - 1 < len(lines) else ""
    parts = [lines[srow - 1][scol:]] if srow - 1 < len(lines) else []
    parts += lines[srow : erow - 1]
    if erow - 1 < len(lines):
        parts.append(lines[erow - 1][:ecol])
    return "".join(parts)
