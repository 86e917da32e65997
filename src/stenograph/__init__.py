"""stenograph: a just-in-time graph capturer for PyTorch (public API only)."""

from . import config, errors
from .errors import StenographError, Unsupported

__all__ = ["config", "errors", "StenographError", "Unsupported"]
