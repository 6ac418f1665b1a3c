#!/usr/bin/env bash
# Train on a Cloud TPU pod slice: the same command on every TPU VM worker
# (gcloud ... tpu-vm ssh --worker=all). JAX finds the other workers itself
# (--multihost=on: jax.distributed.initialize() with TPU auto-detection).
#
#   TPU_NAME=my-v4-32 ZONE=us-central2-b bash launch/tpu_pod.sh \
#       configs/moviepuzzle/main.py /mnt/shared/runs/mp_main [--config.key=value ...]
#
# Variables (environment):
#   TPU_NAME     the TPU VM (pod slice) name                       (required)
#   ZONE         its zone                                          (required)
#   PROJECT      GCP project (default: gcloud's configured project)
#   REPO_DIR     this repository on every worker (default ~/vnr; clone it and run
#                `bash launch/venv.sh` once with --worker=all, plus `pip install
#                jax[tpu]` matching requirements.txt's jax)
#   DATA_DIR     the built TFDS directory as seen from every worker (default
#                data/tfds inside REPO_DIR). Either a shared mount (Filestore/NFS,
#                gcsfuse) or a per-worker copy at the same path; process 0 builds
#                first, the others wait, so a shared dir is built once.
#   MANUAL_DIR   raw data for builders that need it (optional, same rule)
#   INIT_TIMEOUT seconds to wait for all workers to join (default 600)
# WORKDIR (2nd argument) must be one directory every worker sees (shared mount):
# all workers write their checkpoint shards there; only worker 0 writes logs,
# reports and results.json. A preempted/maintained slice sends SIGTERM: every
# worker saves at the next step and exits 0; rerun the same command to resume.
set -euo pipefail
if [[ $# -lt 2 ]]; then
  echo "usage: TPU_NAME=... ZONE=... $0 CONFIG WORKDIR [trainer flags...]" >&2
  exit 2
fi
: "${TPU_NAME:?set TPU_NAME}" "${ZONE:?set ZONE}"
CONFIG=$1; WORKDIR=$2; shift 2
REPO_DIR=${REPO_DIR:-'~/vnr'}
DATA_DIR=${DATA_DIR:-data/tfds}
INIT_TIMEOUT=${INIT_TIMEOUT:-600}
extra=""
for a in "$@"; do extra+=" $(printf '%q' "$a")"; done
manual=""
[[ -n "${MANUAL_DIR:-}" ]] && manual="--config.data.manual_dir=$(printf '%q' "$MANUAL_DIR")"
remote="cd $REPO_DIR && source .venv/bin/activate && \
python -m vnr.train --config $(printf '%q' "$CONFIG") --workdir $(printf '%q' "$WORKDIR") \
--config.data.data_dir=$(printf '%q' "$DATA_DIR") $manual --multihost=on \
--init_timeout=$INIT_TIMEOUT$extra"
exec gcloud compute tpus tpu-vm ssh "$TPU_NAME" --zone "$ZONE" \
  ${PROJECT:+--project "$PROJECT"} --worker=all --command "$remote"
