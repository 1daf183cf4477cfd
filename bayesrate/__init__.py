"""bayesrate: Bayesian change-rate models for interval-censored crawl observations.

Importing the package is cheap: PyMC, PyTensor and ArviZ are imported only by the
modules that fit models (``bayesrate.models``, ``bayesrate.checks``).
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("bayesrate")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
