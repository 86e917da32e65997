"""An unmodified torch.compile user script: one graph break (print) and recompiles (a new int,
a new shape). `stenograph run` and the trace tests run it."""

import sys

import torch


def scale(x):
    return x.cos() * 2


def f(x, n):
    x = x * 2
    print("between graphs")
    x = torch.relu(scale(x))
    if n > 0:
        return x + n
    return x


def main():
    g = torch.compile(f, backend="eager")
    for x, n in [(torch.randn(4), 1), (torch.randn(4), 1), (torch.randn(4), 2), (torch.randn(8), 2)]:
        torch.testing.assert_close(g(x, n), f(x, n))
    print("done", " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
