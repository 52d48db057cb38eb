#!/usr/bin/env bash
# Stop the local single-node Slurm cluster started by slurm/cluster-up.sh: cancel the caller's jobs, then
# SIGTERM each daemon by the PID in its PID file (SIGKILL after 10 s). Safe to run when nothing is up.
set -u
scancel --user="$(id -un)" 2>/dev/null || true

stop_pidfile() {  # $1: a daemon's PID file
  local pidfile=$1 pid
  [ -s "$pidfile" ] || return 0
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "escalating to SIGKILL for $pidfile (pid $pid)" >&2
      kill -KILL "$pid"
    fi
  fi
  rm -f "$pidfile"
}

stop_pidfile /run/slurmd.pid
stop_pidfile /run/slurmctld.pid
stop_pidfile /run/munge/munged.pid
echo "local slurm cluster stopped"
