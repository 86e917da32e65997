"""The HTML report: records of what was compiled (live or from a trace), rendered to one file."""

from .from_trace import load as load_trace
from .html import render, write
from .model import Session
from .recorder import Recorder

__all__ = ["Recorder", "Session", "load_trace", "render", "write"]
