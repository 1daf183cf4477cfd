"""The modulated model's quiet exposure: span minus busy groups against the pages × 168
product, in one process on the same data (log-density + gradient, BLAS single-threaded).

Usage::

    .venv/bin/python benchmarks/bench_quiet_span.py [--rounds 100]

Data: the forecast study's training crawl of the embedded ``tldr-pages`` history (daily
visits at a random phase per page until 180 days before the end: 6,907 pages) and the
case-study-shaped ``pages_like(300)``. Prints per-call median and minimum of each form, their
ratio, the form :meth:`ModulatedModel._quiet_span` chooses, and the largest difference of
the log-density and gradient between the two forms.
"""

from __future__ import annotations

import argparse
import warnings
from functools import partial

import numpy as np
from gradient_timing import interleaved_ms, logp_dlogp_at


def _function(obs, dense: bool):
    from bayesrate.models import ModulatedModel

    model = ModulatedModel()
    chooses_span = model._quiet_span(obs, _busy(obs)) is not None
    if dense:
        model._quiet_span = lambda data, busy: None
    else:
        from bayesrate.models.likelihood import QuietSpan

        model._quiet_span = lambda data, busy: QuietSpan.of(data, "UTC", busy)
    f, x0 = logp_dlogp_at(model.build_model(obs))
    return f, x0, chooses_span


def _busy(obs):
    from bayesrate.models.groups import visit_patterns

    groups = visit_patterns(obs, "UTC").groups("hour_of_week")
    return groups.select(groups.detected > 0)


def _datasets():
    from bayesrate.datasets import load_history
    from bayesrate.simulate import pages_like
    from bayesrate.studies.forecast import design

    history = load_history("tldr-pages")
    horizon = 180 * 24.0
    tldr = design(
        history,
        crawl_every_hours=24.0,
        split=history.end - horizon,
        horizon_hours=horizon,
        seed="bayesrate-forecast",
    ).train
    case_study = pages_like(300, seed="bench-models", history="case-study").observations
    return {"tldr-pages daily": tldr, "pages_like(300)": case_study}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=100)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    for name, obs in _datasets().items():
        dense_f, x0, chooses_span = _function(obs, dense=True)
        span_f, _, _ = _function(obs, dense=False)
        a, b = dense_f(x0), span_f(x0)
        ms = interleaved_ms(
            {"dense": partial(dense_f, x0), "span": partial(span_f, x0)}, args.rounds
        )
        med = {k: v[0] for k, v in ms.items()}
        low = {k: v[1] for k, v in ms.items()}
        print(
            f"{name}: {obs.n_pages:,} pages, {_busy(obs).n_groups:,} busy groups; logp+grad "
            f"median dense {med['dense']:.3f} ms, span {med['span']:.3f} ms "
            f"(span/dense x{med['span'] / med['dense']:.3f}); min {low['dense']:.3f} / "
            f"{low['span']:.3f} ms (x{low['span'] / low['dense']:.3f}); model chooses "
            f"{'span' if chooses_span else 'dense'}; |Δlogp| {abs(a[0] - b[0]):.2e}, "
            f"max |Δgrad| {np.abs(a[1] - b[1]).max():.2e}",
            flush=True,
        )


if __name__ == "__main__":
    main()
