"""``bayesrate fit``: fit a PyMC model and write the result, a page table and diagnostics.

Outputs in ``--out``: ``fit.nc`` (the self-describing fitted result, see ``docs/models.md``,
"The fitted result": posterior, observed data, PyMC's pointwise log-likelihood and posterior
predictive draws on up to ``--predictive-draws`` draws, and the data it was fitted to, so
that ``RateModel.load`` needs nothing else), ``pages.csv`` (page, domain, rate_per_day,
lower_per_day, upper_per_day, n_visits, n_changes; rates per day, 90% interval) and
``diagnostics.json`` (r_hat_max, ess_bulk_min, ess_tail_min, divergences, seconds,
converged, ...).
PyMC is imported inside the handler only.
"""

from __future__ import annotations

import argparse
import json
import shutil

from bayesrate.commands.common import (
    add_input_options,
    add_quiet_option,
    check_output_dir,
    load_observations,
    model_name,
    non_negative_int,
    positive_int,
    progress_for,
)


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "fit",
        help="fit a Bayesian change-rate model (PyMC) and write per-page posteriors",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_input_options(parser)
    from bayesrate.models import model_names

    parser.add_argument(
        "--model",
        type=model_name,
        default="hierarchical",
        metavar="MODEL",
        help=f"one of {', '.join(model_names())} (default hierarchical; the research models "
        "with `pip install -e research`)",
    )
    parser.add_argument("--method", choices=("nuts", "advi", "pathfinder"), default="nuts")
    parser.add_argument(
        "--draws",
        type=positive_int,
        help="posterior draws per chain (default 1000; modulated 2500)",
    )
    parser.add_argument(
        "--tune",
        type=non_negative_int,
        help="warm-up draws per chain (default 300; modulated 1000)",
    )
    parser.add_argument("--chains", type=positive_int, help="chains (default 4)")
    parser.add_argument("--seed", help="seed (int or string; default 0)")
    parser.add_argument(
        "--no-more-draws",
        action="store_true",
        help="no second run with twice the draws when R-hat or ESS barely misses its gate",
    )
    parser.add_argument(
        "--timezone", help="clock of the hour-of-week effects (modulated model; default UTC)"
    )
    parser.add_argument("--config", metavar="JSON", help="model_config overrides as a JSON object")
    parser.add_argument(
        "--predictive-draws",
        type=non_negative_int,
        default=1000,
        help="posterior draws (thinned evenly) for the saved log-likelihood and posterior "
        "predictive groups; 0 leaves both out (default 1000)",
    )
    parser.add_argument(
        "--progress", action="store_true", help="show nutpie's own progress bar (a terminal)"
    )
    add_quiet_option(parser)
    parser.add_argument("--out", required=True, help="output directory")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import warnings

    from bayesrate.atomic import atomic_path
    from bayesrate.errors import ObservationError
    from bayesrate.models import ConvergenceWarning, get_model

    # validate everything before any work
    progress = progress_for(args)
    out = check_output_dir(args.out)
    config = parse_config(args.config)
    if args.timezone:
        if args.model != "modulated":
            raise ObservationError("--timezone applies to --model modulated only", field="timezone")
        config["timezone"] = args.timezone
    sampler = {
        key: value
        for key, value in (
            ("draws", args.draws),
            ("tune", args.tune),
            ("chains", args.chains),
            ("seed", _seed(args.seed)),
            ("more_draws", False if args.no_more_draws else None),
        )
        if value is not None
    }
    try:
        model = get_model(args.model)(config, sampler)
    except ObservationError:
        raise
    except (ValueError, TypeError) as exc:
        raise ObservationError(f"--config: {exc}", field="config") from exc
    obs = load_observations(args)
    progress(f"loaded {obs.n_pages} pages, {obs.n_visits} visits, {obs.n_changes} changes")
    progress(f"fitting {args.model} by {args.method} ...")
    with warnings.catch_warnings():
        warnings.simplefilter("always", ConvergenceWarning)
        model.fit(obs, method=args.method, progressbar=args.progress, progress=progress)
    if args.predictive_draws > 0 and not model.observed_groups:
        progress(f"{args.model}: no pointwise log-likelihood or posterior predictive draws")
    elif args.predictive_draws > 0:
        progress(f"log-likelihood and posterior predictive on {args.predictive_draws} draws ...")
        model.compute_log_likelihood(max_draws=args.predictive_draws)
        model.sample_posterior_predictive(
            max_draws=args.predictive_draws, seed=model.sampler_config["seed"]
        )
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    diag = model.diagnostics_.to_dict()
    diag.update(
        model=args.model,
        data_fingerprint=obs.fingerprint,
        config_hash=model.config_hash,
        source=obs.source,
    )
    # every output is written to a temporary name; all three are renamed into place only
    # when all three are complete (a full disk leaves the old set, or no directory)
    try:
        with (
            atomic_path(out / "fit.nc") as fit_tmp,
            atomic_path(out / "pages.csv") as pages_tmp,
            atomic_path(out / "diagnostics.json") as diag_tmp,
        ):
            model.save(fit_tmp)
            model.page_summary_.to_csv(pages_tmp, index=False)
            diag_tmp.write_text(json.dumps(diag, indent=2, default=str) + "\n")
    except BaseException:
        if created:
            shutil.rmtree(out, ignore_errors=True)
        raise
    d = model.diagnostics_
    progress(
        f"{'converged' if d.converged else 'NOT CONVERGED'}: r_hat_max={d.r_hat_max:.4f} "
        f"ess_bulk_min={d.ess_bulk_min:.0f} divergences={d.divergences} "
        f"seconds={d.seconds:.1f}; wrote {out}/fit.nc, pages.csv, diagnostics.json"
    )
    return 0 if d.converged else 3


def parse_config(text: str | None) -> dict:
    """``--config``: a JSON object of model_config overrides (ObservationError otherwise)."""
    from bayesrate.errors import ObservationError

    if not text:
        return {}
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ObservationError(f"--config is not valid JSON: {exc}", field="config") from exc
    if not isinstance(config, dict):
        raise ObservationError(
            f"--config must be a JSON object, got {type(config).__name__}", field="config"
        )
    return config


def _seed(value: str | None) -> int | str | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return value
