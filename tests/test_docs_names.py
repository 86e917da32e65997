"""The code that docs/design.md and docs/contributing.md cite exists.

The docs name files (`variables/builder.py`, `tests/...::test_x`), module members
(`frame_compiler.capture_frame`, `variables/base.Variable`, `graph.runtime.Runtime`), class
members (`Frame.run`, `CacheEntry.compile_id`) and bare names (`build_resume_code`,
`_owner_and_steps`) in backticks, and show functions in ```python blocks. Each is resolved in
the sources with `ast` (the native extension's C++ by its words):

- a path must exist, under the repository or `src/stenograph/` (a bare file name anywhere);
- `module.name` must be defined at the top level of that module (any module of that name, for
  a bare `registry`), `module.Class.member` and `Class.member` must be a member of the class
  (its methods, class attributes and fields, `self.x` assignments, those of its bases);
- a bare name with an underscore or a capital must be defined or used somewhere in the sources
  (opcode names are their registrations' strings); an all-lowercase word is prose, not checked;
- a function a python block defines must exist with the same parameter names, and the names it
  calls must be defined.

Names of other libraries (`torch.fx.passes.split_module`, `nn.Module.__getattr__`) and of user
code in examples (`m.weight`, `self._modules['fc1']`) start with a name stenograph does not
define and are not checked.
"""

from __future__ import annotations

import ast
import builtins
import re
from collections import defaultdict
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "stenograph"
DOCS = [ROOT / "docs" / "design.md", ROOT / "docs" / "contributing.md"]

# names the walkthroughs give an instance, checked as members of its class
INSTANCES = {"frame": "Frame"}
# bare names the docs cite from other libraries, and where they live
ELSEWHERE = {
    "allow_unspec_int_on_nn_module": "torch._dynamo.config",
    "attribute_map": "transformers.PretrainedConfig",
    "invoke_subgraph": "torch._higher_order_ops.invoke_subgraph",
    "tag_activation_checkpoint": "torch._higher_order_ops.wrap",
    "PYTHONPATH": "Python's module search path",
}

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
_PATH = re.compile(r"^([\w.\-]+(/[\w.\-]+)*(\.(py|cpp|md)|/)|(src|tests|docs|ci|benchmarks)(/[\w\-]+)+/?)$")
_DOTTED = re.compile(r"^[A-Za-z_]\w*([./][A-Za-z_]\w*)*$")
_DUNDER = re.compile(r"^__\w+__$")


@dataclass
class Sources:
    """What the Python modules (and the C++ extension) of stenograph define and use."""

    modules: dict[str, list[set[str]]] = field(default_factory=lambda: defaultdict(list))
    classes: dict[str, list[tuple[set[str], list[str]]]] = field(default_factory=lambda: defaultdict(list))
    functions: dict[str, list[list[str]]] = field(default_factory=lambda: defaultdict(list))
    defined: set[str] = field(default_factory=set)
    used: set[str] = field(default_factory=set)
    cpp_words: set[str] = field(default_factory=set)

    def module_keys(self, parts: list[str]) -> tuple[list[set[str]], int]:
        """The modules the longest leading `parts` name (a path under the package, or one module's
        own name) and how many parts that took."""
        if parts[0] == "stenograph":  # the package: its modules, or what its __init__ defines
            modules, taken = self.module_keys(parts[1:]) if parts[1:] else ([], 0)
            return (modules, taken + 1) if modules else (self.modules["__init__"], 1)
        for k in range(len(parts), 0, -1):
            found = self.modules.get("/".join(parts[:k]))
            if found:
                return found, k
        return [], 0

    def members(self, name: str) -> set[str]:
        """Every member of the classes named `name`, with those of their stenograph bases."""
        found: set[str] = set()
        pending, seen = [name], set()
        while pending:
            cls = pending.pop()
            if cls in seen:
                continue
            seen.add(cls)
            for own, bases in self.classes.get(cls, []):
                found |= own
                pending.extend(bases)
        return found


def _class_members(node: ast.ClassDef) -> set[str]:
    members: set[str] = set()
    for item in node.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            members.add(item.name)
        members |= _targets(item)
    for sub in ast.walk(node):
        if isinstance(sub, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for target in sub.targets if isinstance(sub, ast.Assign) else [sub.target]:
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
                    if target.value.id == "self":
                        members.add(target.attr)
    return members


def _targets(node: ast.AST) -> set[str]:
    """Names a top-level statement binds."""
    if isinstance(node, ast.Assign):
        return {n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return {node.target.id}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.If, ast.Try)):
        return {name for child in ast.iter_child_nodes(node) for name in _targets(child)}
    return set()


