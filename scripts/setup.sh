#!/usr/bin/env bash
# Create .venv with Python >= 3.12 and install bayesrate with its dev extras.
# Idempotent: reinstalls only when pyproject.toml changed since the last run.
set -euo pipefail
cd "$(dirname "$0")/.."

find_python() {
    local cand
    for cand in python3.13 python3.12 "$(pyenv which python3 2>/dev/null || true)" python3; do
        [ -n "$cand" ] || continue
        command -v "$cand" >/dev/null 2>&1 || continue
        if "$cand" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
            command -v "$cand"; return 0
        fi
    done
    for cand in "$HOME"/.pyenv/versions/3.1[2-9]*/bin/python3; do
        [ -x "$cand" ] && { echo "$cand"; return 0; }
    done
    return 1
}

if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c 'import sys; sys.exit(sys.version_info < (3, 12))'; then
    py=$(find_python) || { echo "setup: no Python >= 3.12 found (pyenv: 'pyenv install 3.12')" >&2; exit 1; }
    echo "setup: creating .venv with $py ($("$py" --version))"
    rm -rf .venv
    "$py" -m venv .venv
fi

stamp=.venv/.setup-stamp
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "setup: installing bayesrate and its dependencies into .venv"
    .venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
    .venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[dev,notebooks,dask]"
    echo "$want" > "$stamp"
fi
