#!/usr/bin/env bash
# Run a command with every compile cache empty: PyTensor's base compile directory (its C
# modules and its numba cache), numba's cache of the package's own kernels, matplotlib's
# config and font cache. The directory is removed when the command ends.
#   bash scripts/cold_caches.sh make test
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: $0 COMMAND [ARGS...]" >&2; exit 2; }
cache=$(mktemp -d "${TMPDIR:-/tmp}/bayesrate-cold-cache.XXXXXX")
trap 'rm -rf "$cache"' EXIT
export PYTENSOR_FLAGS="base_compiledir=$cache/pytensor${PYTENSOR_FLAGS:+,$PYTENSOR_FLAGS}"
export NUMBA_CACHE_DIR="$cache/numba"
export MPLCONFIGDIR="$cache/matplotlib"
echo "cold caches under $cache" >&2
"$@"
