"""The order of layers inside `stenograph.variables`: a module imports its own group and the
groups before it, never a later one (at module level, under `if TYPE_CHECKING:` or inside a
function), and no module imports another of the package inside a function.

What a tracker needs from a later group it gets from the frame it is handed: `frame.wrap` and
`frame.instantiate` (the builder's), `frame.new_exception`. docs/design.md draws the same table.
"""

from __future__ import annotations

import ast
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "src" / "stenograph" / "variables"

# bottom to top
GROUPS: list[tuple[str, list[str]]] = [
    ("base", ["base", "class_lookup", "trace_rules"]),
    (
        "values",
        [
            "exceptions",
            "symbolic",
            "constants",
            "identity",
            "cells",
            "contexts",
            "global_contexts",
            "profiler_ranges",
            "warning_blocks",
            "traced_warnings",
            "tensor_effects",
            "double_backward",
        ],
    ),
    (
        "containers",
        [
            "containers",
            "collection_types",
            "frame_dicts",
            "environ",
            "suspended_generators",
            "generators",
            "mapping_proxy",
            "weak_containers",
        ],
    ),
    (
        "tensors",
        [
            "function_modes",
            "tensor",
            "tensor_scalars",
            "tensor_literals",
            "new_parameters",
            "numpy_oracle",
            "numpy_arrays",
            "nonstrict_calls",
            "higher_order",
            "tensor_hooks",
            "func_transforms",
            "checkpoint",
            "compile_regions",
            "autograd_function",
        ],
    ),
    ("functions", ["functions", "collectives", "random_draws"]),
    (
        "objects",
        [
            "descriptors",
            "sequence_protocol",
            "user_classes",
            "class_statements",
            "frame_objects",
            "functional_call",
            "module_slices",
            "named_tuples",
            "new_modules",
            "optimizers",
            "deep_copy",
        ],
    ),
    ("operations", ["operators", "builtins", "library", "patterns"]),
    ("builder", ["builder"]),
]
GROUP_OF = {module: index for index, (_, modules) in enumerate(GROUPS) for module in modules}


def _modules() -> list[str]:
    return sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__")


def _imports(path: pathlib.Path) -> list[tuple[str, int, bool]]:
    """The modules of this package `path` imports: (module, line, inside a function)."""
    found: list[tuple[str, int, bool]] = []

    def visit(node: ast.AST, local: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = local or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.ImportFrom):
                for module in _targets(child):
                    found.append((module, child.lineno, inner))
            elif isinstance(child, ast.Import):
                prefix = "stenograph.variables."
                for alias in child.names:
                    if alias.name.startswith(prefix):
                        found.append((alias.name.removeprefix(prefix).split(".")[0], child.lineno, inner))
            visit(child, inner)

    visit(ast.parse(path.read_text()), False)
    return found


def _targets(node: ast.ImportFrom) -> list[str]:
    """The modules of this package a `from ... import ...` reaches (`from . import a, b` reaches two)."""
    if node.level == 1:
        return [node.module.split(".")[0]] if node.module else [a.name for a in node.names]
    if node.level == 0 and (node.module or "").startswith("stenograph.variables"):
        rest = node.module.removeprefix("stenograph.variables").lstrip(".")
        return [rest.split(".")[0]] if rest else [a.name for a in node.names]
    return []


def test_every_module_has_one_group() -> None:
    listed = [module for _, modules in GROUPS for module in modules]
    assert len(listed) == len(set(listed)), "a module is listed twice"
    assert sorted(listed) == _modules(), f"modules to place in GROUPS of {__file__}"


def test_no_module_imports_a_later_group() -> None:
    upward = []
    for module in _modules():
        for target, line, _ in _imports(PACKAGE / f"{module}.py"):
            if GROUP_OF[target] > GROUP_OF[module]:
                upward.append(
                    f"variables/{module}.py:{line} ({GROUPS[GROUP_OF[module]][0]}) imports "
                    f"{target} ({GROUPS[GROUP_OF[target]][0]})"
                )
    assert not upward, "imports from a group to a later one:\n" + "\n".join(upward)


def test_no_module_imports_another_inside_a_function() -> None:
    local = [
        f"variables/{module}.py:{line} imports {target}"
        for module in _modules()
        for target, line, inside in _imports(PACKAGE / f"{module}.py")
        if inside
    ]
    assert not local, "function-local imports between tracker modules (a cycle to remove):\n" + "\n".join(local)
