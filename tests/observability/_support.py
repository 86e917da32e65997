"""Helpers for the observability tests: a function that breaks, running the CLI, decoding PNG
screenshots."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import zlib

import torch

SCRIPTS = os.path.join(os.path.dirname(__file__), "scripts")


def breaking(x, n):
    """Two graphs around a print; the second depends on `n` (a guard)."""
    x = x * 2
    print("between graphs")
    x = torch.relu(x)
    if n > 0:
        return x + n
    return x


def run_cli(args: list[str], cwd: str, env: dict[str, str] | None = None, timeout: int = 300):
    """`python -m stenograph ARGS` in a fresh process (what a user's shell runs)."""
    full_env = {k: v for k, v in os.environ.items() if k not in ("STENOGRAPH_TRACE", "TORCH_TRACE", "STENOGRAPH_LOGS")}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "stenograph", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def png_pixels(path: str) -> tuple[int, int, set[tuple[int, int, int]]]:
    """(width, height, set of RGB colours) of an 8-bit RGB/RGBA, non-interlaced PNG."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, b""
    width = height = channels = 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and colour in (2, 6) and interlace == 0, "unsupported PNG layout"
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
    raw = zlib.decompress(idat)
    stride = width * channels
    previous = bytearray(stride)
    colours: set[tuple[int, int, int]] = set()
    for row in range(height):
        start = row * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        _unfilter(kind, line, previous, channels)
        for x in range(0, stride, channels * 4):  # every 4th pixel is plenty to find colours
            colours.add((line[x], line[x + 1], line[x + 2]))
        previous = line
    return width, height, colours


def _unfilter(kind: int, line: bytearray, up: bytearray, bpp: int) -> None:
    if kind == 0:
        return
    n = len(line)
    if kind == 1:
        for i in range(bpp, n):
            line[i] = (line[i] + line[i - bpp]) & 0xFF
    elif kind == 2:
        for i in range(n):
            line[i] = (line[i] + up[i]) & 0xFF
    elif kind == 3:
        for i in range(n):
            left = line[i - bpp] if i >= bpp else 0
            line[i] = (line[i] + ((left + up[i]) >> 1)) & 0xFF
    elif kind == 4:
        for i in range(n):
            a = line[i - bpp] if i >= bpp else 0
            b = up[i]
            c = up[i - bpp] if i >= bpp else 0
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
            line[i] = (line[i] + pred) & 0xFF
    else:
        raise ValueError(f"bad PNG filter {kind}")
