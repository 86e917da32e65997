# ruff: noqa
# fuzz program, seed 61530
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
    v1 = obj.scaled(float(obj.k))
    y += h0(y, x.sum())
    w2 = 0
    while w2 < len(lst):
        w2 += 1
        w3 = 0
        while w3 < min(abs(n), 3):
            w3 += 1
            v4 = (x.shape[0] + n) < (len(d) + C0.k)
            v1 *= 0.0
        v5 = obj.scaled(x.sum().item())
    v6 = x.mean(0)
    return (
        v6,
        v1,
        x,
        rng_acc,
        lst,
    )


_SHAPES = [(3, 5), (3, 5), (3, 7), (6, 5)]
_N = [0, 0, 0, 1]
_S = [-0.0, -0.0, 0.0, 0.25]
_FLAG = [True, True, True, False]
_LST = [[1, 2, -2, -2], [1, 2, -2, -2], [-2, -2, 5, 0], [1, 2, -2, -2, 7]]
_D = [{"a": 0, "b": 3}, {"a": 0, "b": 3}, {"b": 2, "c": 1}, {"a": 5, "sum": 1}]
_MODE = ["mean", "mean", "mean", "sum"]
_OV = [3, 3, 2, 0]
_OPT = [_MISSING, _MISSING, None, 3]
_TSEED = [530, 530, 531, 532]


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
