"""A per-thread switch, on for the length of a block: `stenograph.run()` and export's trace.

A leaf. Per thread, as torch.compile's frame callback is: what one thread does inside such a
block (running compiled code only, exporting) must not change what another thread compiles.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator


class ThreadFlag(threading.local):
    """`active` is True in the current thread inside `on()` blocks (which nest)."""

    active = False

    @contextlib.contextmanager
    def on(self) -> Iterator[None]:
        previous = self.active
        self.active = True
        try:
            yield
        finally:
            self.active = previous
