#!/usr/bin/env bash
# Several training processes on this machine talking over 127.0.0.1: the CPU
# loopback stand-in for a multi-host pod (gloo collectives), for testing the
# multi-host path without a cluster.
#
#   bash launch/local_multiprocess.sh configs/moviepuzzle/main.py:smoke /tmp/mh [--config.key=value ...]
#
# Variables (environment, all optional):
#   NUM_PROCESSES     processes to start (default 2)
#   DEVICES_PER_PROC  simulated CPU devices per process (default 4; the mesh spans
#                     NUM_PROCESSES * DEVICES_PER_PROC devices)
#   PORT              coordinator port on 127.0.0.1 (default 12355)
#   HEARTBEAT         seconds before a silent process counts as dead (default 30)
#   LOG_DIR           where proc<i>.log go (default <workdir>/logs)
# Process 0 prints the progress and writes logs/reports; every process writes its
# checkpoint shards. Ctrl-C or SIGTERM to this script is forwarded to every process
# (they save a checkpoint at the next step and exit 0; rerun the same command to
# resume). If one process dies the others stop with an error; the script exits
# with the first non-zero code.
set -euo pipefail
if [[ $# -lt 2 ]]; then
  echo "usage: $0 CONFIG WORKDIR [trainer flags...]" >&2
  exit 2
fi
CONFIG=$1; WORKDIR=$2; shift 2
NUM_PROCESSES=${NUM_PROCESSES:-2}
DEVICES_PER_PROC=${DEVICES_PER_PROC:-4}
PORT=${PORT:-12355}
HEARTBEAT=${HEARTBEAT:-30}
LOG_DIR=${LOG_DIR:-$WORKDIR/logs}
cd "$(dirname "$0")/.."
[[ -f .venv/bin/activate ]] && source .venv/bin/activate
mkdir -p "$LOG_DIR"
export JAX_PLATFORMS=cpu
export XLA_FLAGS="${XLA_FLAGS:-} --xla_force_host_platform_device_count=$DEVICES_PER_PROC"
pids=()
for ((i = 0; i < NUM_PROCESSES; i++)); do
  python -m vnr.train --config "$CONFIG" --workdir "$WORKDIR" \
    --coordinator_address "127.0.0.1:$PORT" --num_processes "$NUM_PROCESSES" \
    --process_id "$i" --heartbeat_timeout "$HEARTBEAT" "$@" \
    > >(if [[ $i == 0 ]]; then tee "$LOG_DIR/proc$i.log"; else cat > "$LOG_DIR/proc$i.log"; fi) 2>&1 &
  pids+=($!)
done
trap 'kill -TERM "${pids[@]}" 2>/dev/null || true' TERM INT
status=0
for pid in "${pids[@]}"; do
  wait "$pid" || { code=$?; [[ $status == 0 ]] && status=$code; }
done
exit $status
