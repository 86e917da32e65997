"""NumPy programs for the differential fuzzer (`--generator numpy`): chains of NumPy functions,
ndarray methods, operators and in-place updates on two arrays of random dtypes, with Python and
NumPy scalars among the operands, compared with eager on each result's type, dtype and values and
on the arrays passed in. It found the corners where torch._numpy differs from NumPy (dtypes of
reductions, Python numbers out of a dtype's range, missing kernels, value-dependent errors),
which stenograph now checks while tracing (`variables/numpy_oracle.py`).

float16 is left out: NumPy accumulates its reductions in float16, torch in float32, so their
results differ by more than the comparison's tolerance without either being wrong. So are complex
dtypes: a complex division by zero gives infinite parts where NumPy gives NaN for some values
(torch's own arithmetic; the values decide, which no stand-in shows: docs/supported.md).
"""

from __future__ import annotations

import random

from .generator import Program

_DTYPES = ["float64", "float32", "int64", "int32", "bool", "uint8"]
_UNARY = [
    "-{a}", "abs({a})", "np.exp({a})", "np.sqrt(np.abs({a}))", "{a}.T", "np.sum({a})", "{a}.sum(axis=0)",
    "np.mean({a})", "{a}.max()", "np.cumsum({a})", "{a}.astype(np.float32)", "{a}.astype(int)",
    "{a}.astype(bool)", "{a}[0]", "{a}[1:]", "{a}.reshape(-1)", "np.round({a})", "{a}.copy()",
    "np.clip({a}, 0, 1)", "np.argmax({a})", "({a} > 0)", "~({a} > 0)", "np.asarray({a})", "{a}.ravel()",
    "np.floor({a})", "{a} ** 2", "np.square({a})", "{a}.std()", "np.prod({a})", "{a}.any()",
    "{a}.shape[0] * {a}", "len({a}) + {a}", "np.sort({a}, axis=-1)", "np.transpose({a})", "{a}.ndim + {a}",
]  # fmt: skip
_BINARY = [
    "{a} + {b}", "{a} - {b}", "{a} * {b}", "{a} / {b}", "{a} // {b}", "{a} % {b}", "np.maximum({a}, {b})",
    "np.where({a} > {b}, {a}, {b})", "{a} == {b}", "{a} < {b}", "np.add({a}, {b})", "np.true_divide({a}, {b})",
    "np.divide({a}, {b})", "{a} & {b}", "{a} | {b}", "np.power({a}, {b})", "np.minimum({a}, {b})",
    "np.hypot({a}, {b})", "np.arctan2({a}, {b})", "np.stack([{a}, {b}])", "np.concatenate([{a}, {b}])",
]  # fmt: skip
_IN_PLACE = ["{a} += {b}", "{a} *= {b}", "{a} -= {b}", "{a}[0] = {b}", "{a} /= {b}"]
_SCALARS = ["2", "2.5", "-1", "True", "np.float32(1.5)", "np.int64(3)", "np.float64(0.5)", "0", "np.uint8(7)"]


def generate_numpy(seed: int, features: frozenset[str] = frozenset()) -> Program:
    """The NumPy program for `seed` (features are ignored)."""
    rng = random.Random(seed)
    names, lines = ["a", "b"], []
    for i in range(rng.randint(2, 6)):
        roll = rng.random()
        if roll < 0.15:
            target = rng.choice(["a", "b"])
            lines.append("    " + rng.choice(_IN_PLACE).format(a=target, b=rng.choice(names + _SCALARS)))
            continue
        if roll < 0.5:
            expr = rng.choice(_UNARY).format(a=rng.choice(names))
        else:
            x, y = rng.choice(names), rng.choice(names + _SCALARS)
            if rng.random() < 0.5:
                x, y = y, x
            expr = rng.choice(_BINARY).format(a=x, b=y)
        lines.append(f"    v{i} = {expr}")
        names.append(f"v{i}")
    results = ", ".join(names[2:]) or "a"
    shape = rng.choice([(3,), (2, 3), (3, 3)])
    source = "\n".join(
        [
            "import numpy as np",
            "",
            "",
            "class C0:",
            "    k = 0",
            "",
            "",
            "def fuzz_state():",
            "    return {}",
            "",
            "",
            "def before_call(call):",
            "    pass",
            "",
            "",
            "def _array(rng, dtype):",
            f"    values = rng.standard_normal({shape!r}) * 3",
            '    if dtype == "bool":',
            "        return values > 0",
            '    return (np.abs(values) if dtype == "uint8" else values).astype(dtype)',
            "",
            "",
            "def make_args(call):",
            "    # calls 0 and 1 get equal arrays: an identical call must not compile again",
            f"    rng = np.random.default_rng({seed} * 10 + (0 if call == 1 else call))",
            f"    return (_array(rng, {rng.choice(_DTYPES)!r}), _array(rng, {rng.choice(_DTYPES)!r})), {{}}",
            "",
            "",
            "def f(a, b):",
            *lines,
            f"    return {results}",
            "",
        ]
    )
    return Program(seed=seed, source=source, features=frozenset(features))
