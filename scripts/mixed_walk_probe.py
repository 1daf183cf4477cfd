"""What-if mixed replications of a fitted ``dynamic`` model: which walk of new pages would
pass the population checks?

The mixed replication (:func:`bayesrate.checks.ppc.ppc_for`) draws every page as a new page
of its domain and walks its log-rate from epoch to epoch. This script replaces that walk,
keeping the fitted population (``mu_domain``, ``sigma_walk``, ``sigma_page``) and the
visit times, and prints the population checks for each alternative:

- ``scale`` ``F``: every new page walks with ``F ×`` its domain's fitted walk size;
- ``two-class`` ``SHARE,BIG,SMALL``: a share of the new pages walks with ``BIG ×``, the rest
  with ``SMALL ×`` (walk sizes per page from a population with most pages near zero);
- ``stationary`` ``S_PAGE,S,PHI,SHIFT``: no walk; ``x = theta + delta − S²/2 + SHIFT`` with
  ``theta ~ Normal(mu_domain, S_PAGE)`` and ``delta`` a stationary AR(1) around the page's
  own level (SD ``S``, lag-one correlation ``PHI`` per epoch of the model passed with
  ``--epoch-days``). Hand-set values: a probe of the family, not a fit.

::

    .venv/bin/bayesrate fit --dataset ota-contrib --model dynamic \\
        --config '{"epoch_days": 365, "path_integral": "laplace"}' --out fits/dyn
    .venv/bin/python scripts/mixed_walk_probe.py fits/dyn/fit.nc scale 1 0.5 0.25 0
    .venv/bin/python scripts/mixed_walk_probe.py fits/dyn/fit.nc two-class 0.2,2,0.1
    .venv/bin/python scripts/mixed_walk_probe.py fits/dyn/fit.nc --epoch-days 90 \\
        stationary 0.9,1.5,0.8,0.6
"""

from __future__ import annotations

import argparse
import types

import numpy as np

STATISTICS = ["mean_changes", "sd_changes", "sd_log_changes", "frac_never_changed", "gap_cv"]
#: the walk sizes a scaled walk multiplies (a fitted domain's, and a new domain's)
SCALED = ("sigma_walk", "sigma_walk_global")


def _domain_codes(model, observations):
    """Each page's fitted-domain code and the number of fitted domains (the model's own
    coding, kept across draws)."""
    n_fitted, n_new, code = model._domain_codes(observations)
    if n_new:
        raise SystemExit("the probe replicates the fitted pages only")
    return code, n_fitted


def walk_classes(share: float, big: float, small: float):
    """New pages' log-rates by the model's own new-page walk (its
    ``_new_page_log_rates``) with every walk size scaled: by ``big`` for a ``share`` of
    the pages, by ``small`` for the others (each class's paths drawn for every page, each
    page taking its class's)."""

    def log_rates(self, draws, i, observations, page, column, rng):
        own = type(self)._new_page_log_rates

        def scaled(factor: float) -> np.ndarray:
            walks = {name: factor * draws[name] + 1e-9 for name in SCALED}
            return own(self, {**draws, **walks}, i, observations, page, column, rng)

        if share == 0.0:
            return scaled(small)
        walks_big = rng.random(observations.n_pages) < share
        return np.where(walks_big[page], scaled(big), scaled(small))

    return log_rates


def stationary(s_page: float, s: float, phi: float, shift: float):
    """New pages' log-rates fluctuating around their own level (module docstring)."""
    from bayesrate.models.dynamic import column_span

    def log_rates(self, draws, i, observations, page, column, rng):
        code, _ = _domain_codes(self, observations)
        col, n_cols, _, _ = column_span(observations.n_pages, page, column)
        n = observations.n_pages
        theta = draws["mu_domain"][i][code] + s_page * rng.standard_normal(n)
        delta = np.empty((n, n_cols))
        delta[:, 0] = s * rng.standard_normal(n)
        for c in range(1, n_cols):
            innovation = s * np.sqrt(1.0 - phi * phi) * rng.standard_normal(n)
            delta[:, c] = phi * delta[:, c - 1] + innovation
        return (theta[:, None] + delta - s * s / 2 + shift)[page, col]

    return log_rates


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("fit", help="a dynamic model's fit saved by 'bayesrate fit'")
    parser.add_argument("--epoch-days", type=float, help="the probe's epochs (stationary)")
    parser.add_argument("--draws", type=int, default=200)
    parser.add_argument("--seed", default="bayesrate-calibrate-ppc-dynamic-mixed")
    parser.add_argument("kind", choices=["scale", "two-class", "stationary"])
    parser.add_argument("values", nargs="+", help="one probe per value (see above)")
    args = parser.parse_args(argv)

    from bayesrate.checks.ppc import posterior_predictive_checks, replicate
    from bayesrate.models import get_model
    from bayesrate.models.base import RateModel

    model = RateModel.load(args.fit)
    obs = model.data_
    if args.epoch_days is not None:
        fitted = model
        config = {**fitted.model_config, "epoch_days": args.epoch_days}
        model = get_model("dynamic")(model_config=config)
        model.idata_, model.data_ = fitted.idata_, fitted.data_
    for value in args.values:
        numbers = [float(v) for v in value.split(",")]
        if args.kind == "scale":
            what_if = walk_classes(0.0, numbers[0], numbers[0])
        elif args.kind == "two-class":
            what_if = walk_classes(*numbers)
        else:
            what_if = stationary(*numbers)
        model._new_page_log_rates = types.MethodType(what_if, model)
        reps = replicate(model, obs, "population", args.draws, seed=args.seed)
        table = posterior_predictive_checks(obs, reps, seed=args.seed).table()
        table = table.set_index("statistic").loc[STATISTICS]
        cells = [
            f"{name} {row.replicated_mean:.3f} (obs {row.observed:.3f}, p {row.p_value:.3f})"
            for name, row in table.iterrows()
        ]
        print(f"{args.kind} {value}: " + "; ".join(cells), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
