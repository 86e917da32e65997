"""A script that compiles one function, then exits with status 3 (the status must come back)."""

import sys

import torch


@torch.compile(backend="eager")
def double(x):
    return x * 2


double(torch.ones(3))
sys.exit(3)
