"""A script that compiles one function, then raises: the report must still be written."""

import torch


@torch.compile(backend="eager")
def double(x):
    return x * 2


double(torch.ones(3))
raise RuntimeError("the user's script failed")
