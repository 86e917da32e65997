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
    if x.mean() > 0.5:
        pass
    else:
        pass
    if bool(x.sum() * x.sum() > 0):
        while w3 < min(abs(n), 3):
            pass
        v6 = torch.stack(ts5).sum(0)
        v6 += y.reshape(-1).reshape(y.shape).reshape(-1).reshape(y.reshape(-1).reshape(y.shape).shape)


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
    x, y = (torch.randn(a, b, generator=g), torch.randn(a, b, generator=g))
    kwargs = {} if _OPT[call] is _MISSING else {"opt": _OPT[call]}
    lst, d = (list(_LST[call]), dict(_D[call]))
    args = (x, y, _N[call], _S[call], _FLAG[call], lst, d, _MODE[call], C0(_OV[call]))
    return (args, kwargs)


def before_call(call):
    """What changes outside f before call number `call`."""
    global G_SCALE, G_INT
    if call == 3:
        G_SCALE = -0.5
        G_INT = 5
