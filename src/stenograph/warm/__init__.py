"""Warm start: compiled entries persisted, and installed in a later process without tracing.

`config.cache_dir` (or `STENOGRAPH_CACHE_DIR`) turns it on; `save_artifacts` / `load_artifacts`
carry a process's entries to another process or machine. See docs/design.md, "Warm start".
"""

from .cache import install_persisted, persisting, prepare, store
from .portable import load_artifacts, save_artifacts

__all__ = ["install_persisted", "load_artifacts", "persisting", "prepare", "save_artifacts", "store"]
