"""Random program generator: small, self-contained Python modules over the constructs users write.

Each program is source text for a module defining `f(x, y, n, s, flag, lst, d, mode, obj,
opt=_MISSING)` (the function under test), the globals, class and helpers it uses, and
`make_args(call)` / `before_call(call)`, which give the arguments of each call and the changes made
outside `f` between calls. The source alone reproduces a run: nothing is hidden in the harness.

Values are typed while generating (full tensor `T` of x's shape, row tensor `R`, 0-d tensor `S`,
int, float, bool, list of ints, dict of str to int), so every program is well formed; it may still
raise (an index out of range, say), which the harness compares like any other outcome.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

# Features the generator can use. The CI run uses default_features(backend): all but those whose
# programs stenograph gets wrong today (DISABLED_BY_FINDINGS; FINDINGS.md has the reproducers).
ALL_FEATURES = frozenset(
    {
        "arith",  # int / float arithmetic, -0.0, comparisons
        "int_augassign",  # `i *= n` on Python ints and floats (not only on tensors)
        "float_change",  # the float argument changes value between calls
        "signed_zero",  # the float argument is -0.0 in one call and 0.0 in another
        "nan",  # NaN passed as the float argument (with float_change)
        "branches",  # if/else on shapes and Python values
        "loops",  # for over range / list / dict items, while
        "containers",  # list / dict / tuple / set values, methods, comprehensions
        "container_pop",  # `lst.pop()` / `d.pop(k, None)` on the input list / dict
        "mutate_while_iterating",  # lst / d written inside a loop over them (dict size change raises)
        "closures",  # nested functions reading locals, nonlocal writes
        "classes",  # user class: instances, methods, attributes
        "class_writes",  # class attribute written inside f
        "globals",  # module globals read and written
        "global_from_input",  # a global written from lst / d / obj state, which f may change later
        "external",  # globals changed outside f between calls
        "external_class",  # a class attribute changed outside f between calls
        "inplace",  # in-place tensor ops on the inputs
        "inplace_identity",  # `v = x.add_(1); v is x`
        "breaks",  # print(), a stenograph.disable'd helper, stenograph.graph_break()
        "item",  # .item() and branches on tensor values
        "rng",  # torch.manual_seed, rand/randn/rand_like, every draw used in the result
        "rng_unused",  # random draws whose result is never used
        "sentinel",  # `opt is _MISSING` against a default sentinel
        "try",  # try/except around a failing lookup
        "helpers",  # module-level helper functions (inlined)
        "nested_breaks",  # breaks inside helpers and closures (inlined calls), some in no_grad blocks
    }
)
# feature -> (the FINDINGS.md entry it reproduces, the backends it is off for)
# (empty: F1-F13 are fixed; FINDINGS.md keeps their reproducers)
DISABLED_BY_FINDINGS: dict[str, tuple[str, tuple[str, ...]]] = {}


def default_features(backend: str) -> frozenset[str]:
    """The features a fixed-seed run on `backend` uses: all but those off because of findings."""
    return ALL_FEATURES - {f for f, (_, backends) in DISABLED_BY_FINDINGS.items() if backend in backends}


PARAMS = ("x", "y", "n", "s", "flag", "lst", "d", "mode", "obj")
_TENSOR_KINDS = ("T", "R", "S")


@dataclass
class Program:
    """One generated program: its source and what the harness needs to know about it."""

    seed: int
    source: str
    features: frozenset[str]
    # no global / class state written by f or between calls: an identical call must not compile
    stable: bool = True
    calls: int = 4


@dataclass
class _Scope:
    vars: dict[str, str] = field(default_factory=dict)  # name -> type code


class _Gen:
    """Builds one program; `lines` is f's body, `top` the module-level definitions."""

    def __init__(self, seed: int, features: frozenset[str]) -> None:
        self.rng = random.Random(seed)
        self.seed = seed
        self.feat = features
        self.lines: list[str] = []
        self.scope = _Scope({"x": "T", "y": "T", "n": "i", "s": "f", "flag": "b", "lst": "L", "d": "D", "mode": "m"})
        if "classes" in features:
            self.scope.vars["obj"] = "O"
        self.counter = 0
        self.uses_globals: set[str] = set()
        self.writes_globals: set[str] = set()
        self.stable = True
        self.nonlocals: list[str] = []
        self.depth = 0
        self.in_closure = False
        self.lst_frozen = 0  # inside a loop over lst (or bounded by its length): no appends
        self.iterating = 0  # inside a loop over lst or d: no writes to them (mutate_while_iterating)

    # -- helpers ------------------------------------------------------------------------------

    def has(self, feature: str) -> bool:
        return feature in self.feat

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def new(self, prefix: str = "v") -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def pick_var(self, kind: str) -> str | None:
        names = [n for n, k in self.scope.vars.items() if k == kind]
        return self.rng.choice(names) if names else None

    def emit(self, text: str) -> None:
        self.lines.append("    " * (self.depth + 1) + text)

    # -- expressions --------------------------------------------------------------------------

    def expr(self, kind: str, depth: int = 0) -> str:
        return getattr(self, f"expr_{kind}")(depth)

    def expr_T(self, depth: int) -> str:
        r = self.rng
        var = self.pick_var("T")
        if depth >= 2 or (var and self.chance(0.3)):
            return var or "x"
        e = self.expr_T(depth + 1)
        choices = [
            lambda: f"torch.sin({e})",
            lambda: f"{e}.relu()",
            lambda: f"torch.tanh({e})",
            lambda: f"{e}.abs()",
            lambda: f"(-{e})",
            lambda: f"torch.sigmoid({e})",
            lambda: f"{e}.clamp(min=-1.0, max=1.0)",
            lambda: f"({e} + {self.expr_T(depth + 1)})",
            lambda: f"({e} * {self.expr_T(depth + 1)})",
            lambda: f"({e} - {self.expr_R(depth + 1)})",
            lambda: f"({e} * {self.expr_S(depth + 1)})",
            lambda: f"({e} / ({self.expr_T(depth + 1)}.abs() + 1))",
            lambda: f"torch.where({e} > 0, {e}, {self.expr_T(depth + 1)})",
            lambda: f"torch.maximum({e}, {self.expr_T(depth + 1)})",
            lambda: f"{e}.softmax(-1)",
            lambda: f"({e} > {self.expr_T(depth + 1)}).float()",
            lambda: f"{e}.cumsum(0)",
            lambda: f"{e}.flip(0)",
            lambda: f"{e}.reshape(-1).reshape({e}.shape)",
            lambda: f"torch.stack([{e}, {self.expr_T(depth + 1)}]).sum(0)",
            lambda: f"torch.ones_like({e})",
            lambda: f"{e}.t().t()",
        ]
        if self.has("arith"):
            choices += [
                lambda: f"({e} + {self.expr_i(depth + 1)})",
                lambda: f"({e} * {self.expr_f(depth + 1)})",
            ]
        if self.has("rng_unused"):
            choices += [lambda: f"torch.rand_like({e})", lambda: "torch.randn(x.shape)"]
        if self.has("classes") and not self.in_closure:
            choices.append(lambda: f"obj.apply({e})")
        if self.has("helpers"):
            choices.append(lambda: f"h0({e}, {self.expr_S(depth + 1)})")
        if self.has("nested_breaks"):
            choices.append(lambda: f"h2({e}, {self.expr_S(depth + 1)})")
            choices.append(lambda: f"h3({e}, {self.expr_S(depth + 1)})")
        if self.has("globals"):
            choices.append(lambda: f"({e} * G_SCALE)")
            self.uses_globals.add("G_SCALE")
        return r.choice(choices)()

    def expr_R(self, depth: int) -> str:
        var = self.pick_var("R")
        if depth >= 2 or (var and self.chance(0.3)):
            return var or "x[0]"
        t = self.expr_T(depth + 1)
        choices = [
            lambda: f"{t}.sum(0)",
            lambda: f"{t}.mean(0)",
            lambda: f"{t}[0]",
            lambda: f"{t}[-1]",
            lambda: f"{t}.max(0).values",
            lambda: f"torch.cos({self.expr_R(depth + 1)})",
            lambda: f"({self.expr_R(depth + 1)} + {self.expr_S(depth + 1)})",
            lambda: f"({self.expr_R(depth + 1)} * {self.expr_R(depth + 1)})",
        ]
        return self.rng.choice(choices)()

    def expr_S(self, depth: int) -> str:
        var = self.pick_var("S")
        if depth >= 2 or (var and self.chance(0.3)):
            return var or "x.sum()"
        choices = [
            lambda: f"{self.expr_T(depth + 1)}.sum()",
            lambda: f"{self.expr_T(depth + 1)}.mean()",
            lambda: f"{self.expr_R(depth + 1)}.max()",
            lambda: f"{self.expr_T(depth + 1)}.norm()",
            lambda: f"({self.expr_S(depth + 1)} * {self.expr_S(depth + 1)})",
            lambda: f"torch.tanh({self.expr_S(depth + 1)})",
        ]
        if self.has("arith"):
            choices.append(lambda: f"torch.tensor({self.expr_f(depth + 1)})")
        return self.rng.choice(choices)()

    def expr_i(self, depth: int) -> str:
        r = self.rng
        var = self.pick_var("i")
        leaves = [str(r.randint(-3, 5)), "len(lst)", "x.shape[0]", "x.size(1)", "x.dim()", "len(d)"]
        if var:
            leaves += [var, var]
        if self.has("globals"):
            leaves.append("G_INT")
            self.uses_globals.add("G_INT")
        if self.has("classes") and not self.in_closure:
            leaves += ["obj.v", "C0.k", "obj.k"]
        if depth >= 2 or self.chance(0.4):
            return r.choice(leaves)
        a, b = self.expr_i(depth + 1), self.expr_i(depth + 1)
        choices = [
            f"({a} + {b})",
            f"({a} - {b})",
            f"({a} * {b})",
            f"({a} // {r.randint(1, 3)})",
            f"({a} % {r.randint(2, 4)})",
            f"abs({a})",
            f"min({a}, {b})",
            f"max({a}, {b})",
            "sum(lst)",
            f"d.get('a', {a})",
            f"int({self.expr_f(depth + 1)} > {a})",
            "x.numel()",
        ]
        if self.has("item"):
            choices.append(f"int({self.expr_S(depth + 1)} > 0)")
        return r.choice(choices)

    def expr_f(self, depth: int) -> str:
        r = self.rng
        var = self.pick_var("f")
        leaves = [r.choice(["0.5", "-0.0", "0.0", "1.5", "-2.25", "3.0"]), "s"]
        if var:
            leaves += [var, var]
        if self.has("globals"):
            leaves.append("G_SCALE")
            self.uses_globals.add("G_SCALE")
        if depth >= 2 or self.chance(0.4):
            return r.choice(leaves)
        a, b = self.expr_f(depth + 1), self.expr_f(depth + 1)
        choices = [
            f"({a} + {b})",
            f"({a} - {b})",
            f"({a} * {b})",
            f"({a} / 2.0)",
            f"(-{a})",
            f"abs({a})",
            f"max({a}, {b})",
            f"math.copysign(1.0, {a})",
            f"float({self.expr_i(depth + 1)})",
            f"({self.expr_i(depth + 1)} * 0.5)",
        ]
        if self.has("item"):
            choices.append(f"{self.expr_S(depth + 1)}.item()")
        return r.choice(choices)

    def expr_b(self, depth: int) -> str:
        r = self.rng
        var = self.pick_var("b")
        choices = [
            "flag",
            f"({self.expr_i(depth + 1)} < {self.expr_i(depth + 1)})",
            f"({self.expr_i(depth + 1)} == {r.randint(0, 4)})",
            f"({self.expr_f(depth + 1)} > {self.expr_f(depth + 1)})",
            f"(x.shape[0] > {r.randint(2, 5)})",
            "(x.size(1) % 2 == 0)",
            "(x.dim() == 2)",
            f"(len(lst) > {r.randint(1, 4)})",
            "('a' in d)",
            f"(mode == {r.choice(['sum', 'mean'])!r})",
            f"(math.copysign(1.0, {self.expr_f(depth + 1)}) < 0)",
        ]
        if var:
            choices += [var, f"(not {var})"]
        if depth < 2:
            choices.append(f"({self.expr_b(depth + 1)} and {self.expr_b(depth + 1)})")
        if self.has("sentinel"):
            choices += ["(opt is _MISSING)", "(opt is None)", "(opt is not _MISSING and opt is not None)"]
        if self.has("item"):
            choices.append(f"bool({self.expr_S(depth + 1)} > 0)")
        return r.choice(choices)

    def expr_L(self, depth: int) -> str:
        r = self.rng
        var = self.pick_var("L")
        choices = [
            f"[v * {r.randint(1, 3)} for v in lst]",
            f"[v for v in lst if v % 2 == {r.randint(0, 1)}]",
            f"[{self.expr_i(depth + 1)}, {self.expr_i(depth + 1)}]",
            "sorted(lst)",
            "list(d.values())",
            f"lst + [{self.expr_i(depth + 1)}]",
            "list(reversed(lst))",
        ]
        if var:
            choices.append(var)
        return r.choice(choices)

    def expr_D(self, depth: int) -> str:
        r = self.rng
        choices = [
            "{k: v + 1 for k, v in d.items()}",
            f"{{'a': {self.expr_i(depth + 1)}, 'b': {self.expr_i(depth + 1)}}}",
            "dict(d)",
            "{str(i): v for i, v in enumerate(lst)}",
        ]
        return r.choice(choices)

    # -- statements ---------------------------------------------------------------------------

    def assign(self, kind: str | None = None) -> None:
        kinds = ["T", "T", "R", "S"]
        if self.has("arith"):
            kinds += ["i", "f", "b"]
        if self.has("containers"):
            kinds += ["L", "D"]
        kind = kind or self.rng.choice(kinds)
        name = self.new()
        self.emit(f"{name} = {self.expr(kind)}")
        self.scope.vars[name] = kind

    def reassign(self) -> None:
        names = [n for n, k in self.scope.vars.items() if k in ("T", "R", "S", "i", "f") and n not in PARAMS]
        if not names:
            return self.assign()
        name = self.rng.choice(names)
        kind = self.scope.vars[name]
        op = self.rng.choice(["+", "*", "-"]) if kind != "T" or self.chance(0.5) else "+"
        if kind in ("i", "f") and not self.has("int_augassign"):
            self.emit(f"{name} = {name} {op} {self.expr(kind)}")
        else:
            self.emit(f"{name} {op}= {self.expr(kind)}")

    def statement(self) -> None:
        r = self.rng
        options: list = [self.assign, self.assign, self.assign, self.reassign]
        if self.depth < 2:
            if self.has("branches"):
                options += [self.if_stmt, self.if_stmt]
            if self.has("loops"):
                options += [self.for_range, self.for_list, self.while_loop]
        if self.has("containers"):
            options += [self.container_stmt, self.container_stmt]
        if self.has("closures") and self.depth == 0 and not self.in_closure:
            options.append(self.closure)
        if self.has("classes") and not self.in_closure:
            options.append(self.class_stmt)
        if self.has("globals") and not self.in_closure:
            options.append(self.global_stmt)
        if self.has("inplace"):
            options += [self.inplace, self.inplace]
        if self.has("breaks"):
            options.append(self.break_stmt)
        if self.has("rng"):
            options.append(self.rng_stmt)
        if self.has("try"):
            options.append(self.try_stmt)
        if self.has("item") and self.has("branches") and self.depth < 2:
            options.append(self.data_branch)
        if self.has("nested_breaks") and not self.in_closure:
            options.append(self.no_grad_call)
        r.choice(options)()

    def no_grad_call(self) -> None:
        """A call of a helper that breaks, inside a `with torch.no_grad():` block."""
        out = self.new()
        self.emit("with torch.no_grad():")
        self.depth += 1
        self.emit(f"{out} = h1({self.expr_T(1)}, {self.expr_S(1)})")
        self.depth -= 1
        self.scope.vars[out] = "T"

    def block(self, n: int) -> None:
        """A nested block whose new names stay inside it (they may be unbound after it)."""
        saved = dict(self.scope.vars)
        self.depth += 1
        for _ in range(n):
            self.statement()
        self.depth -= 1
        self.scope.vars = saved

    def if_stmt(self) -> None:
        self.emit(f"if {self.expr_b(0)}:")
        self.block(self.rng.randint(1, 3))
        if self.chance(0.6):
            self.emit("else:")
            self.block(self.rng.randint(1, 2))

    def data_branch(self) -> None:
        self.emit(f"if {self.expr_S(1)} > {self.rng.choice(['0', '0.5', '-1.0'])}:")
        self.block(self.rng.randint(1, 2))
        self.emit("else:")
        self.block(1)

    def for_range(self) -> None:
        i = self.new("i")
        bound = self.rng.choice([str(self.rng.randint(1, 3)), "min(abs(n), 3)", "x.shape[0] - 1"])
        self.emit(f"for {i} in range({bound}):")
        self.scope.vars[i] = "i"
        self.block(self.rng.randint(1, 2))
        del self.scope.vars[i]

    def for_list(self) -> None:
        if self.has("containers") and self.chance(0.5):
            k, v = self.new("k"), self.new("e")
            self.emit(f"for {k}, {v} in d.items():")
            self.scope.vars[v] = "i"
        else:
            v = self.new("e")
            self.emit(f"for {v} in lst:")
            self.scope.vars[v] = "i"
        self.lst_frozen += 1
        self.iterating += 1
        self.block(self.rng.randint(1, 2))
        self.iterating -= 1
        self.lst_frozen -= 1
        self.scope.vars.pop(v, None)

    def while_loop(self) -> None:
        w = self.new("w")
        self.emit(f"{w} = 0")
        self.emit(f"while {w} < {self.rng.choice(['2', 'min(abs(n), 3)', 'len(lst)'])}:")
        self.depth += 1
        self.emit(f"{w} += 1")
        self.depth -= 1
        self.lst_frozen += 1
        self.block(self.rng.randint(1, 2))
        self.lst_frozen -= 1

    def container_stmt(self) -> None:
        r = self.rng
        pick = r.randint(0, 9)
        if self.iterating and not self.has("mutate_while_iterating") and pick in (0, 1, 2, 3, 7):
            pick = 8
        if pick == 0 and not self.lst_frozen:
            self.emit(f"lst.append({self.expr_i(1)})")
        elif pick == 1:
            self.emit("if lst:")
            self.depth += 1
            self.emit(f"lst[{r.choice(['0', '-1'])}] = {self.expr_i(1)}")
            self.depth -= 1
        elif pick == 2:
            self.emit(f"d[{r.choice(['a', 'b', 'z'])!r}] = {self.expr_i(1)}")
        elif pick == 3 and self.has("container_pop"):
            name = self.new()
            self.emit(f"{name} = lst.pop() if lst else {self.expr_i(1)}")
            self.scope.vars[name] = "i"
        elif pick == 4:
            name = self.new("st")
            self.emit(f"{name} = {{v % 3 for v in lst}}")
            self.emit(f"{self.new()} = len({name}) + int({r.randint(0, 2)} in {name})")
            self.scope.vars[f"v{self.counter}"] = "i"
        elif pick == 5:
            name, a, b = self.new("tp"), self.new(), self.new()
            self.emit(f"{name} = ({self.expr_T(1)}, {self.expr_i(1)})")
            self.emit(f"{a}, {b} = {name}")
            self.scope.vars[a], self.scope.vars[b] = "T", "i"
        elif pick == 6:
            name = self.new("ts")
            factor = r.choice(["i", "i + 1", "0.5"])
            self.emit(f"{name} = [{self.expr_T(1)} * {factor} for i in range({r.randint(1, 3)})]")
            out = self.new()
            self.emit(f"{out} = {r.choice([f'torch.stack({name}).sum(0)', f'sum({name})', f'{name}[-1]'])}")
            self.scope.vars[out] = "T"
        elif pick == 7 and self.has("container_pop"):
            self.emit(f"d.pop({r.choice(['a', 'b'])!r}, None)")
        elif pick == 8:
            name = self.new()
            self.emit(f"{name} = [v for v in {self.expr_L(1)} if v > {r.randint(-1, 2)}]")
            self.scope.vars[name] = "L"
        else:
            name = self.new()
            self.emit(f"{name} = {self.expr_D(1)}")
            self.scope.vars[name] = "D"

    def closure(self) -> None:
        fn, acc = self.new("inner"), self.new("acc")
        write = self.chance(0.6)
        scale = self.expr_f(1) if self.has("arith") else "0.5"
        self.emit(f"{acc} = {self.rng.randint(0, 3)}")
        self.emit(f"def {fn}(t):")
        self.depth += 1
        if write:
            self.emit(f"nonlocal {acc}")
            self.emit(f"{acc} += 1")
        if self.has("nested_breaks") and self.chance(0.5):
            self.emit('print("inner", t.shape)')
        self.emit(f"return t * {scale} + {acc}")
        self.depth -= 1
        self.scope.vars[acc] = "i"
        for _ in range(self.rng.randint(1, 2)):
            out = self.new()
            self.emit(f"{out} = {fn}({self.expr_T(1)})")
            self.scope.vars[out] = "T"
        if self.chance(0.5):
            self.emit(f"{acc} += 1")

    def class_stmt(self) -> None:
        r = self.rng
        pick = r.randint(0, 4)
        if pick == 0:
            name = self.new("o")
            self.emit(f"{name} = C0({self.expr_i(1)})")
            out = self.new()
            self.emit(f"{out} = {name}.apply({self.expr_T(1)}) + {name}.v")
            self.scope.vars[out] = "T"
        elif pick == 1:
            self.emit(f"obj.v = {self.expr_i(1)}")
        elif pick == 2:
            out = self.new()
            self.emit(f"{out} = obj.scaled({self.expr_f(1) if self.has('arith') else '2.0'})")
            self.scope.vars[out] = "f"
        elif pick == 3 and self.has("class_writes"):
            self.emit("obj.bump()")
            self.stable = False
        else:
            out = self.new()
            self.emit(f"{out} = obj.hits + C0.k")
            self.scope.vars[out] = "i"

    def global_stmt(self) -> None:
        r = self.rng
        pick = r.randint(0, 2)
        if pick == 0:
            self.emit(f"G_COUNT += {r.randint(1, 2)}")
            self.writes_globals.add("G_COUNT")
        elif pick == 1:
            self.emit(f"G_LOG.append({self.global_value()})")
            self.uses_globals.add("G_LOG")
        else:
            self.emit(f"G_INT = {self.global_value()}")
            self.writes_globals.add("G_INT")
        self.stable = False

    def global_value(self) -> str:
        """An int for a global; read from the mutable inputs only with global_from_input."""
        if self.has("global_from_input"):
            return self.expr_i(1)
        base = self.rng.choice(["n", "x.shape[0]", "len(lst)", str(self.rng.randint(0, 5))])
        return f"{base} + {self.rng.randint(0, 3)}"

    def inplace(self) -> None:
        r = self.rng
        target = r.choice(["x", "y"])
        choices = [
            f"{target}.add_({self.expr_S(1)})",
            f"{target}.mul_({r.choice(['0.5', '2', '-1.0'])})",
            f"{target}.clamp_(-1.0, 1.0)",
            f"{target}[0] = {self.expr_R(1)}",
            f"{target} += {self.expr_T(1)}",
            f"{target}.copy_({self.expr_T(1)})",
            f"{target}.relu_()",
        ]
        self.emit(r.choice(choices))
        if self.has("inplace_identity") and self.chance(0.3):
            out = self.new()
            self.emit(f"{out} = {target}.add_(1)")
            self.emit(f"{self.new()} = {out} is {target}")
            self.scope.vars[f"v{self.counter}"] = "b"
            self.scope.vars[out] = "T"

    def break_stmt(self) -> None:
        r = self.rng
        pick = r.randint(0, 3)
        if pick == 0:
            self.emit(f"print('p', {self.expr_i(1)}, {self.expr_b(1)}, tuple(x.shape))")
        elif pick == 1:
            out = self.new()
            self.emit(f"{out} = _opaque({self.expr_i(1)})")
            self.scope.vars[out] = "i"
            self.stable = False
        elif pick == 2:
            self.emit("stenograph.graph_break()")
        else:
            self.emit(f"print('t', round({self.expr_f(1) if self.has('arith') else 's'}, 3))")

    def rng_stmt(self) -> None:
        r = self.rng
        if self.chance(0.4):
            self.emit(f"torch.manual_seed({r.randint(0, 9)})")
        draw = r.choice(["torch.rand(x.shape)", "torch.randn_like(x)", "torch.rand(x.shape[1])"])
        if self.has("rng_unused"):
            out = self.new()
            self.emit(f"{out} = {draw}")
            self.scope.vars[out] = "R" if "shape[1]" in draw else "T"
        else:  # every draw reaches the result (see rng_unused)
            self.emit(f"rng_acc = rng_acc + {draw}.sum()")

    def try_stmt(self) -> None:
        out = self.new()
        self.emit("try:")
        self.depth += 1
        self.emit(f"{out} = {self.rng.choice(['lst[n]', 'd[mode]', 'lst[len(lst) - 1]'])}")
        self.depth -= 1
        self.emit("except (IndexError, KeyError):")
        self.depth += 1
        self.emit(f"{out} = {self.expr_i(1)}")
        self.depth -= 1
        self.scope.vars[out] = "i"

    # -- the module ---------------------------------------------------------------------------

    def body(self) -> None:
        if self.has("rng"):
            self.emit("rng_acc = x.new_zeros(())")
        for _ in range(self.rng.randint(4, 10)):
            self.statement()
        live = [n for n in self.scope.vars if n not in PARAMS or n in ("x", "y")]
        self.rng.shuffle(live)
        out = live[: self.rng.randint(1, 5)]
        if self.has("rng"):
            out.append("rng_acc")
        if self.has("containers") and self.chance(0.3):
            out.append("lst")
        self.emit(f"return ({', '.join(out)},)")

    def module(self) -> str:
        self.body()
        header = []
        written = sorted(self.writes_globals)
        if written:
            header.append(f"    global {', '.join(written)}")
        r = self.rng
        calls = 4
        shapes = [(r.randint(2, 5), r.randint(2, 5))]
        shapes.append(shapes[0])
        a, b = shapes[0]
        shapes.append(r.choice([(a + 1, b), (a, b + 2), (a + 2, b + 1)]))
        shapes.append(r.choice([shapes[2], (a + 3, b)]))
        ns = [r.randint(-2, 4)]
        ns += [ns[0], r.randint(-2, 4), r.randint(-2, 4)]
        floats = ["0.0", "-0.0", "1.5", "-2.5", "0.25"]
        if not self.has("signed_zero"):  # keep one zero, the same in every call
            floats.remove(r.choice(["0.0", "-0.0"]))
        if self.has("nan"):
            floats.append("float('nan')")
        ss = [r.choice(floats[:4])]
        ss += [ss[0], r.choice(floats), r.choice(floats)] if self.has("float_change") else [ss[0]] * 3
        flag0 = r.random() < 0.5
        flags = [flag0, flag0, flag0, not flag0]
        lst0 = [r.randint(-2, 5) for _ in range(r.randint(0, 4))]
        lsts = [lst0, lst0, [r.randint(-2, 5) for _ in range(r.randint(0, 5))], lst0 + [7]]
        d0 = {"a": r.randint(0, 3), "b": r.randint(0, 3)}
        ds = [d0, d0, {"b": 2, "c": 1}, {"a": 5, "sum": 1}]
        m0 = r.choice(["sum", "mean"])
        modes = [m0, m0, m0, "mean" if m0 == "sum" else "sum"]
        ov = [r.randint(0, 3)] * 2 + [r.randint(0, 3), r.randint(0, 3)]
        opts = ["_MISSING", "_MISSING", "None", "3"] if self.has("sentinel") else ["_MISSING"] * 4
        tseeds = [self.seed % 1000, self.seed % 1000, self.seed % 1000 + 1, self.seed % 1000 + 2]
        ext = self.has("external")  # changes before calls 2 and 3: calls 0 and 1 still match
        mod = [
            f"# fuzz program, seed {self.seed}",
            "import math",
            "import torch",
            "import stenograph",
            "",
            "_MISSING = object()",
            "G_SCALE = 1.5",
            "G_INT = 2",
            "G_COUNT = 0",
            "G_LOG = []",
            "",
            "",
            "class C0:",
            "    k = 2",
            "",
            "    def __init__(self, v):",
            "        self.v = v",
            "        self.hits = 0",
            "",
            "    def apply(self, t):",
            "        self.hits += 1",
            "        return t * self.v + self.k",
            "",
            "    def scaled(self, f):",
            "        return f * self.v - C0.k",
            "",
            "    def bump(self):",
            "        C0.k += 1",
            "        return C0.k",
            "",
            "",
            "def h0(a, b):",
            "    return a * 2 + b",
            "",
            "",
            "def h1(a, b):",
            "    a = a + 1",
            '    print("h1", a.requires_grad)',
            "    return a * 2 + b",
            "",
            "",
            "def h2(a, b):",
            "    c = h1(a - 1, b)",
            "    stenograph.graph_break()",
            "    return c * 0.5 + a",
            "",
            "",
            "def h3(a, b):",  # a branch on tensor data inside a callee: a break at a jump
            "    if a.sum() > b:",
            "        return a * 2 + b",
            "    return a - b",
            "",
            "",
            "@stenograph.disable",
            "def _opaque(v):",
            "    G_LOG.append(v)",
            "    return v + 1",
            "",
            "",
            "def f(x, y, n, s, flag, lst, d, mode, obj, opt=_MISSING):",
            *header,
            *self.lines,
            "",
            "",
            f"_SHAPES = {shapes!r}",
            f"_N = {ns!r}",
            f"_S = [{', '.join(ss)}]",
            f"_FLAG = {flags!r}",
            f"_LST = {lsts!r}",
            f"_D = {ds!r}",
            f"_MODE = {modes!r}",
            f"_OV = {ov!r}",
            f"_OPT = [{', '.join(opts)}]",
            f"_TSEED = {tseeds!r}",
            "",
            "",
            "def make_args(call):",
            '    """Fresh arguments for call number `call` (calls 0 and 1 are equal)."""',
            "    g = torch.Generator().manual_seed(_TSEED[call])",
            "    a, b = _SHAPES[call]",
            "    x, y = torch.randn(a, b, generator=g), torch.randn(a, b, generator=g)",
            "    kwargs = {} if _OPT[call] is _MISSING else {'opt': _OPT[call]}",
            "    lst, d = list(_LST[call]), dict(_D[call])",
            "    args = (x, y, _N[call], _S[call], _FLAG[call], lst, d, _MODE[call], C0(_OV[call]))",
            "    return args, kwargs",
            "",
            "",
            "def before_call(call):",
            '    """What changes outside f before call number `call`."""',
        ]
        if ext:
            mod += ["    global G_SCALE, G_INT", "    if call == 3:", "        G_SCALE = -0.5", "        G_INT = 5"]
        if self.has("external_class"):
            mod += ["    if call == 2:", "        C0.k = 4"]
        if not ext and not self.has("external_class"):
            mod.append("    pass")
        self.calls = calls
        return "\n".join(mod) + "\n"


def generate(seed: int, features: frozenset[str] = ALL_FEATURES) -> Program:
    """The program for `seed` (the same seed and features always give the same source)."""
    gen = _Gen(seed, frozenset(features))
    source = gen.module()
    return Program(seed=seed, source=source, features=frozenset(features), stable=gen.stable, calls=gen.calls)
