#!/usr/bin/env bash
# Run a command with every compile cache empty: PyTensor's base compile directory (its C
# modules and its numba cache), numba's cache of the package's own kernels, matplotlib's
# config and font cache. The directory is removed when the command ends. TMPDIR points
# inside it too: PyTensor's numba linker leaves a temporary file per compiled function
# (about 10,000 after the test suite), which would otherwise stay in /tmp.
#   bash scripts/cold_caches.sh make test
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: $0 COMMAND [ARGS...]" >&2; exit 2; }
cache=$(mktemp -d "${TMPDIR:-/tmp}/bayesrate-cold-cache.XXXXXX")
trap 'rm -rf "$cache"' EXIT
export PYTENSOR_FLAGS="base_compiledir=$cache/pytensor${PYTENSOR_FLAGS:+,$PYTENSOR_FLAGS}"
export NUMBA_CACHE_DIR="$cache/numba"
export MPLCONFIGDIR="$cache/matplotlib"
# a /tmp of its own: world-writable and sticky, and its parent traversable, so that a
# server the tests run as another user (PostgreSQL, as `postgres` under root) can reach
# the directories made there, as it can in /tmp
chmod 711 "$cache"
mkdir -m 1777 "$cache/tmp"
export TMPDIR="$cache/tmp"
echo "cold caches under $cache" >&2
"$@"
