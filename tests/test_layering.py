"""stenograph's layers: imports only point down, and function-local imports say why they are local.

The layers, bottom to top (a module may import its own layer and any layer below it):

    L0 leaves      errors, config, deferred_release, torch_state, torch_flags, module_hooks, marks, process_state,
                   recursion, stance, thread_flag, nested_caches, frame_skips: no stenograph imports but
                   each other
    L1 bytecode    decoding and assembling code objects, resume code
    L2 guards      sources, guard sets, generated Python functions (pyfunc), guard failures
                   (guards/failures.py); and events, whose records carry guard failures
    L3 shapes      fake tensors, ShapeEnv, dynamic-shape policy
    L4 tracing     variables (with trace_rules) + interpreter (with the opcode registry and break
                   renderings) + graph (mutual imports allowed: one symbolic-execution layer split
                   by concern), and backends
    L5 compiling   frame_compiler (compile_frame), verify, warm (persisted entries), callee_routing
                   (frames run eagerly with their calls routed to compiled callees)
    L6 entry       the entry wrapper and its caches; hands its wrappers down as `graph.runtime.Runtime`
    L7 user-facing api, compiler (the torch.compiler-style namespace), export (with export_shapes),
                   the package itself, testing, observability (logs, explain, inspection,
                   structured_trace, progress), report, cli (the command line, demo, runner)

What a lower layer needs from a higher one is passed down as an object (`Runtime`), or lives in
a leaf (`marks`, `process_state`). Every import is checked, at module level, under
`if TYPE_CHECKING:` and inside functions. A function-local import is the exception: each carries
a comment on its line or the line before it (or continues a block of local imports that does)
giving the reason, an import too slow or too optional to pay up front. Inside `variables` the
modules keep an order of their own (tests/variables/test_internal_order.py).
"""

from __future__ import annotations

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "src" / "stenograph"

LAYERS: dict[str, int] = {
    **dict.fromkeys(
        [
            "errors",
            "config",
            "deferred_release",
            "torch_state",
            "torch_flags",
            "module_hooks",
            "marks",
            "process_state",
            "recursion",
            "stance",
            "thread_flag",
            "nested_caches",
            "compile_callbacks",
            "frame_skips",
            "function_mode_stack",
            "code_tables",
        ],
        0,
    ),
    "bytecode": 1,
    **dict.fromkeys(["guards", "events"], 2),
    "shapes": 3,
    **dict.fromkeys(["variables", "interpreter", "graph", "backends"], 4),
    **dict.fromkeys(["frame_compiler", "verify", "warm", "callee_routing", "regions"], 5),
    "entry": 6,
    **dict.fromkeys(
        [
            "api",
            "compiler",
            "export",
            "export_shapes",
            "__init__",
            "__main__",
            "testing",
            "observability",
            "report",
            "cli",
        ],
        7,
    ),
}


def _sources() -> list[pathlib.Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _unit(path: pathlib.Path) -> str:
    """The layer unit of a file: its top-level module or subpackage."""
    return path.relative_to(PACKAGE).parts[0].removesuffix(".py")


def _imported_units(path: pathlib.Path, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The stenograph units an import statement in `path` reaches."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
        return [n.split(".")[1] for n in names if n.startswith("stenograph.")]
    if node.level == 0:
        module = node.module or ""
        if module == "stenograph":
            return [a.name for a in node.names]
        return [module.split(".")[1]] if module.startswith("stenograph.") else []
    package = list(path.relative_to(PACKAGE).parts[:-1])
    base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
    if base:
        return [base[0]]
    if node.module:
        return [node.module.split(".")[0]]
    return [a.name for a in node.names]  # `from . import config, events`


def _imports(tree: ast.AST) -> list[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement, with whether it sits inside a function."""
    found: list[tuple[ast.Import | ast.ImportFrom, bool]] = []

    def visit(node: ast.AST, local: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = local or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.append((child, inner))
            visit(child, inner)

    visit(tree, False)
    return found


def test_every_unit_has_a_layer() -> None:
    missing = sorted({_unit(p) for p in _sources()} - set(LAYERS))
    assert not missing, f"add these to LAYERS in {__file__}: {missing}"


def test_imports_only_point_down() -> None:
    inversions = []
    for path in _sources():
        unit = _unit(path)
        for node, local in _imports(ast.parse(path.read_text())):
            for target in _imported_units(path, node):
                if target not in LAYERS:
                    continue
                if LAYERS[target] > LAYERS[unit]:
                    where = "inside a function" if local else "at module level"
                    inversions.append(
                        f"{path.relative_to(PACKAGE)}:{node.lineno} (L{LAYERS[unit]} {unit}) imports "
                        f"L{LAYERS[target]} {target} {where}: {ast.unparse(node)}"
                    )
    assert not inversions, "imports from a lower layer to a higher one:\n" + "\n".join(inversions)


def test_function_local_imports_give_a_reason() -> None:
    unexplained = []
    for path in _sources():
        lines = path.read_text().splitlines()
        explained: set[int] = set()
        local_lines = sorted(n.lineno for n, local in _imports(ast.parse("\n".join(lines))) if local)
        for lineno in local_lines:
            line, before = lines[lineno - 1], lines[lineno - 2].strip() if lineno > 1 else ""
            if "#" in line or before.startswith("#") or (lineno - 1 in explained and before):
                explained.add(lineno)
            else:
                unexplained.append(f"{path.relative_to(PACKAGE)}:{lineno}: {line.strip()}")
    assert not unexplained, (
        "function-local imports need a reason comment (a slow or optional import) on the same or the "
        "preceding line, or should move to module level:\n" + "\n".join(unexplained)
    )


@pytest.mark.parametrize("unit", ["variables", "interpreter", "graph", "guards", "bytecode", "shapes"])
def test_tracing_layers_never_import_the_runtime(unit: str) -> None:
    """The inversions this layering removed stay removed (a regression check by name)."""
    for path in (PACKAGE / unit).rglob("*.py"):
        for node, _ in _imports(ast.parse(path.read_text())):
            assert not {"api", "entry", "frame_compiler", "compiler", "export"} & set(_imported_units(path, node)), (
                f"{path.relative_to(PACKAGE)}:{node.lineno}: {ast.unparse(node)}"
            )
