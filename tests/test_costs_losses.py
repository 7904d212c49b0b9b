"""SPEC §3 costs/TDL/β rule and SPEC §4 comp-sum surrogate and SDL, incl. the consistency check."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from l2d_core.method.costs import (
    CostConfig,
    InvalidCostError,
    beta_from_gflops,
    cost_matrix,
    query_costs,
    tdl,
)
from l2d_core.method.losses import EXP_LINEARIZE_AT, comp_sum, sdl, tau
from l2d_core.method.policies import bayes_policy, learned_policy

# ----------------------------------------------------------------------------- costs

# (N=2, 2 endpoints, A=3 agents)
ERRS = np.array(
    [
        [[1, 0, 1], [0, 1, 1]],
        [[0, 0, 0], [1, 1, 0]],
    ],
    dtype=bool,
)
COSTS = CostConfig(alpha=[2.0, 0.5], beta=[0.1, 0.3])
# c_0 = err; c_1 = 2·err + 0.1; c_2 = 0.5·err + 0.3
COST_EXPECTED = np.array(
    [
        [[1.0, 0.1, 0.8], [0.0, 2.1, 0.8]],
        [[0.0, 0.1, 0.3], [1.0, 2.1, 0.3]],
    ]
)


def test_cost_matrix_alpha_not_one():
    np.testing.assert_allclose(cost_matrix(ERRS, COSTS), COST_EXPECTED)


def test_cost_matrix_three_experts_and_probabilities():
    costs = CostConfig(alpha=[1.0, 0.0, 3.0], beta=[0.0, 0.2, 0.05])
    errs = np.array([[[1, 1, 1, 1], [0, 1, 0, 1]]])
    np.testing.assert_allclose(cost_matrix(errs, costs), [[[1.0, 1.0, 0.2, 3.05], [0.0, 1.0, 0.2, 3.05]]])
    # error probabilities give expected costs (η of SPEC §5)
    eta = np.array([[[0.5, 0.2, 0.4, 0.1], [0.25, 0.0, 1.0, 0.3]]])
    np.testing.assert_allclose(cost_matrix(eta, costs), [[[0.5, 0.2, 0.2, 0.35], [0.25, 0.0, 0.2, 0.95]]])


def test_cost_matrix_shape_checked():
    with pytest.raises(InvalidCostError):
        cost_matrix(np.zeros((2, 2, 4)), COSTS)  # 3 experts' worth for a 2-expert config
    with pytest.raises(InvalidCostError):
        cost_matrix(np.zeros((2, 3, 3)), COSTS)
    with pytest.raises(InvalidCostError):
        cost_matrix(np.zeros((2, 3)), COSTS)


def test_query_costs_and_tdl():
    np.testing.assert_allclose(query_costs(COST_EXPECTED), [[1.0, 2.2, 1.6], [1.0, 2.2, 0.6]])
    np.testing.assert_allclose(tdl(COST_EXPECTED, np.array([2, 0])), [1.6, 1.0])
    np.testing.assert_allclose(tdl(COST_EXPECTED, np.array([1, 2])), [2.2, 0.6])
    np.testing.assert_allclose(tdl(COST_EXPECTED, [0, 0]), [1.0, 1.0])


# ----------------------------------------------------------------------------- β GFLOPs rule


def test_beta_from_gflops_two_experts():
    beta = beta_from_gflops(0.5, [10.0, 20.0])
    np.testing.assert_allclose(beta, [0.5, 0.05])  # 0.5 · 20 / (20 · 10)
    paper = beta_from_gflops(0.2, [32.68, 928.08])  # ALBERT-Base, ALBERT-XXL
    assert paper[0] == 0.2
    assert paper[1] == pytest.approx(0.2 * 928.08 / (20 * 32.68))
    assert paper[1] == pytest.approx(0.28399, abs=1e-5)


def test_beta_from_gflops_several_experts():
    # β_1 stays as given (not β_1/20); β_j = β_1·G_j/(20·G_1) for j >= 2
    np.testing.assert_allclose(beta_from_gflops(1.0, [10.0, 200.0, 400.0, 10.0]), [1.0, 1.0, 2.0, 0.05])
    np.testing.assert_allclose(beta_from_gflops(0.0, [1.0, 5.0]), [0.0, 0.0])


@pytest.mark.parametrize("gflops", [[], [0.0, 1.0], [1.0, -2.0], [1.0, float("nan")], [1.0, float("inf")]])
def test_beta_from_gflops_bad_gflops(gflops):
    with pytest.raises(InvalidCostError, match="GFLOPs"):
        beta_from_gflops(0.1, gflops)


@pytest.mark.parametrize("beta1", [-0.1, float("nan"), float("inf"), "x"])
def test_beta_from_gflops_bad_beta1(beta1):
    with pytest.raises(InvalidCostError, match="beta_1"):
        beta_from_gflops(beta1, [1.0, 2.0])


def test_cost_config_from_beta1():
    c = CostConfig.from_beta1(0.5, [10.0, 20.0, 40.0], alpha=2.0)
    assert c.alpha == (2.0, 2.0, 2.0)
    assert c.beta == pytest.approx((0.5, 0.05, 0.1))
    assert c.n_experts == 3
    c = CostConfig.from_beta1(0.5, [10.0, 20.0], alpha=[1.0, 0.5])
    assert c.alpha == (1.0, 0.5)
    with pytest.raises(InvalidCostError):
        CostConfig.from_beta1(0.5, [10.0, 20.0], alpha=[1.0])  # one α for two experts


# ----------------------------------------------------------------------------- CostConfig validation


@pytest.mark.parametrize(
    "alpha, beta, name",
    [
        ([float("nan")], [0.1], "alpha_1"),
        ([1.0, float("inf")], [0.0, 0.0], "alpha_2"),
        ([1.0, -1.0], [0.0, 0.0], "alpha_2"),
        ([1.0], [float("nan")], "beta_1"),
        ([1.0, 1.0], [0.1, -0.2], "beta_2"),
        ([1.0], [-float("inf")], "beta_1"),
        (["abc"], [0.1], "alpha_1"),
        ([1.0, 1.0], [0.1, "x"], "beta_2"),
        ([None], [0.1], "alpha_1"),
        ([1.0], [[0.1]], "beta_1"),
    ],
)
def test_cost_config_rejects_bad_values(alpha, beta, name):
    with pytest.raises(InvalidCostError, match=name):
        CostConfig(alpha=alpha, beta=beta)


@pytest.mark.parametrize("alpha, beta", [([1.0, 1.0], [0.1]), ([1.0], [0.1, 0.2]), ([], [])])
def test_cost_config_rejects_wrong_lengths(alpha, beta):
    with pytest.raises(InvalidCostError) as exc:
        CostConfig(alpha=alpha, beta=beta)
    assert "alpha" in str(exc.value) and "beta" in str(exc.value)


@pytest.mark.parametrize(
    "alpha, beta",
    [("12", [0.1, 0.2]), (["0.5"], [0.1]), (1.0, 0.1)],
    ids=["whole-string", "numeric-string-element", "scalar"],
)
def test_cost_config_rejects_strings_and_scalars(alpha, beta):
    with pytest.raises(InvalidCostError, match="alpha"):
        CostConfig(alpha=alpha, beta=beta)


def test_invalid_cost_error_is_value_error():
    assert issubclass(InvalidCostError, ValueError)


def test_cost_config_json_roundtrip_and_errors():
    c = CostConfig(alpha=[1.0, 0.5], beta=[0.1, 0.2])
    assert CostConfig.from_json(c.to_json()) == c
    with pytest.raises(InvalidCostError):
        CostConfig.from_json("not json")
    with pytest.raises(InvalidCostError):
        CostConfig.from_json('{"alpha": [1.0]}')
    with pytest.raises(InvalidCostError, match="alpha_1"):
        CostConfig.from_json('{"alpha": [NaN], "beta": [0.1]}')


# ----------------------------------------------------------------------------- comp-sum Φ^ν


def _phi_naive(scores: np.ndarray, nu: float) -> np.ndarray:
    """Φ^ν by the SPEC formula, Ψ summed naively in float64."""
    s = np.asarray(scores, dtype=np.float64)
    out = np.empty_like(s)
    for idx in np.ndindex(s.shape[:-1]):
        row = s[idx]
        for j in range(row.shape[0]):
            psi = sum(math.exp(row[k] - row[j]) for k in range(row.shape[0]))
            out[idx + (j,)] = math.log(psi) if nu == 1 else (psi ** (1 - nu) - 1) / (1 - nu)
    return out


@pytest.mark.parametrize("nu", [0.0, 0.5, 1.0, 2.0, 3.0])
def test_comp_sum_matches_formula(nu):
    rng = np.random.default_rng(int(nu * 10))
    scores = rng.uniform(-3, 3, size=(4, 2, 3))
    got64 = comp_sum(torch.tensor(scores, dtype=torch.float64), nu).numpy()
    np.testing.assert_allclose(got64, _phi_naive(scores, nu), rtol=1e-10, atol=1e-12)
    got32 = comp_sum(torch.tensor(scores, dtype=torch.float32), nu).numpy()
    np.testing.assert_allclose(got32, _phi_naive(scores, nu), rtol=1e-4, atol=1e-5)


def test_comp_sum_hand_values():
    r = torch.tensor([[0.0, math.log(3.0)]], dtype=torch.float64)  # Ψ = (4, 4/3)
    torch.testing.assert_close(
        comp_sum(r, 1.0), torch.tensor([[math.log(4), math.log(4 / 3)]], dtype=torch.float64)
    )
    torch.testing.assert_close(comp_sum(r, 0.0), torch.tensor([[3.0, 1 / 3]], dtype=torch.float64))
    torch.testing.assert_close(comp_sum(r, 2.0), torch.tensor([[0.75, 0.25]], dtype=torch.float64))
    torch.testing.assert_close(
        comp_sum(r, 0.5), torch.tensor([[2 * (2 - 1), 2 * (math.sqrt(4 / 3) - 1)]], dtype=torch.float64)
    )


def test_comp_sum_nu2_is_one_minus_softmax_and_nu1_is_neg_log_softmax():
    scores = torch.randn(5, 2, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 3
    torch.testing.assert_close(comp_sum(scores, 2.0), 1 - torch.softmax(scores, dim=-1))
    torch.testing.assert_close(comp_sum(scores, 1.0), -torch.log_softmax(scores, dim=-1))


def test_comp_sum_linearization_is_continuous():
    # z = log Ψ around EXP_LINEARIZE_AT for ν = 0: value stays close to the exact Ψ - 1
    for z in (EXP_LINEARIZE_AT - 0.05, EXP_LINEARIZE_AT + 0.05):
        r = torch.tensor([[0.0, -z]], dtype=torch.float64)  # Ψ_1 = 1 + e^z
        exact = math.exp(z)
        assert comp_sum(r, 0.0)[0, 1].item() == pytest.approx(exact, rel=2e-3)


@pytest.mark.parametrize("nu", [-0.5, float("nan"), float("inf"), -1e-9])
def test_comp_sum_rejects_bad_nu(nu):
    with pytest.raises(ValueError):
        comp_sum(torch.zeros(1, 3), nu)
    with pytest.raises(ValueError):
        sdl(torch.zeros(1, 2, 3), torch.ones(1, 2, 3), nu)


# ----------------------------------------------------------------------------- τ and SDL


def test_tau():
    c = torch.tensor([[[1.0, 0.1, 0.8], [0.0, 2.1, 0.8]]], dtype=torch.float64)
    torch.testing.assert_close(
        tau(c), torch.tensor([[[0.9, 1.8, 1.1], [2.9, 0.8, 2.1]]], dtype=torch.float64)
    )


# batch of 2 queries, A = 2 (main + one expert)
SDL_SCORES = torch.tensor(
    [
        [[0.0, 0.0], [math.log(3.0), 0.0]],
        [[0.0, 0.0], [0.0, 0.0]],
    ],
    dtype=torch.float64,
)
SDL_COSTS = torch.tensor(
    [
        [[1.0, 0.2], [0.0, 1.2]],  # τ = [0.2, 1.0], [1.2, 0.0]
        [[0.0, 0.5], [0.0, 0.5]],  # τ = [0.5, 0.0] twice
    ],
    dtype=torch.float64,
)


def test_sdl_by_hand_nu1():
    # q0: 0.2·log2 + 1·log2 + 1.2·log(4/3) + 0·log4 = 1.2·log(8/3); q1: 2·0.5·log2 = log2
    q0, q1 = 1.2 * math.log(8 / 3), math.log(2)
    per = sdl(SDL_SCORES, SDL_COSTS, 1.0, reduction="none")
    torch.testing.assert_close(per, torch.tensor([q0, q1], dtype=torch.float64))
    assert sdl(SDL_SCORES, SDL_COSTS, 1.0).item() == pytest.approx((q0 + q1) / 2)
    assert sdl(SDL_SCORES, SDL_COSTS, 1.0, reduction="sum").item() == pytest.approx(q0 + q1)


def test_sdl_by_hand_other_nu():
    per2 = sdl(SDL_SCORES, SDL_COSTS, 2.0, reduction="none")  # Φ = 1 - softmax
    torch.testing.assert_close(per2, torch.tensor([0.2 * 0.5 + 0.5 + 1.2 * 0.25, 0.5], dtype=torch.float64))
    per0 = sdl(SDL_SCORES, SDL_COSTS, 0.0, reduction="none")  # Φ = Ψ - 1
    torch.testing.assert_close(per0, torch.tensor([0.2 + 1.0 + 1.2 / 3, 1.0], dtype=torch.float64))


def test_sdl_argument_checks():
    with pytest.raises(ValueError):
        sdl(torch.zeros(2, 2, 3), torch.zeros(2, 2, 2))
    with pytest.raises(ValueError):
        sdl(SDL_SCORES, SDL_COSTS, reduction="avg")


@pytest.mark.parametrize("nu", [0.0, 0.5, 1.0, 2.0, 3.0])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sdl_extreme_scores_finite(nu, dtype):
    gen = torch.Generator().manual_seed(1)
    signs = torch.randint(0, 2, (8, 2, 3), generator=gen).to(dtype) * 2 - 1
    scores = (signs * 1e4).requires_grad_(True)
    cost = torch.rand(8, 2, 3, generator=gen, dtype=dtype) + 0.1
    loss = sdl(scores, cost, nu)
    assert torch.isfinite(loss)
    loss.backward()
    assert torch.isfinite(scores.grad).all()
    phi = comp_sum(scores.detach(), nu)
    assert torch.isfinite(phi).all() and (phi >= 0).all()


def test_extreme_scores_values():
    r = torch.tensor([[1e4, -1e4, 0.0]])
    phi1 = comp_sum(r, 1.0)[0]
    assert phi1[0].item() == pytest.approx(0.0, abs=1e-3)
    assert phi1[1].item() == pytest.approx(2e4, rel=1e-6)
    assert phi1[2].item() == pytest.approx(1e4, rel=1e-6)
    phi2 = comp_sum(r, 2.0)[0]
    torch.testing.assert_close(phi2, torch.tensor([0.0, 1.0, 1.0]))


# ----------------------------------------------------------------------------- consistency (SPEC §4)

CONS_COSTS = CostConfig(alpha=[1.0, 0.8], beta=[0.10, 0.25])
# η_j^i(x): P[agent j wrong on endpoint i] on 6 inputs; expected query costs in the comments
CONS_ETA = np.array(
    [
        [[0.05, 0.10, 0.05], [0.10, 0.15, 0.10]],  # 0.15, 0.45, 0.62   -> main
        [[0.02, 0.50, 0.30], [0.05, 0.40, 0.20]],  # 0.07, 1.10, 0.90   -> main
        [[0.80, 0.10, 0.20], [0.70, 0.05, 0.30]],  # 1.50, 0.35, 0.90   -> expert 1
        [[0.60, 0.05, 0.30], [0.90, 0.10, 0.40]],  # 1.50, 0.35, 1.06   -> expert 1
        [[0.90, 0.80, 0.05], [0.85, 0.70, 0.02]],  # 1.75, 1.70, 0.556  -> expert 2
        [[0.70, 0.60, 0.00], [0.95, 0.90, 0.10]],  # 1.65, 1.70, 0.58   -> expert 2
    ]
)
CONS_BAYES = np.array([0, 0, 1, 1, 2, 2])


def test_consistency_setup():
    assert bayes_policy(CONS_ETA, CONS_COSTS).tolist() == CONS_BAYES.tolist()
    qc = query_costs(cost_matrix(CONS_ETA, CONS_COSTS))
    srt = np.sort(qc, axis=1)
    assert (srt[:, 1] - srt[:, 0] > 0.25).all()  # clear margin


def test_expected_sdl_equals_sdl_of_expected_costs():
    """E_Y[SDL(r, c(x, Y))] over independent endpoint errors == SDL(r, c̄): the SDL is linear in c."""
    scores = torch.randn(6, 2, 3, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    outcomes = np.array(list(itertools.product([0, 1], repeat=6)), dtype=float).reshape(-1, 2, 3)
    expected = torch.zeros((), dtype=torch.float64)
    for n in range(6):
        prob = np.prod(np.where(outcomes == 1, CONS_ETA[n], 1 - CONS_ETA[n]), axis=(1, 2))  # (64,)
        c = torch.tensor(cost_matrix(outcomes, CONS_COSTS))
        per = sdl(scores[n].expand(len(outcomes), 2, 3), c, 1.0, reduction="none")
        expected = expected + (torch.tensor(prob) * per).sum() / 6
    cbar = torch.tensor(cost_matrix(CONS_ETA, CONS_COSTS))
    torch.testing.assert_close(expected, sdl(scores, cbar, 1.0))


def _minimise_expected_sdl(nu: float) -> torch.Tensor:
    torch.manual_seed(0)
    cbar = torch.tensor(cost_matrix(CONS_ETA, CONS_COSTS))
    r = torch.nn.Parameter(torch.zeros(6, 2, 3, dtype=torch.float64))
    if nu < 2:  # finite minimiser: quasi-Newton converges
        opt = torch.optim.LBFGS(
            [r],
            lr=1,
            max_iter=500,
            tolerance_grad=1e-12,
            tolerance_change=1e-14,
            line_search_fn="strong_wolfe",
        )

        def closure():
            opt.zero_grad()
            loss = sdl(r, cbar, nu)
            loss.backward()
            return loss

        opt.step(closure)
    else:  # bounded loss, minimiser at infinity: plain Adam
        opt = torch.optim.Adam([r], lr=0.05)
        for _ in range(1500):
            opt.zero_grad()
            sdl(r, cbar, nu).backward()
            opt.step()
    return r.detach()


@pytest.mark.parametrize("nu", [0.0, 0.5, 1.0, 2.0])
def test_minimising_expected_sdl_recovers_bayes_rejector(nu):
    scores = _minimise_expected_sdl(nu)
    assert learned_policy(scores.numpy()).tolist() == CONS_BAYES.tolist()
    if nu < 2:
        # closed-form population minimiser: softmax(r^i) ∝ τ̄^i ** (1 / (2 - ν))
        t = tau(torch.tensor(cost_matrix(CONS_ETA, CONS_COSTS))) ** (1 / (2 - nu))
        torch.testing.assert_close(torch.softmax(scores, -1), t / t.sum(-1, keepdim=True), atol=1e-5, rtol=0)


class _RuleBench:
    """What the command line's cost flags read of a benchmark: the pool's experts and its rules."""

    pool = type("Pool", (), {"experts": ("x",)})()

    def rule_costs(self, rule, value, alpha=1.0):
        return (rule, value, alpha)


def _cost_flags(*argv):
    import argparse

    from l2d_core.cli import add_cost_arguments

    p = argparse.ArgumentParser()
    add_cost_arguments(p)
    return p.parse_args(list(argv))


def test_the_cost_flags_set_beta_by_one_rule_each():
    from l2d_core.cli import checked_budget, cost_rule, costs_from_arguments

    bench = _RuleBench()
    for argv, rule, value in (
        ((), "gflops", 0.05),
        (("--price", "0"), "price", 0.0),
        (("--latency-price", "0.03"), "latency", 0.03),
        (("--money-price", "20"), "money", 20.0),
    ):
        args = _cost_flags(*argv)
        assert checked_budget(args) is None and cost_rule(args) == rule
        assert costs_from_arguments(args, bench) == (rule, value, (1.0,))
        assert costs_from_arguments(args, bench, setting=0.7) == (rule, 0.7, (1.0,))  # a sweep's point
    with pytest.raises(ValueError, match="give β one way: --price or --latency-price"):
        checked_budget(_cost_flags("--price", "0.1", "--latency-price", "0.1"))
    with pytest.raises(ValueError, match="give β one way: --latency-price or --money-price"):
        checked_budget(_cost_flags("--latency-price", "0.1", "--money-price", "3"))
    for flag in ("--latency-price", "--money-price"):
        with pytest.raises(InvalidCostError, match="λs and λ\\$ must be finite"):
            checked_budget(_cost_flags(flag, "-1"))


def test_the_default_cost_setting_is_of_the_pools_rule_and_the_ranking_is_read_by_it():
    from l2d_core.app_logic.default_view import DefaultChoice, ranking_frame
    from l2d_core.evaluation.validation import Ranked

    fast = Ranked("a", 3.0, 0.1, 80.0, 1.0, 0.05, gain_low=0.4, latency_gain_low=-0.2)
    slow = Ranked("b", 2.0, 0.2, 79.0, 4.0, 0.3, gain_low=-0.1, latency_gain_low=2.5)
    assert fast.best("price") == (3.0, 0.1) and fast.best("latency") == (1.0, 0.05)
    # a router pays where the low end of its best gain's 95% interval is above 0, under the rule
    assert fast.pays("price") and not fast.pays("latency") and slow.pays("latency") and not slow.pays("price")
    assert list(ranking_frame([fast, slow], "latency")["95% interval from"]) == [2.5, -0.2]
    assert list(ranking_frame([fast, slow], "price")["EM above random mixing"]) == [3.0, 2.0]
    by_latency = ranking_frame([fast, slow], "latency")
    assert list(by_latency["EM above random mixing"]) == [4.0, 1.0]
    assert list(by_latency["at λₛ (errors per second)"]) == [0.3, 0.05]
    choice = DefaultChoice("b", 0.3, 4.0, [slow, fast], rule="latency")
    assert choice.costs(_RuleBench()) == ("latency", 0.3, 1.0) and choice.unpaid_gain is None
    lost = DefaultChoice("agent:x", 0.3, 0.0, [slow], instead_of=slow, rule="latency")
    assert lost.unpaid_gain == 4.0 and lost.unpaid_low == 2.5  # the router that did not pay, by the rule
    assert not lost.pays and choice.pays


def test_a_pool_whose_answers_have_prices_starts_on_the_money_rule():
    from types import SimpleNamespace as NS

    from l2d_core.app_logic.default_view import ranking_frame
    from l2d_core.evaluation.validation import Ranked, default_rule

    priced = NS(has_money=True, money_prices=(0.0, 1.0, 1.5), has_latency=True)
    assert default_rule(priced) == "money"
    assert (
        default_rule(NS(has_money=True, money_prices=None, has_latency=True)) == "latency"
    )  # no dearer expert
    assert default_rule(NS(has_money=False, money_prices=None, has_latency=False)) == "price"
    r = Ranked("a", 3.0, 0.1, 80.0, gain_low=0.4, money_gain=2.0, money_price=150.0, money_gain_low=-0.5)
    assert (
        r.best("money") == (2.0, 150.0) and r.low("money") == -0.5 and not r.pays("money") and r.pays("price")
    )
    frame = ranking_frame([r], "money")
    assert frame["at λ$ (errors per dollar)"].tolist() == [150.0] and frame[
        "EM above random mixing"
    ].tolist() == [2.0]
