"""The `stenograph` command."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="stenograph", description="A just-in-time graph capturer for PyTorch")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="compile the seed examples and a Transformer block, show what was captured")
    args = parser.parse_args(argv)
    if args.command == "demo":
        from .demo import main as demo

        demo()
    return 0


if __name__ == "__main__":
    sys.exit(main())
