"""Scale-out on Dask: crawl logs larger than one machine → statistics → per-URL outputs.

Four stages, each a ``bayesrate scale`` subcommand (``docs/scale.md``):

1. :mod:`~bayesrate.scaleout.aggregate` — read a crawl log or fetch log lazily
   (:mod:`~bayesrate.scaleout.logs`: Parquet or CSV files, partitioned by time or by host),
   co-partition it by URL hash or by host (the one shuffle), and reduce each partition to per-URL
   interval statistics and per-(domain, hour-of-week) exposure. Malformed rows are counted
   and sampled (:mod:`~bayesrate.scaleout.problems`), never dropped silently.
2. :mod:`~bayesrate.scaleout.fit` — the hierarchy on a stratified (bottom-k by URL hash)
   sample of pages, exported as a ``priors.json`` artifact.
3. :mod:`~bayesrate.scaleout.posteriors` — every URL's exact 1-D posterior under its
   domain's prior, and the scheduler state that the artifact implies.
4. :mod:`~bayesrate.scaleout.rates` — budgeted optimal revisit rates, the Lagrange
   multipliers found by bisection over partition sums.

Every stage writes Parquet through :mod:`~bayesrate.scaleout.staging` (parts committed
one by one into a staging directory, the whole output committed by rename) in the layout
of :mod:`~bayesrate.scaleout.layout`: by host (``host=H/`` directories, whole hosts per
part) for a log partitioned by host, by URL hash otherwise (a URL's rows are spread over
a time-partitioned log's partitions); later stages keep the layout. A killed run rerun
with the same arguments neither duplicates nor loses output.
:mod:`~bayesrate.scaleout.cluster` connects to a Dask scheduler or starts a local cluster.
"""
