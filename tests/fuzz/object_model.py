"""Object-model program generator: attributes written, then read back, through every path Python has.

`python -m tests.fuzz --generator objects` runs these programs. Each one defines the same small set
of classes, one per way an attribute can live on an object: the instance dict (`Plain`), `__slots__`
(`Slots`), a property over a private attribute (`Prop`), a data descriptor (`Desc`), a caching
non-data descriptor (`Lazy`), HF `PretrainedConfig`'s `attribute_map` aliases through its own
`__setattr__`/`__getattribute__` (`Cfg`, whose `__setattr__` prints a `tag` it stores: a graph break
inside the hook a store runs) and a `__getattr__` fallback (`Dyn`). Objects of these
classes are reached as the argument `obj`, as `m.cfg` of an `nn.Module` (an argument, a global, or
the compiled module's `self`), as a global, as a closure variable, through a local alias, or made
inside `f`; `f` writes their attributes (`o.a = v`, `setattr`, `object.__setattr__`, `o.__dict__`,
`vars(o)`, class attributes, `del`/`delattr`) and reads them back (`o.a`, `getattr` with and without
default, `hasattr`, `o.__dict__.get`, `object.__getattribute__`, `type(o).k`), the reads feeding
tensor math, branches and prints. `before_call` writes and deletes through the same paths between
calls. The harness compares results, returned and global objects' state (`fuzz_view`,
`fuzz_state`) and printed output with eager's.
"""

from __future__ import annotations

import random

from .generator import Program

# name -> (attribute -> type code); types: i int, T tensor of x's shape, s None or str
_COMMON = {"a": "i", "t": "T", "tag": "s", "k": "i"}
KINDS = {
    "Plain": dict(_COMMON),
    "Slots": dict(_COMMON),
    "Prop": dict(_COMMON),
    "Desc": dict(_COMMON),
    "Lazy": dict(_COMMON),
    "Cfg": {**_COMMON, "size": "i", "label_kind": "s"},
    "Dyn": {**_COMMON, "opt_x": "i"},
}
_NO_DICT = {"Slots"}  # kinds whose instances have no __dict__
_READ_ONLY = {("Slots", "k")}  # a class attribute that shadows no slot: instances cannot write it
_OUTSIDE_TENSORS = ("torch.ones(SHAPE)", "torch.full(SHAPE, -0.5)", "torch.arange(4.0)[: SHAPE[1]].repeat(SHAPE[0], 1)")
_ALIASES = {"size", "label_kind"}  # object.__getattribute__ does not map these (only Cfg's own lookup)

CLASSES = '''
class Plain:
    k = 3

    def __init__(self, a, t, tag):
        self.a = a
        self.t = t
        self.tag = tag

    def bump(self):
        self.a = self.a + 1
        return self.a


class Slots:
    __slots__ = ("a", "t", "tag")
    k = 3

    def __init__(self, a, t, tag):
        self.a = a
        self.t = t
        self.tag = tag

    def bump(self):
        self.a = self.a + 1
        return self.a


class Prop:
    k = 3

    def __init__(self, a, t, tag):
        self.sets = 0
        self.a = a
        self.t = t
        self.tag = tag

    @property
    def a(self):
        return self._a

    @a.setter
    def a(self, value):
        self.sets += 1
        self._a = value % 13

    @a.deleter
    def a(self):
        del self._a

    def bump(self):
        self.a = self.a + 1
        return self.a


class Field:
    """A data descriptor keeping its value in the instance dict under another name."""

    def __init__(self, default):
        self.default = default

    def __set_name__(self, owner, name):
        self.key = "_f_" + name

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return obj.__dict__.get(self.key, self.default)

    def __set__(self, obj, value):
        obj.__dict__[self.key] = value

    def __delete__(self, obj):
        if self.key not in obj.__dict__:
            raise AttributeError(self.key)
        del obj.__dict__[self.key]


class Desc:
    k = 3
    a = Field(0)
    tag = Field(None)

    def __init__(self, a, t, tag):
        self.a = a
        self.t = t
        self.tag = tag

    def bump(self):
        self.a = self.a + 1
        return self.a


class Cached:
    """A non-data descriptor: computed on the first read, then the instance dict shadows it."""

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        value = "lazy" + str(obj.a)
        obj.__dict__[self.name] = value
        return value


class Lazy:
    k = 3
    tag = Cached()

    def __init__(self, a, t, tag):
        self.a = a
        self.t = t

    def bump(self):
        self.a = self.a + 1
        return self.a


class Cfg:
    """HF PretrainedConfig's aliasing: attribute_map names read and written as other attributes."""

    attribute_map = {"size": "a", "label_kind": "tag"}
    k = 3

    def __init__(self, a, t, tag):
        self.a = a
        self.t = t
        self.tag = tag

    def __setattr__(self, key, value):
        if key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        if key == "tag":
            print("Cfg.tag =", value)  # a graph break inside the hook a store runs
        super().__setattr__(key, value)

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)

    def bump(self):
        self.a = self.a + 1
        return self.a


class Dyn:
    k = 3

    def __init__(self, a, t, tag):
        self.a = a
        self.t = t
        self.tag = tag

    def __getattr__(self, name):
        if name.startswith("opt_"):
            return 0
        raise AttributeError(name)

    def bump(self):
        self.a = self.a + 1
        return self.a


class Mod(torch.nn.Module):
    def __init__(self, cfg, width):
        super().__init__()
        self.cfg = cfg
        self.lin = torch.nn.Linear(width, width)
'''

