"""The Platt fit of the post-hoc heads (l2d_core.routers.calibration.fit_platt): its vectorised
Newton solve lands where scipy.optimize's own minimiser of the same penalised log loss does, on
every output at once. The routers' scipy-free special functions (the sigmoid, erf and the heads'
exact GELU) against scipy's own."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import erf as scipy_erf
from scipy.special import expit

from l2d_core.routers.calibration import fit_platt, sigmoid
from l2d_core.routers.special import erf, gelu


def penalised_log_loss(w, z, y, ridge):
    m = w[0] * z + w[1]
    return np.sum(np.logaddexp(0.0, m) - y * m) + 0.5 * ridge * ((w[0] - 1.0) ** 2 + w[1] ** 2)


def data(n: int, seed: int):
    """(n, 3, 2) logits and errors, each output with a slope and bias of its own; the last
    output all errors (its loss is bounded by the ridge alone)."""
    rng = np.random.default_rng(seed)
    z = rng.normal(scale=2.0, size=(n, 3, 2))
    slope, bias = rng.uniform(0.3, 2.5, size=(3, 2)), rng.uniform(-1.0, 1.0, size=(3, 2))
    errors = (rng.random((n, 3, 2)) < 1 / (1 + np.exp(-(slope * z + bias)))).astype(np.float32)
    errors[:, 2, 1] = 1.0
    return z.astype(np.float32), errors


@pytest.mark.parametrize(("n", "ridge"), [(400, 1.0), (12, 1.0), (400, 1e-3)])
def test_platt_newton_matches_scipy(n, ridge):
    z, errors = data(n, seed=n)
    fitted = fit_platt(z, errors, ridge=ridge)
    assert fitted.shape == (3, 2, 2)
    for i in range(3):
        for j in range(2):
            zz, yy = z[:, i, j].astype(np.float64), errors[:, i, j].astype(np.float64)
            ref = minimize(penalised_log_loss, [1.0, 0.0], args=(zz, yy, ridge), method="BFGS", tol=1e-12)
            assert np.allclose(fitted[i, j], ref.x, atol=1e-5), (i, j, fitted[i, j], ref.x)
            # never worse than scipy's optimum (the Newton solve converges to the minimum itself)
            assert penalised_log_loss(fitted[i, j], zz, yy, ridge) <= ref.fun + 1e-9


def test_platt_scarce_data_stays_near_identity():
    """With two questions the ridge holds the map near (1, 0); with many it follows the data."""
    z, errors = data(400, seed=1)
    few = fit_platt(z[:2], errors[:2], ridge=1.0)
    many = fit_platt(z, errors, ridge=1.0)
    assert np.abs(few - [1.0, 0.0]).max() < np.abs(many - [1.0, 0.0]).max()


def test_the_sigmoid_is_scipys_expit_to_the_last_bit_without_scipy():
    x = np.random.default_rng(0).normal(size=200_000) * np.repeat([1.0, 8.0, 40.0, 800.0], 50_000)
    x = np.concatenate([x, [-np.inf, -1000.0, -0.0, 0.0, 1000.0, np.inf]])
    assert np.abs(sigmoid(x) - expit(x)).max() <= 2.3e-16
    assert sigmoid(np.array([-np.inf, 0.0, np.inf])).tolist() == [0.0, 0.5, 1.0]


def test_erf_is_scipys_to_one_unit_in_the_last_place_without_scipy():
    rng = np.random.default_rng(0)
    x = rng.normal(size=300_000) * np.repeat([0.5, 1.0, 3.0], 100_000)
    ends = [-np.inf, -1e300, -27.0, -8.0, -1.0, -0.0, 0.0, 5e-324, 1.0, 1.0 + 2e-16, 8.0, 26.0, 1e300, np.inf]
    x = np.concatenate([x, np.linspace(-10, 10, 100_001), ends])
    got, want = erf(x), scipy_erf(x)
    assert np.all(np.abs(got - want) <= np.spacing(np.abs(want)))
    assert erf(np.array([-np.inf, np.inf])).tolist() == [-1.0, 1.0] and np.isnan(erf(np.array([np.nan])))[0]
    h = rng.normal(size=(50, 64)) * 4
    assert np.abs(gelu(h) - 0.5 * h * (1.0 + scipy_erf(h / np.sqrt(2.0)))).max() <= 1e-15