def _parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    a = node.args
    return [p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs]]


def _read_module(sources: Sources, key: str, tree: ast.Module) -> None:
    top = {name for node in tree.body for name in _targets(node)}
    if key == "config":  # the settings: keys of its table of defaults
        top |= {k.value for node in tree.body if _targets(node) == {"_DEFAULTS"} for k in node.value.keys}
    sources.modules[key].append(top)
    parts = key.split("/")
    if parts[-1] != "__init__":
        sources.modules[parts[-1]].append(top)  # `registry.SUPPORTED`: a module by its own name
    else:
        sources.modules["/".join(parts[:-1])].append(top)  # a package: its __init__
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            bases = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases]
            sources.classes[node.name].append((_class_members(node), bases))
            sources.defined.add(node.name)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            sources.functions[node.name].append(_parameters(node))
            sources.defined.add(node.name)
        elif isinstance(node, ast.Name):
            sources.used.add(node.id)
        elif isinstance(node, ast.Attribute):
            sources.used.add(node.attr)
        elif isinstance(node, ast.arg):
            sources.used.add(node.arg)
        elif isinstance(node, ast.keyword) and node.arg:
            sources.used.add(node.arg)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
            sources.used.add(node.value)
    sources.defined |= top


@cache
def _sources() -> Sources:
    sources = Sources()
    for path in sorted(PACKAGE.rglob("*.py")):
        key = path.relative_to(PACKAGE).with_suffix("").as_posix()
        _read_module(sources, key, ast.parse(path.read_text()))
    for path in sorted(ROOT.glob("tests/**/*.py")):
        _read_tests_module(sources, path)
    for path in PACKAGE.rglob("*.cpp"):
        sources.cpp_words |= set(re.findall(r"\w+", path.read_text()))
    sources.used |= sources.defined
    return sources


def _read_tests_module(sources: Sources, path: Path) -> None:
    """Test modules are cited by path (`tests/python/_support.check`): their top-level names only."""
    top = {name for node in ast.parse(path.read_text()).body for name in _targets(node)}
    sources.modules[path.relative_to(ROOT).with_suffix("").as_posix()].append(top)


def _path_problem(text: str) -> str | None:
    path, _, name = text.partition("::")
    if path.startswith(("..", "~", "/")):
        return None  # outside the repository
    if "/" in path.rstrip("/"):
        candidates = [ROOT / path, PACKAGE / path]
    else:
        candidates = [p for top in ("src", "tests", "benchmarks", "docs", "ci") for p in (ROOT / top).rglob(path)]
        candidates += [ROOT / path, PACKAGE / path]
    found = [p for p in candidates if p.exists()]
    if not found:
        return "no such file or folder"
    if name and not any(name in {n for node in ast.parse(p.read_text()).body for n in _targets(node)} for p in found):
        return f"{name} is not defined in {path}"
    return None


def _dotted_problem(text: str) -> str | None:
    sources = _sources()
    parts = re.split(r"[./]", text)
    if parts[0] in INSTANCES:
        return _member_problem(INSTANCES[parts[0]], parts[1])
    modules, taken = sources.module_keys(parts)
    if modules:
        rest = parts[taken:]
        if not rest:
            return None
        if not any(rest[0] in top for top in modules):
            return f"{rest[0]} is not defined in module {'/'.join(parts[:taken])}"
        if len(rest) > 1 and rest[0] in sources.classes:
            return _member_problem(rest[0], rest[1])
        return None
    if parts[0] in sources.classes:
        return _member_problem(parts[0], parts[1])
    if parts[0] in sources.cpp_words and parts[0][:1].isupper() and parts[1] not in sources.cpp_words:
        return None if _DUNDER.match(parts[1]) else f"{parts[1]} is not in the native extension's source"
    return None  # another library's, or an example's


def _member_problem(cls: str, member: str) -> str | None:
    if member in _sources().members(cls) or _DUNDER.match(member):
        return None
    return f"{cls} has no member {member}"