HELPERS = '''
FUZZ_TYPES = (Plain, Slots, Prop, Desc, Lazy, Cfg, Dyn)


def fuzz_view(o):
    """An object's whole state, read around its own attribute logic."""
    out = {}
    try:
        out["__dict__"] = dict(object.__getattribute__(o, "__dict__"))
    except AttributeError:
        pass
    for name in getattr(type(o), "__slots__", ()):
        try:
            out[name] = object.__getattribute__(o, name)
        except AttributeError:
            out[name] = "<unset>"
    return out


def fuzz_state():
    """What outlives a call: the objects f can reach and the classes' attributes."""
    state = {"classes": {c.__name__: vars(c).get("k", "<unset>") for c in FUZZ_TYPES}}
    state["G_OBJ"] = G_OBJ
    state["G_MOD.cfg"] = G_MOD.cfg
    state["C_OBJ"] = C_OBJ
    state["P_OBJ"] = P_OBJ
    return state
'''


class _ObjGen:
    """Builds one object-model program; `lines` is the body of f."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.seed = seed
        self.lines: list[str] = []
        self.depth = 0
        self.counter = 0
        self.variant = self.rng.choice(["function", "function", "forward"])
        self.m = "self" if self.variant == "forward" else self.rng.choice(["m", "G_MOD"])
        # the persistent objects (module level) and their kinds
        self.kinds = {name: self.rng.choice(list(KINDS)) for name in ("G_OBJ", "MOD_CFG", "C_OBJ", "P_OBJ", "ARG")}
        self.arg_persistent = self.rng.random() < 0.5  # obj is P_OBJ in every call, else a fresh object
        if self.arg_persistent:
            self.kinds["ARG"] = self.kinds["P_OBJ"]
        # attributes that may be missing (deleted): read only through forms that tolerate it
        self.deletable = {a for a in ("a", "t", "tag", "k") if self.rng.random() < 0.25}
        self.refs: dict[str, str] = {"obj": self.kinds["ARG"], f"{self.m}.cfg": self.kinds["MOD_CFG"]}
        self.refs["G_OBJ"] = self.kinds["G_OBJ"]
        if self.variant == "function":
            self.refs["c_obj"] = self.kinds["C_OBJ"]
        self.ints = ["n"]
        self.strs: list[str] = []
        self.writes_persistent = False
        self.local_objects: list[str] = []
        self.local_refs: set[str] = set()  # objects made inside f, and aliases of them

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def new(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def emit(self, text: str) -> None:
        self.lines.append("    " * (self.depth + 1) + text)

    # -- values -------------------------------------------------------------------------------

    def value(self, kind: str, outside: bool = False) -> str:
        r = self.rng
        if kind == "i":
            if outside:
                return str(r.randint(-2, 9))
            options = [str(r.randint(-2, 9)), "n", "x.shape[0]", f"({self.read('i')} + {r.randint(1, 3)}) % 7"]
            options += self.ints
            return r.choice(options)
        if kind == "s":
            options = ["None", "'single'", "'multi'"]
            if not outside:
                options += self.strs
            return r.choice(options)
        if outside:
            return r.choice(_OUTSIDE_TENSORS)
        return r.choice(["x * 2", "x.cos()", f"torch.tanh({self.read('T')} + x)", "y - x"])

    # -- reads --------------------------------------------------------------------------------

    def pick(self, attr_type: str, need_write: bool = False) -> tuple[str, str, str]:
        """An object reference, its kind and one of its attributes of `attr_type`."""
        ref = self.rng.choice(list(self.refs))
        kind = self.refs[ref]
        attrs = [a for a, t in KINDS[kind].items() if t == attr_type]
        if need_write:
            attrs = [a for a in attrs if (kind, a) not in _READ_ONLY]
        if not attrs:
            return self.pick(attr_type, need_write)
        return ref, kind, self.rng.choice(attrs)

    def _missing_ok(self, attr: str) -> bool:
        target = {"size": "a", "label_kind": "tag"}.get(attr, attr)
        return target in self.deletable

    def read(self, attr_type: str) -> str:
        ref, kind, attr = self.pick(attr_type)
        default = {"i": "-1", "s": "None", "T": "x"}[attr_type]
        forms = [f"getattr({ref}, {attr!r}, {default})"]
        if not self._missing_ok(attr):
            forms += [f"{ref}.{attr}", f"{ref}.{attr}", f"getattr({ref}, {attr!r})"]
            if attr not in _ALIASES and attr != "opt_x":  # both exist only through the class's own lookup
                forms.append(f"object.__getattribute__({ref}, {attr!r})")
        if kind not in _NO_DICT:
            forms += [f"{ref}.__dict__.get({attr!r}, {default})", f"vars({ref}).get({attr!r}, {default})"]
            # the whole dict: its size, its keys in order, a value found by iterating its items
            whole = {
                "i": [f"len({ref}.__dict__)", f"len(vars({ref}).keys())"],
                "s": [f"'|'.join({ref}.__dict__)", f"'|'.join(k for k, v in vars({ref}).items() if v is not None)"],
                "T": [f"next((v for k, v in {ref}.__dict__.items() if k == {attr!r}), {default})"],
            }
            forms += whole[attr_type]
        if attr == "k":
            forms.append(f"type({ref}).k")
        return self._reading(ref, kind, attr, self.rng.choice(forms))

    def read_bool(self) -> str:
        ref, kind, attr = self.pick(self.rng.choice(["i", "s", "T"]))
        forms = [f"hasattr({ref}, {attr!r})"]
        if kind not in _NO_DICT:
            forms += [f"({attr!r} in {ref}.__dict__)", f"({attr!r} in vars({ref}))"]
            forms += [f"({attr!r} in {ref}.__dict__.keys())", f"({attr!r} in list(vars({ref}).copy()))"]
        return self._reading(ref, kind, attr, self.rng.choice(forms))

    def _reading(self, ref: str, kind: str, attr: str, form: str) -> str:
        """`form`, noting that reading Lazy's `tag` through its descriptor stores it (a write)."""
        if kind == "Lazy" and attr == "tag" and "__dict__" not in form and "vars(" not in form:
            self.note_write(ref)
        return form

    # -- statements ---------------------------------------------------------------------------

    def write_stmt(self, refs: dict[str, str] | None = None, outside: bool = False) -> list[str]:
        """One write (or delete) through a random path; returned as lines (not emitted)."""
        refs = refs or self.refs
        r = self.rng
        ref = r.choice(list(refs))
        kind = refs[ref]
        attr_type = r.choice(["i", "i", "s", "s", "T"])
        attrs = [a for a, t in KINDS[kind].items() if t == attr_type and (kind, a) not in _READ_ONLY]
        attr = r.choice(attrs)
        if not outside:
            self.note_write(ref)
        if self._missing_ok(attr) and r.random() < 0.3:
            forms = [f"del {ref}.{attr}", f"delattr({ref}, {attr!r})"]
            if kind not in _NO_DICT and r.random() < 0.3:
                return [f"{ref}.__dict__.pop({attr!r}, None)"]
            return ["try:", f"    {r.choice(forms)}", "except AttributeError:", "    pass"]
        value = self.value(attr_type, outside)
        forms = [f"{ref}.{attr} = {value}", f"{ref}.{attr} = {value}", f"setattr({ref}, {attr!r}, {value})"]
        forms.append(f"object.__setattr__({ref}, {attr!r}, {value})")
        if kind not in _NO_DICT:
            forms += [
                f"{ref}.__dict__[{attr!r}] = {value}",
                f"vars({ref})[{attr!r}] = {value}",
                f"{ref}.__dict__.update({{{attr!r}: {value}}})",
            ]
        if attr == "k" and r.random() < 0.3:
            forms = [f"type({ref}).k = {value}", f"{kind}.k = {value}"]
            self.writes_persistent = not outside or self.writes_persistent
        return [r.choice(forms)]

    def note_write(self, ref: str) -> None:
        """A write inside f to an object that outlives the call: the next call sees another state."""
        if ref not in self.local_refs and (ref != "obj" or self.arg_persistent):
            self.writes_persistent = True

    def statement(self) -> None:
        r = self.rng
        options = [self.s_write, self.s_write, self.s_write, self.s_read_acc, self.s_read_acc, self.s_read_int]
        options += [self.s_hf_pattern, self.s_branch_int, self.s_branch_bool, self.s_bump, self.s_alias]
        options += [self.s_local_object, self.s_print, self.s_break, self.s_inplace]
        if self.depth < 2:
            options += [self.s_branch_str]
        r.choice(options)()

    def block(self, n: int) -> None:
        saved = (list(self.ints), list(self.strs), dict(self.refs))
        self.depth += 1
        for _ in range(n):
            self.statement()
        self.depth -= 1
        self.ints, self.strs, self.refs = saved

    def s_write(self) -> None:
        for line in self.write_stmt():
            self.emit(line)

    def s_read_acc(self) -> None:
        kind = self.rng.choice(["i", "T", "T"])
        if kind == "T":
            self.emit(f"acc = acc + {self.read('T')}")
        else:
            self.emit(f"acc = acc * {self.read('i')} + 1")

    def s_read_int(self) -> None:
        name = self.new("i")
        self.emit(f"{name} = {self.read('i')}")
        self.ints.append(name)
        if self.chance(0.5):
            s = self.new("s")
            self.emit(f"{s} = {self.read('s')}")
            self.strs.append(s)

    def s_hf_pattern(self) -> None:
        """DistilBERT's: set the config's problem type when unset, then branch on it."""
        ref, kind, attr = self.pick("s", need_write=True)
        read = f"getattr({ref}, {attr!r}, None)" if self._missing_ok(attr) else f"{ref}.{attr}"
        self.emit(f"if {read} is None:")
        self.emit(f"    {ref}.{attr} = {self.rng.choice(['single', 'multi'])!r}")
        self.note_write(ref)
        self.emit(f"if {self.read('s')} == 'single':")
        self.emit(f"    acc = acc + {self.m}.lin(x).sum()")
        self.emit("else:")
        self.emit(f"    acc = acc - {self.rng.randint(1, 3)}")

    def s_branch_str(self) -> None:
        self.emit(f"if {self.read('s')} {self.rng.choice(['is None', '== ' + repr('single'), '!= ' + repr('multi')])}:")
        self.block(self.rng.randint(1, 3))
        if self.chance(0.5):
            self.emit("else:")
            self.block(1)

    def s_branch_int(self) -> None:
        self.emit(f"if {self.read('i')} > {self.rng.randint(0, 5)}:")
        self.block(self.rng.randint(1, 2))

    def s_branch_bool(self) -> None:
        self.emit(f"if {'not ' if self.chance(0.3) else ''}{self.read_bool()}:")
        self.block(self.rng.randint(1, 2))

    def s_bump(self) -> None:
        if "a" in self.deletable:
            return self.s_write()
        ref = self.rng.choice(list(self.refs))
        self.note_write(ref)
        self.emit(f"acc = acc + {ref}.bump()")

    def s_alias(self) -> None:
        ref = self.rng.choice([r for r in self.refs if not r.startswith("al")])
        name = self.new("al")
        self.emit(f"{name} = {ref}")
        self.refs[name] = self.refs[ref]
        if ref in self.local_refs:
            self.local_refs.add(name)

    def s_local_object(self) -> None:
        kind = self.rng.choice(list(KINDS))
        name = self.new("o")
        self.emit(f"{name} = {kind}({self.value('i')}, {self.value('T')}, {self.value('s')})")
        self.refs[name] = kind
        self.local_refs.add(name)
        if self.depth == 0:
            self.local_objects.append(name)

    def s_print(self) -> None:
        self.emit(f"print('r', {self.read('i')}, {self.read('s')!s}, {self.read_bool()})")

    def s_break(self) -> None:
        self.emit("stenograph.graph_break()")

    def s_inplace(self) -> None:
        if "t" in self.deletable:
            return self.s_read_acc()
        ref, kind, attr = self.pick("T")
        self.note_write(ref)
        self.emit(f"{ref}.t.mul_(0.5).add_(1)")

    # -- the module ---------------------------------------------------------------------------

    def outside_writes(self, call: int) -> list[str]:
        refs = {"G_OBJ": self.kinds["G_OBJ"], "G_MOD.cfg": self.kinds["MOD_CFG"], "C_OBJ": self.kinds["C_OBJ"]}
        refs["P_OBJ"] = self.kinds["P_OBJ"]
        lines = [f"    if call == {call}:"]
        for _ in range(self.rng.randint(1, 3)):
            lines += ["        " + line for line in self.write_stmt(refs, outside=True)]
        return lines

    def module(self) -> str:
        r = self.rng
        self.emit("acc = x * 0.5")
        for _ in range(r.randint(4, 10)):
            self.statement()
        out = ["acc"]
        if self.local_objects and self.chance(0.6):
            out.append(r.choice(self.local_objects))
        if self.chance(0.3):
            out.append("obj")
        self.emit(f"return ({', '.join(out)},)")
        a, b = r.randint(2, 4), r.randint(2, 4)
        objects = []
        for name, key in (("G_OBJ", "G_OBJ"), ("C_OBJ", "C_OBJ"), ("P_OBJ", "P_OBJ")):
            tag = r.choice([None, "multi"])
            objects.append(f"{name} = {self.kinds[key]}({r.randint(0, 4)}, torch.ones(SHAPE), {tag!r})")
        cfg = f"{self.kinds['MOD_CFG']}({r.randint(0, 4)}, torch.zeros(SHAPE), None)"
        if self.variant == "forward":
            head = [
                "class Net(Mod):",
                "    def forward(self, x, y, n, obj):",
                *["    " + line for line in self.lines],
                "",
                "",
                "torch.manual_seed(0)",
                f"G_MOD = Net({cfg}, SHAPE[1])",
                "f = G_MOD",
                "",
                "",
                "def make_args(call):",
                "    g = torch.Generator().manual_seed(call if call != 1 else 0)",
                "    x, y = torch.randn(SHAPE, generator=g), torch.randn(SHAPE, generator=g)",
                "    return (x, y, _N[call], _obj(call)), {}",
            ]
        else:
            params = "x, y, n, obj, m" if self.m == "m" else "x, y, n, obj"
            head = [
                "def _make(c_obj):",
                f"    def f({params}):",
                *["    " + line for line in self.lines],
                "",
                "    return f",
                "",
                "",
                "torch.manual_seed(0)",
                f"G_MOD = Mod({cfg}, SHAPE[1])",
                "f = _make(C_OBJ)",
                "",
                "",
                "def make_args(call):",
                "    g = torch.Generator().manual_seed(call if call != 1 else 0)",
                "    x, y = torch.randn(SHAPE, generator=g), torch.randn(SHAPE, generator=g)",
                f"    return (x, y, _N[call], _obj(call){', G_MOD' if self.m == 'm' else ''}), {{}}",
            ]
        ns = [r.randint(-1, 4)]
        ns += [ns[0], r.randint(-1, 4), r.randint(-1, 4)]
        if self.arg_persistent:
            make_obj = ["def _obj(call):", "    return P_OBJ"]
        else:
            make_obj = [
                "def _obj(call):",
                f"    a = (0, 0, 1, 2)[call] + {r.randint(0, 3)}  # calls 0 and 1 get equal objects",
                f"    return {self.kinds['ARG']}(a, torch.full(SHAPE, float(a)), _TAGS[call])",
            ]
        tags = [r.choice([None, "single", "multi"]) for _ in range(2)]
        tags = [tags[0], tags[0], tags[1], r.choice([None, "single", "multi"])]
        mod = [
            f"# fuzz object-model program, seed {self.seed}",
            "import torch",
            "import stenograph",
            "",
            f"SHAPE = ({a}, {b})",
            CLASSES,
            HELPERS,
            *objects,
            "",
            "",
            *head,
            "",
            "",
            f"_N = {ns!r}",
            f"_TAGS = {tags!r}",
            "",
            "",
            *make_obj,
            "",
            "",
            "def before_call(call):",
            '    """Writes and deletes outside f: before calls 2 and 3 (calls 0 and 1 see the same state)."""',
            *self.outside_writes(2),
            *self.outside_writes(3),
        ]
        return "\n".join(mod) + "\n"


def generate_objects(seed: int, features: frozenset[str] = frozenset()) -> Program:
    """The object-model program for `seed` (features are ignored: every path is always on)."""
    gen = _ObjGen(seed)
    source = gen.module()
    return Program(seed=seed, source=source, features=frozenset(features), stable=not gen.writes_persistent)
