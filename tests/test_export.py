"""The Gamma view of an exported population (:func:`bayesrate.export.gamma_view`)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate, stats

from bayesrate.export import gamma_view
from bayesrate.priors import NormalMixture, gamma_view_fidelity


def test_gamma_view_puts_its_mass_where_the_population_does():
    """A population like ota-contrib's new domain (log-rate mean −6, sd 2.3 a day): the view
    has the draws' mean and variance of ``log λ`` (quadrature of scipy's ``loggamma``), and
    its mass below ``E[λ]/100`` is the population's to within a few points (the rate-moment
    Gamma put ~60% there against ~2%). Its stated fidelity is quadrature's."""
    rng = np.random.default_rng(3)
    loc = rng.normal(-6.0, 0.3, 1000)
    scale = np.abs(rng.normal(2.3, 0.1, 1000))
    gamma, match = gamma_view(loc, scale)
    assert match == "log-rate moments"
    view = stats.loggamma(gamma.alpha, loc=-np.log(gamma.beta))
    lo, hi = view.ppf(1e-14), view.isf(1e-14)
    mode = np.log(gamma.alpha / gamma.beta)

    def moment(k):
        f = lambda u: u**k * view.pdf(u)  # noqa: E731
        return sum(integrate.quad(f, a, b, limit=500, epsrel=1e-12)[0]
                   for a, b in ((lo, mode), (mode, hi)))  # fmt: skip

    mean, second = moment(1), moment(2)
    assert mean == pytest.approx(loc.mean(), rel=1e-7)
    assert second - mean**2 == pytest.approx(loc.var() + np.mean(scale**2), rel=1e-6)
    # the population's P(λ < E[λ] / 100) straight from the draws' log-normals
    mean_rate = np.exp(loc + scale**2 / 2).mean()
    below_pop = stats.norm.cdf((np.log(mean_rate / 100) - loc) / scale).mean()
    below_gamma = stats.gamma.cdf(mean_rate / 100, gamma.alpha, scale=1 / gamma.beta)
    assert below_gamma == pytest.approx(below_pop, abs=0.06)
    # the rate-moment Gamma of the same draws (what was exported before) is far off
    var_rate = np.exp(2 * loc + 2 * scale**2).mean() - mean_rate**2
    alpha_rate = mean_rate**2 / var_rate
    assert stats.gamma.cdf(mean_rate / 100, alpha_rate, scale=var_rate / mean_rate) > 0.5
    # the stated fidelity is the divergence from the draws' own mixture, by quadrature
    mixture = NormalMixture.from_draws(loc, scale)
    fid = gamma_view_fidelity(mixture, gamma)

    def kl_from(other):
        def integrand(u):
            log_p = mixture.log_density(np.array([u]))[0]
            return np.exp(log_p) * (log_p - other.logpdf(u))

        centre, spread = loc.mean(), np.sqrt(loc.var() + np.mean(scale**2))
        return integrate.quad(integrand, centre - 12 * spread, centre + 12 * spread,
                              limit=500)[0]  # fmt: skip

    kl = kl_from(view)
    assert fid["kl_population_to_gamma"] == pytest.approx(kl, rel=1e-5)
    # a Normal log-rate of sd 2.3 has an upper tail no Gamma has: about a nat is honest, and
    # far below the rate-moment Gamma's divergence
    rate_view = stats.loggamma(alpha_rate, loc=-np.log(mean_rate / var_rate))
    assert kl < 0.5 * kl_from(rate_view)  # 1.19 against 3.53 nats
