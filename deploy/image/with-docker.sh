#!/usr/bin/env bash
# Runs a command with a Docker daemon answering: the one already running, or one started here
# (and stopped afterwards) as this machine allows it: no bridge network, no iptables rules, so
# containers run with --network host only. Installs Debian's docker.io and debootstrap if absent.
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: with-docker.sh COMMAND..." >&2; exit 2; }

need=()
command -v dockerd >/dev/null || need+=(docker.io)
command -v debootstrap >/dev/null || need+=(debootstrap)
if [ ${#need[@]} -gt 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

started=""
stop_daemon() {
    if [ -n "$started" ]; then
        kill -TERM "$started" 2>/dev/null || true
        for _ in $(seq 1 100); do kill -0 "$started" 2>/dev/null || break; sleep 0.2; done
    fi
}
if ! docker info >/dev/null 2>&1; then
    log=$(mktemp /tmp/sluicegate-dockerd.XXXXXX.log)
    nice -n 10 dockerd --bridge=none --iptables=false --ip6tables=false >"$log" 2>&1 &
    started=$!
    trap stop_daemon EXIT
    for _ in $(seq 1 150); do
        docker info >/dev/null 2>&1 && break
        kill -0 "$started" 2>/dev/null || { tail -20 "$log" >&2; exit 1; }
        sleep 0.2
    done
    docker info >/dev/null 2>&1 || { echo "with-docker.sh: dockerd did not answer" >&2; exit 1; }
fi
"$@"
