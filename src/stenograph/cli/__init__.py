"""The `stenograph` command: `demo`, `run script.py [args]`, `report TRACE`."""

from __future__ import annotations

import argparse
import sys

from ..report import load_trace, write
from . import demo, runner

DEFAULT_REPORT = "stenograph-report.html"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="stenograph", description="A just-in-time graph capturer for PyTorch")
    sub = parser.add_subparsers(dest="command", required=True)

    demo_command = sub.add_parser(
        "demo", help="compile the seed examples and a Transformer block, show what was captured"
    )
    report_help = f"HTML report (default {DEFAULT_REPORT})"
    demo_command.add_argument(
        "--backend",
        choices=("auto", "inductor", "eager"),
        default="auto",
        help="backend for the Transformer block (auto: inductor if a C++ compiler is present)",
    )
    demo_command.add_argument("--report", default=DEFAULT_REPORT, metavar="PATH", help=report_help)

    run = sub.add_parser("run", help="run a script with torch.compile routed to stenograph; write the report at exit")
    run.add_argument("--report", default=DEFAULT_REPORT, metavar="PATH", help=report_help)
    run.add_argument("script", help="the Python script to run, unmodified")
    run.add_argument("args", nargs=argparse.REMAINDER, help="the script's own arguments")

    report = sub.add_parser("report", help="build the HTML report from a saved structured trace")
    report.add_argument("trace", help="a trace file, or a STENOGRAPH_TRACE/TORCH_TRACE directory (newest trace)")
    report.add_argument("-o", "--output", default=DEFAULT_REPORT, metavar="PATH", help=report_help)

    args = parser.parse_args(argv)
    if args.command == "demo":
        demo.main(backend=args.backend, report_path=args.report)
        return 0
    if args.command == "run":
        return runner.run_script(args.script, args.args, args.report)
    try:
        session = load_trace(args.trace)
    except FileNotFoundError as e:
        print(f"stenograph report: {e}", file=sys.stderr)
        return 2
    print(f"stenograph: report written to {write(session, args.output)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
