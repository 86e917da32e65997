# ruff: noqa
# fuzz program, seed 51096
import math
import torch
import stenograph

_MISSING = object()
G_SCALE = 1.5
G_INT = 2
G_COUNT = 0
G_LOG = []


class C0:
    k = 2

    def __init__(self, v):
        self.v = v
        self.hits = 0

    def apply(self, t):
        self.hits += 1
        return t * self.v + self.k

    def scaled(self, f):
        return f * self.v - C0.k

    def bump(self):
        C0.k += 1
        return C0.k


def h0(a, b):
    return a * 2 + b


@stenograph.disable
def _opaque(v):
    G_LOG.append(v)
    return v + 1


def f(x, y, n, s, flag, lst, d, mode, obj, opt=_MISSING):
    rng_acc = x.new_zeros(())
    if bool(x.mean() > 0):
        v1 = torch.rand(x.shape[1])
    else:
        v2 = torch.rand(x.shape[1])
    v3 = x.reshape(-1).reshape(x.shape)
    if torch.tensor(G_SCALE) > -1.0:
        v3 -= x
    else:
        if mode == "mean":
            torch.manual_seed(4)
            v4 = torch.rand(x.shape[1])
            torch.manual_seed(4)
            v5 = torch.randn_like(x)
            v6 = lst.pop() if lst else (5 // 1)
        else:
            x[0] = x[0]
            v7 = x.add_(1)
            v8 = v7 is x
            y.mul_(-1.0)
    v9 = (y / (v3.abs() + 1)).norm()
    if not flag:
        for i10 in range(1):
            v11 = torch.ones_like(v3)
            x.mul_(-1.0)
        if v3.sum() > -1.0:
            v12 = torch.randn(x.shape)
            x.mul_(-1.0)
        else:
            y[0] = torch.cos(x[0])
    else:
        x += h0(y, v9)
        if "a" in d:
            v13 = opt is None
    lst.append(x.dim())
    v14 = len(lst)
    for i15 in range(3):
        ts16 = [y * i + 1 for i in range(2)]
        v17 = ts16[-1]
    v18 = torch.ones_like(y)
    if (math.copysign(1.0, s) < 0) and (x.dim() == 2):
        v19 = dict(d)
        try:
            v20 = lst[n]
        except (IndexError, KeyError):
            v20 = sum(lst)
        v21 = obj.scaled(s)
    return (
        x,
        v9,
        v18,
        v3,
        rng_acc,
    )


_SHAPES = [(2, 3), (2, 3), (3, 3), (3, 3)]
_N = [3, 3, 4, -2]
_S = [-0.0, -0.0, 1.5, 0.0]
_FLAG = [False, False, False, True]
_LST = [[], [], [5, 0, 0, -1], [7]]
_D = [{"a": 2, "b": 1}, {"a": 2, "b": 1}, {"b": 2, "c": 1}, {"a": 5, "sum": 1}]
_MODE = ["sum", "sum", "sum", "mean"]
_OV = [0, 0, 0, 1]
_OPT = [_MISSING, _MISSING, None, 3]
_TSEED = [96, 96, 97, 98]


def make_args(call):
    """Fresh arguments for call number `call` (calls 0 and 1 are equal)."""
    g = torch.Generator().manual_seed(_TSEED[call])
    a, b = _SHAPES[call]
    x, y = torch.randn(a, b, generator=g), torch.randn(a, b, generator=g)
    kwargs = {} if _OPT[call] is _MISSING else {"opt": _OPT[call]}
    lst, d = list(_LST[call]), dict(_D[call])
    args = (x, y, _N[call], _S[call], _FLAG[call], lst, d, _MODE[call], C0(_OV[call]))
    return args, kwargs


def before_call(call):
    """What changes outside f before call number `call`."""
    global G_SCALE, G_INT
    if call == 3:
        G_SCALE = -0.5
        G_INT = 5
    if call == 2:
        C0.k = 4
