#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the tests of the scheduler's PostgreSQL store.
#
#   bash scripts/postgres_for_tests.sh CMD ARGS...   start a cluster, export its DSN as
#                                                    BAYESRATE_TEST_POSTGRES, run CMD, then
#                                                    stop the cluster and remove it
#   bash scripts/postgres_for_tests.sh start DIR     initdb + start a cluster in DIR (empty or
#                                                    missing); print its DSN
#   bash scripts/postgres_for_tests.sh stop DIR      stop it (fast shutdown) and remove DIR
#   bash scripts/postgres_for_tests.sh kill DIR      stop it as a crash would (immediate mode)
#   bash scripts/postgres_for_tests.sh restart DIR   start a stopped cluster again (same port)
#
# Debian's server binaries (/usr/lib/postgresql/*/bin, package `postgresql`) are installed
# with apt-get when missing and we are root. The cluster runs as an unprivileged user (the
# `postgres` account when run as root, else the caller), listens on 127.0.0.1 only, on a
# free port, with its socket in DIR; authentication is `trust` (loopback, throwaway data).
# The tests (tests/scheduler/conftest.py) use the same `start`/`stop`/`kill`/`restart`.
set -euo pipefail

find_bin() {
    local dir
    for dir in /usr/lib/postgresql/*/bin; do
        [ -x "$dir/initdb" ] && { echo "$dir"; return 0; }
    done
    return 1
}

pg_bin() {
    local bin
    if bin=$(find_bin); then echo "$bin"; return 0; fi
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "postgres_for_tests: installing Debian's postgresql package" >&2
        apt-get update -qq >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
        find_bin && return 0
    fi
    echo "postgres_for_tests: no PostgreSQL server binaries (apt-get install postgresql)" >&2
    return 1
}

# run a command as the cluster's owner: `postgres` when we are root, else ourselves
as_owner() {
    if [ "$(id -u)" = 0 ]; then
        id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start() {
    local dir=$1 bin port
    bin=$(pg_bin)
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && { id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres; chown postgres "$dir"; }
    chmod 700 "$dir"
    as_owner "$bin/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --no-instructions >"$dir/initdb.log" 2>&1 ||
        { cat "$dir/initdb.log" >&2; return 1; }
    port=$(free_port)
    echo "$port" > "$dir/port"
    echo "$bin" > "$dir/bin"
    launch "$dir"
    as_owner "$bin/createdb" -h 127.0.0.1 -p "$port" -U postgres bayesrate_test
    echo "postgresql://postgres@127.0.0.1:$port/bayesrate_test"
}

launch() {
    local dir=$1 bin port
    bin=$(cat "$dir/bin"); port=$(cat "$dir/port")
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=200" start >/dev/null ||
        { cat "$dir/server.log" >&2; return 1; }
}

stop() {
    local dir=$1 mode=${2:-fast}
    if [ -f "$dir/bin" ] && [ -f "$dir/data/postmaster.pid" ]; then
        as_owner "$(cat "$dir/bin")/pg_ctl" -D "$dir/data" -m "$mode" -w stop >/dev/null || true
    fi
}

case "${1:-}" in
    start) start "$2" ;;
    stop) stop "$2" fast; rm -rf "$2" ;;
    kill) stop "$2" immediate ;;
    restart) launch "$2" ;;
    "") echo "usage: $0 CMD ARGS... | start DIR | stop DIR | kill DIR | restart DIR" >&2; exit 2 ;;
    *)
        dir=$(mktemp -d "${TMPDIR:-/tmp}/bayesrate-pg.XXXXXX")
        trap 'stop "$dir" fast; rm -rf "$dir"' EXIT
        BAYESRATE_TEST_POSTGRES=$(start "$dir")
        export BAYESRATE_TEST_POSTGRES
        echo "postgres_for_tests: $BAYESRATE_TEST_POSTGRES" >&2
        "$@"
        ;;
esac
