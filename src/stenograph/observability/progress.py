"""Progress of long compilations on a terminal (`stenograph demo` and `stenograph run`).

An Inductor compile can take tens of seconds; a silent terminal looks hung. While a compilation
has run longer than `delay`, one status line counts its seconds; when it ends a final line says
how long it took. Nothing is written when the stream is not a terminal.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

from .. import events


class Progress:
    """Subscribes to compile events and redraws a status line from a background thread."""

    def __init__(self, stream: TextIO | None = None, delay: float = 1.0, interval: float = 0.25) -> None:
        self.stream = stream or sys.stderr
        self.delay = delay
        self.interval = interval
        self._lock = threading.Lock()
        self._current: tuple[str, float] | None = None  # (what, started)
        self._shown = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stenograph-progress", daemon=True)

    def start(self) -> Progress:
        events.subscribe(self._on_event)
        self._thread.start()
        return self

    def stop(self) -> None:
        events.unsubscribe(self._on_event)
        self._stop.set()
        self._thread.join()
        with self._lock:
            self._clear()

    def _on_event(self, event: events.CompileEvent) -> None:
        with self._lock:
            if isinstance(event, events.CompileStarted):
                self._clear()
                self._current = (f"[{event.compile_id}] {event.label}", time.perf_counter())
            elif isinstance(event, (events.FrameCompiled, events.RunsEagerly)) and self._current is not None:
                what, started = self._current
                if self._shown:
                    self._clear()
                    done = "compiled" if isinstance(event, events.FrameCompiled) else "gave up on"
                    self._write(f"stenograph: {done} {what} in {time.perf_counter() - started:.1f} s\n")
                self._current = None

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            with self._lock:
                if self._current is None:
                    continue
                what, started = self._current
                elapsed = time.perf_counter() - started
                if elapsed >= self.delay:
                    self._write(f"\r\033[Kstenograph: compiling {what} … {elapsed:.1f} s")
                    self._shown = True

    def _clear(self) -> None:
        if self._shown:
            self._write("\r\033[K")
            self._shown = False

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()


def start_on_terminal(stream: TextIO | None = None) -> Progress | None:
    """A started Progress when `stream` (stderr by default) is a terminal, else None."""
    stream = stream or sys.stderr
    if not (hasattr(stream, "isatty") and stream.isatty()):
        return None
    return Progress(stream).start()
