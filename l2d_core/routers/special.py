"""The error function and the exact GELU over NumPy arrays, without importing scipy (0.1-0.3 s
off a router's first decision: the heads' hidden layers need them).

:func:`erf` evaluates the rational approximations of Cephes' ``ndtr.c`` (S. L. Moshier), the
ones scipy's ``special.erf`` has long used: within a few units in the last place of it over the
whole real line (tests/test_calibration.py compares them).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["erf", "gelu"]

# |x| <= 1: erf(x) = x T(x²) / U(x²)
_T = (
    9.60497373987051638749e0,
    9.00260197203842689217e1,
    2.23200534594684319226e3,
    7.00332514112805075473e3,
    5.55923013010394962768e4,
)
_U = (
    1.0,
    3.35617141647503099647e1,
    5.21357949780152679795e2,
    4.59432382970980127987e3,
    2.26290000613890934246e4,
    4.92673942608635921086e4,
)
# 1 <= |x| < 8: erfc(x) = exp(-x²) P(x) / Q(x)
_P = (
    2.46196981473530512524e-10,
    5.64189564831068821977e-1,
    7.46321056442269912687e0,
    4.86371970985681366614e1,
    1.96520832956077098242e2,
    5.26445194995477358631e2,
    9.34528527171957607540e2,
    1.02755188689515710272e3,
    5.57535335369399327526e2,
)
_Q = (
    1.0,
    1.32281951154744992508e1,
    8.67072140885989742329e1,
    3.54937778887819891062e2,
    9.75708501743205489753e2,
    1.82390916687909736289e3,
    2.24633760818710981792e3,
    1.65666309194161350182e3,
    5.57535340817727675546e2,
)
# |x| >= 8: erfc(x) = exp(-x²) R(x) / S(x)
_R = (
    5.64189583547755073984e-1,
    1.27536670759978104416e0,
    5.01905042251180477414e0,
    6.16021097993053585195e0,
    7.40974269950448939160e0,
    2.97886665372100240670e0,
)
_S = (
    1.0,
    2.26052863220117276590e0,
    9.39603524938001434673e0,
    1.20489539808096656605e1,
    1.70814450747565897222e1,
    9.60896809063285878198e0,
    3.36907645100081516050e0,
)
_MAXLOG = 7.09782712893383996843e2  # exp(-x²) is 0 in float64 beyond x² = this
SQRT_HALF = math.sqrt(0.5)


def _poly(x: np.ndarray, coef: tuple[float, ...]) -> np.ndarray:
    """Horner's rule, highest power first (Cephes' polevl; a leading 1.0 is its p1evl)."""
    out = np.full_like(x, coef[0])
    for c in coef[1:]:
        out = out * x + c
    return out


def erf(x) -> np.ndarray:
    """The error function, elementwise, in float64 (NaN stays NaN).

    >>> erf(np.array([0.0, 0.5, -1.0, 3.0, np.inf])).round(12).tolist()
    [0.0, 0.520499877813, -0.84270079295, 0.999977909503, 1.0]
    """
    x = np.asarray(x, np.float64)
    out = np.empty_like(x)
    a = np.abs(x)
    small = a <= 1.0
    z = x[small] * x[small]
    out[small] = x[small] * _poly(z, _T) / _poly(z, _U)
    big = ~small & ~np.isnan(x)
    ab = a[big]
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        e = np.exp(-ab * ab)
        mid = ab < 8.0
        tail = np.empty_like(ab)
        tail[mid] = e[mid] * _poly(ab[mid], _P) / _poly(ab[mid], _Q)
        tail[~mid] = e[~mid] * _poly(ab[~mid], _R) / _poly(ab[~mid], _S)
        tail[ab * ab > _MAXLOG] = 0.0  # erfc underflows: erf is ±1 (also for ±inf)
    out[big] = np.copysign(1.0 - tail, x[big])
    out[np.isnan(x)] = np.nan
    return out


def gelu(x: np.ndarray) -> np.ndarray:
    """torch's exact GELU, x Φ(x) = x (1 + erf(x / √2)) / 2, in float64.

    >>> gelu(np.array([-1.0, 0.0, 1.0])).round(9).tolist()
    [-0.158655254, 0.0, 0.841344746]
    """
    return 0.5 * x * (1.0 + erf(x * SQRT_HALF))
