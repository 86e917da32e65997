"""Shrinks a mismatching program: drops statements of f (and returned values) while it still fails.

`python -m tests.fuzz.reduce --seed N --backend eager` (or `--file prog.py`) prints the smallest program found that
still gives a mismatch of the same kind (same backend, same first words of the difference).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import sys

import torch

from .generator import ALL_FEATURES, Program, default_features, generate
from .numpy_programs import generate_numpy
from .object_model import generate_objects
from .runner import check_program


def _function(tree: ast.Module) -> ast.FunctionDef:
    """The function under test: `f` (nested in a factory in object-model programs) or `forward`."""
    return next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name in ("f", "forward"))


def _bodies(node: ast.AST) -> list[list[ast.stmt]]:
    """Every statement list under node (bodies, else branches, handlers), outermost first."""
    found = []
    for child in ast.walk(node):
        for name in ("body", "orelse", "finalbody"):
            stmts = getattr(child, name, None)
            if isinstance(stmts, list) and stmts and isinstance(stmts[0], ast.stmt):
                found.append(stmts)
    return found


def _fails(program: Program, source: str, backend: str, kind: str) -> bool:
    candidate = dataclasses.replace(program, source=source)
    try:
        mismatches, _ = check_program(candidate, (backend,))
    except Exception:  # noqa: BLE001 - a candidate that breaks the harness is just rejected
        return False
    return any(m.signature() == kind for m in mismatches)


def shrink(program: Program, backend: str, kind: str) -> str:
    """The smallest source (by statements of f) that still fails with `kind` on `backend`."""
    source = program.source
    changed = True
    while changed:
        changed = False
        tree = ast.parse(source)
        fn = _function(tree)
        for stmts in _bodies(fn):
            i = 0
            while i < len(stmts):
                removed = stmts.pop(i)
                if not stmts:
                    stmts.append(ast.Pass())
                candidate = ast.unparse(tree)
                if candidate == source:  # a body removed with its parent earlier in this pass
                    break
                if _fails(program, candidate, backend, kind):
                    source, changed = candidate, True
                    if isinstance(stmts[-1], ast.Pass) and len(stmts) == 1:
                        break
                    continue
                if len(stmts) == 1 and isinstance(stmts[0], ast.Pass):
                    stmts.pop()
                stmts.insert(i, removed)
                i += 1
        ret = fn.body[-1]
        if isinstance(ret, ast.Return) and isinstance(ret.value, ast.Tuple):
            i = 0
            while len(ret.value.elts) > 1 and i < len(ret.value.elts):
                removed = ret.value.elts.pop(i)
                candidate = ast.unparse(tree)
                if _fails(program, candidate, backend, kind):
                    source, changed = candidate, True
                    continue
                ret.value.elts.insert(i, removed)
                i += 1
    return source


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz.reduce", description=__doc__)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--file", help="shrink this program instead of the seed's")
    parser.add_argument("--backend", default="eager")
    parser.add_argument("--kind", help="mismatch kind to keep (default: the first one seen)")
    parser.add_argument("--all-features", action="store_true")
    parser.add_argument("--generator", choices=("programs", "objects", "numpy"), default="programs")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    make = {"objects": generate_objects, "numpy": generate_numpy}.get(args.generator, generate)
    program = make(args.seed, ALL_FEATURES if args.all_features else default_features(args.backend))
    if args.file:
        with open(args.file) as handle:
            program = dataclasses.replace(program, source=handle.read(), stable=False)
    mismatches, _ = check_program(program, (args.backend,))
    if not mismatches:
        print("no mismatch")
        return 1
    kind = args.kind or mismatches[0].signature()
    print(f"shrinking seed {args.seed} on {args.backend}: {kind}", file=sys.stderr)
    small = shrink(program, args.backend, kind)
    final, _ = check_program(dataclasses.replace(program, source=small), (args.backend,))
    for m in final:
        if m.signature() == kind:
            print(f"# call {m.call}: {m.what[:500]}")
            break
    fn_start = small.index("def f(") if "def f(" in small else small.index("class Net")
    print(small[fn_start:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
