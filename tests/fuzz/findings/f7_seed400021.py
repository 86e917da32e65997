# ruff: noqa
# fuzz program, seed 400021
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
    global G_COUNT
    rng_acc = x.new_zeros(())
    if x.mean() > 0.5:
        torch.manual_seed(6)
        v1 = torch.rand(x.shape[1])
        if y.sum() > 0:
            y[0] = v1 + x.sum()
        else:
            v2 = obj.scaled(s)
    else:
        x += y.relu()
    if bool((x.sum() * x.sum()) > 0):
        w3 = 0
        while w3 < min(abs(n), 3):
            w3 += 1
            v4 = sorted(lst)
        ts5 = [y.abs() * 0.5 for i in range(2)]
        v6 = torch.stack(ts5).sum(0)
        v6 += y.reshape(-1).reshape(y.shape).reshape(-1).reshape(y.reshape(-1).reshape(y.shape).shape)
    v7 = x[-1].max()
    y.clamp_(-1.0, 1.0)
    for i8 in range(x.shape[0] - 1):
        v9 = [v for v in [v * 2 for v in lst] if v > 2]
        v10 = torch.randn_like(x)
    w11 = 0
    while w11 < 2:
        w11 += 1
        torch.manual_seed(0)
        v12 = torch.randn_like(x)
        w13 = 0
        while w13 < 2:
            w13 += 1
            d["a"] = n % 3
    if torch.tanh(v7) > -1.0:
        v14 = torch.sin(torch.sin(y))
        st15 = {v % 3 for v in lst}
        v16 = len(st15) + int(0 in st15)
    else:
        if y.sum() > -1.0:
            v17 = torch.randn_like(x)
        else:
            G_COUNT += 1
    v18 = (x[0] * x[0]) * x[-1]
    ts19 = [y * i + 1 for i in range(2)]
    v20 = sum(ts19)
    return (
        v18,
        rng_acc,
    )


_SHAPES = [(3, 3), (3, 3), (3, 5), (6, 3)]
_N = [3, 3, 1, -1]
_S = [-0.0, -0.0, 0.25, -0.0]
_FLAG = [False, False, False, True]
_LST = [[4, 5], [4, 5], [3, 1, -2, 2, -2], [4, 5, 7]]
_D = [{"a": 2, "b": 3}, {"a": 2, "b": 3}, {"b": 2, "c": 1}, {"a": 5, "sum": 1}]
_MODE = ["mean", "mean", "mean", "sum"]
_OV = [2, 2, 1, 1]
_OPT = [_MISSING, _MISSING, None, 3]
_TSEED = [21, 21, 22, 23]


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
