"""Names and units shared by every module.

Time is measured in **hours** everywhere inside the package; rates are changes per hour
internally and converted to changes per day only at the edges (CLI tables, prior artifacts).
Absolute times are hours since the Unix epoch (1970-01-01T00:00Z).
"""

from typing import Final

# --- canonical observation table columns -------------------------------------------------
PAGE: Final = "page"
DOMAIN: Final = "domain"
TIME: Final = "time"
CHANGED: Final = "changed"

# --- units ---------------------------------------------------------------------------------
HOURS_PER_DAY: Final = 24.0
HOURS_PER_WEEK: Final = 168.0
#: Numeric time units accepted by the table builders, as hours per unit.
TIME_UNITS: Final = {
    "s": 1.0 / 3600.0,
    "seconds": 1.0 / 3600.0,
    "min": 1.0 / 60.0,
    "minutes": 1.0 / 60.0,
    "h": 1.0,
    "hours": 1.0,
    "d": 24.0,
    "days": 24.0,
    "w": 168.0,
    "weeks": 168.0,
}
DEFAULT_TIME_UNIT: Final = "h"

# --- hour-of-week buckets ------------------------------------------------------------------
N_HOURS_OF_DAY: Final = 24
N_HOUR_OF_WEEK: Final = 168
#: Bucket 0 is Monday 00:00-01:00 in the clock's time zone. The Unix epoch was a Thursday,
#: so local hour h since the epoch falls in bucket (h + EPOCH_HOUR_OF_WEEK) mod 168.
EPOCH_HOUR_OF_WEEK: Final = 72
DAY_NAMES: Final = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")

# --- model dimension names (fixed, CausalPy style) -------------------------------------------
DIM_PAGE: Final = "page"
DIM_DOMAIN: Final = "domain"
#: domains a prediction meets that the fit did not (their means come from the global level)
DIM_NEW_DOMAIN: Final = "new_domain"
#: a page's intervals of one exposure (bayesrate.models.groups)
DIM_GROUP: Final = "interval_group"
DIM_PATTERN: Final = "overlap_pattern"
DIM_HOUR_OF_DAY: Final = "hour_of_day"
DIM_DAY_OF_WEEK: Final = "day_of_week"
DIM_HOUR_OF_WEEK: Final = "hour_of_week"
#: spans of the shocks model's shared effects (the research package's epochs), labelled by start
DIM_EPOCH: Final = "epoch"
#: epochs a prediction reaches after the fitted data (their shocks are drawn afresh)
DIM_FUTURE_EPOCH: Final = "future_epoch"

# --- convergence gates ---------------------------------------------------------------------
R_HAT_MAX: Final = 1.01
ESS_MIN: Final = 400
MAX_DIVERGENCES: Final = 0

# --- datasets ------------------------------------------------------------------------------
DEFAULT_DATASET: Final = "ota-contrib"


#: the posterior predictive statistics of the population a new page's prior speaks to,
#: judged on the *mixed* replication (fresh page rates from the fitted population,
#: ``bayesrate.checks.ppc``): an exported model's gates (``RateModel.export_gates``)
POPULATION_GATES: Final = (
    "mean_changes",
    "sd_log_changes",
    "frac_never_changed",
    "frac_changed_every_visit",
)
