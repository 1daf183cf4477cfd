"""The vectorised R-hat and ESS against ArviZ's per-parameter implementation.

Oracle: ``arviz_stats``' array functions, called one scalar parameter at a time, on chains
built to exercise every branch of the estimators: strong positive and negative
autocorrelation (Geyer's sequence stopping early, late, or at the length limit),
chains stuck at different levels (R-hat far above 1), ties, constant parameters, NaN
draws, odd draw counts, one chain and the minimum of four draws.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from arviz_stats.base.array import array_stats

from bayesrate.models import convergence
from bayesrate.seeds import rng_from

TAIL_PROB = 0.89


def ar1_chains(rng, chains: int, draws: int, n_par: int, phi: float, offset_sd: float):
    """AR(1) chains (coefficient ``phi``), each shifted by its own N(0, offset_sd) level."""
    noise = rng.standard_normal((chains, draws, n_par))
    x = np.empty_like(noise)
    x[:, 0] = noise[:, 0]
    for t in range(1, draws):
        x[:, t] = phi * x[:, t - 1] + noise[:, t]
    return x + offset_sd * rng.standard_normal((chains, 1, n_par))


def arviz_reference(samples: np.ndarray, prob: float = TAIL_PROB) -> np.ndarray:
    """(3, parameter): rank R-hat, bulk ESS, tail ESS, one parameter at a time."""
    chains = samples.shape[0]
    out = np.full((3, samples.shape[2]), np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k in range(samples.shape[2]):
            x = samples[:, :, k]
            if chains > 1:
                out[0, k] = array_stats.rhat(x, chain_axis=0, draw_axis=1, method="rank")
            out[1, k] = array_stats.ess(x, chain_axis=0, draw_axis=1, method="bulk")
            out[2, k] = array_stats.ess(x, chain_axis=0, draw_axis=1, method="tail", prob=prob)
    return out


@pytest.mark.parametrize("phi", [0.0, 0.5, 0.95, 0.9999, -0.6, -0.999])
@pytest.mark.parametrize(("chains", "draws"), [(4, 200), (2, 101), (3, 33), (4, 4), (1, 60)])
def test_summary_equals_arviz(phi, chains, draws):
    rng = rng_from(f"convergence-{phi}-{chains}-{draws}")
    x = ar1_chains(rng, chains, draws, 12, phi, offset_sd=rng.uniform(0, 3))
    x[..., 0] = 2.5  # constant: ESS is the number of draws, R-hat undefined
    x[..., 1] = np.round(x[..., 1])  # many ties
    x[..., 2] = np.exp(x[..., 2])  # skewed: the folded R-hat differs from the bulk one
    x[0, 0, 3] = np.nan
    got = convergence.summary(x, TAIL_PROB)
    np.testing.assert_allclose(got, arviz_reference(x), rtol=1e-10, atol=0, equal_nan=True)
    assert np.isnan(got[:, 3]).all()


def test_stuck_chains_fail_rhat_and_match_arviz():
    rng = rng_from("convergence-stuck")
    x = ar1_chains(rng, 4, 300, 20, 0.3, offset_sd=0.0)
    x[1] += 3.0  # one chain elsewhere
    got = convergence.summary(x, TAIL_PROB)
    assert (got[0] > 1.3).all()
    np.testing.assert_allclose(got, arviz_reference(x), rtol=1e-10)


def test_public_functions_and_default_tail_prob():
    from arviz_base import rcParams

    x = ar1_chains(rng_from("convergence-public"), 2, 80, 5, 0.7, 0.2)
    ref = arviz_reference(x, float(rcParams["stats.ci_prob"]))
    np.testing.assert_allclose(convergence.rhat_rank(x), ref[0], rtol=1e-10)
    np.testing.assert_allclose(convergence.ess_bulk(x), ref[1], rtol=1e-10)
    np.testing.assert_allclose(convergence.ess_tail(x), ref[2], rtol=1e-10)


def test_blocks_cover_every_parameter(monkeypatch):
    """Parameters spread over several blocks give the values of one block."""
    x = ar1_chains(rng_from("convergence-blocks"), 4, 50, 23, 0.8, 0.5)
    whole = convergence.summary(x)
    monkeypatch.setattr(convergence, "BLOCK_PARAMETERS", 5)
    np.testing.assert_array_equal(convergence.summary(x), whole)


def test_too_few_draws_is_nan():
    x = rng_from("convergence-short").standard_normal((4, 3, 2))
    assert np.isnan(convergence.summary(x)).all()


def test_diagnostics_compute_matches_arviz_on_idata():
    """The fit diagnostics (worst R-hat / ESS and where) equal ArviZ's on an InferenceData."""
    import arviz as az

    from bayesrate.models import diagnostics

    rng = rng_from("convergence-idata")
    a = ar1_chains(rng, 4, 120, 1, 0.9, 0.05)[..., 0]
    b = ar1_chains(rng, 4, 120, 6, 0.5, 0.4).reshape(4, 120, 2, 3)
    idata = az.from_dict({"posterior": {"a": a, "b": b}}, dims={"b": ["row", "col"]})
    diag = diagnostics.compute(idata, ["a", "b"], method="nuts", seconds=1.0)
    posterior = idata["posterior"].to_dataset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rhat = az.rhat(posterior)
        bulk = az.ess(posterior, method="bulk")
        tail = az.ess(posterior, method="tail")
    flat = {name: np.asarray(v).reshape(-1) for name, v in rhat.data_vars.items()}
    worst = max(((v.max(), n, int(v.argmax())) for n, v in flat.items()))
    assert diag.r_hat_max == pytest.approx(float(worst[0]), rel=1e-10)
    expected_name = f"{worst[1]}[{worst[2]}]" if flat[worst[1]].size > 1 else worst[1]
    assert diag.worst_r_hat == expected_name
    bulk_min = min(float(np.min(v)) for v in bulk.data_vars.values())
    tail_min = min(float(np.min(v)) for v in tail.data_vars.values())
    assert diag.ess_bulk_min == pytest.approx(bulk_min, rel=1e-10)
    assert diag.ess_tail_min == pytest.approx(tail_min, rel=1e-10)