def _bare_problem(name: str) -> str | None:
    if _DUNDER.match(name) or name.startswith("___") or name in dir(builtins) or name in ELSEWHERE:
        return None
    if "_" not in name and name.islower():
        return None  # a word: prose as much as code
    sources = _sources()
    if name in sources.used or name in sources.cpp_words or name in sources.modules:
        return None
    return "defined and used nowhere in src/stenograph"


def _inline_problem(text: str) -> str | None:
    """Why a backticked citation does not resolve (None: it does, or it is not ours)."""
    text = " ".join(text.split())
    if _PATH.match(text.partition("::")[0]):
        return _path_problem(text)
    # `@op(...)`, `config.x = True`, `dynamic=True`: the name, without decorator, call or value
    name = re.sub(r"(\(.*\)|\[.*\])+$", "", re.sub(r" ?=.*$", "", text.removeprefix("@")))
    if not _DOTTED.match(name):
        return None
    if "." in name or "/" in name:
        return _dotted_problem(name)
    return _bare_problem(name)


def _block_problems(code: str) -> list[str]:
    """A python block's functions must exist with these parameters, its calls must be defined."""
    sources = _sources()
    problems = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            known = sources.functions.get(node.name)
            if not known:
                problems.append(f"def {node.name}: no such function")
            elif _parameters(node) not in known:
                problems.append(f"def {node.name}{tuple(_parameters(node))}: its parameters are {known}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id not in sources.defined and node.func.id not in dir(builtins):
                problems.append(f"{node.func.id}(...): not defined in src/stenograph")
    return problems


def _citations(doc: Path) -> list[tuple[int, str, str]]:
    """(line, citation, problem) for every citation of `doc` that does not resolve."""
    text = doc.read_text()
    found = []
    prose = text
    for block in _FENCE.finditer(text):
        line = text.count("\n", 0, block.start()) + 1
        prose = prose.replace(block.group(0), "\n" * block.group(0).count("\n"))
        if block.group(1) == "python":
            found += [(line, "python block", problem) for problem in _block_problems(block.group(2))]
        else:  # a diagram: the files it names
            for word in re.findall(r"[\w./\-]+", block.group(2)):
                if re.search(r"\.py$|\w/$", word) and (problem := _path_problem(word)):
                    found.append((line, word, problem))
    for match in re.finditer(r"`([^`]+)`", prose):
        problem = _inline_problem(match.group(1))
        if problem:
            found.append((prose.count("\n", 0, match.start()) + 1, match.group(1), problem))
    return found


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_cited_names_exist(doc: Path) -> None:
    missing = _citations(doc)
    assert not missing, f"{doc.name} cites what the sources lack:\n" + "\n".join(
        f"  line {line}: `{cited}`: {problem}" for line, cited, problem in missing
    )


@pytest.mark.parametrize(
    "cited",
    [
        "variables/nonexistent.py",
        "tests/python/test_builtins.py::test_no_such_test",
        "frame_compiler.no_such_step",
        "variables/base.NoSuchClass",
        "graph.runtime.Runtime.no_such_field",
        "Frame.no_such_method",
        "frame.no_such_attribute",
        "_load_attr_312",
        "NoSuchTracker",
    ],
)
def test_a_name_that_does_not_exist_is_reported(cited: str) -> None:
    assert _inline_problem(cited) is not None


@pytest.mark.parametrize(
    "cited",
    [
        "bytecode/resume_code.py",
        "tests/python/test_builtins.py::test_ascii_on_constants",
        "frame_compiler.capture_frame",
        "variables/base.Variable",
        "graph.runtime.Runtime",
        "CacheEntry.compile_id",
        "process_state.clear_all(memos=True)",
        "registry.SUPPORTED",
        "build_resume_code",
        "torch.fx.passes.split_module",
    ],
)
def test_names_that_exist_resolve(cited: str) -> None:
    assert _inline_problem(cited) is None


def test_a_python_block_is_checked_against_the_function_it_shows() -> None:
    shown = '@op("TO_BOOL", min_ver=(3, 13))\ndef _to_bool(f: Frame, inst: dis.Instruction) -> None: ...\n'
    assert _block_problems(shown) == ["def _to_bool('f', 'inst'): its parameters are [['frame', 'inst']]"]
    assert _block_problems(shown.replace("(f:", "(frame:")) == []
