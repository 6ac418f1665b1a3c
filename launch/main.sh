#!/usr/bin/env bash
# The README's main command: creates/reuses .venv, builds the embedded synthetic
# MoviePuzzle corpus if needed, trains the multimodal pairwise-order model and
# evaluates it on both test splits. Extra args go to vnr.train
# (e.g. --config.total_steps=100).
source "$(dirname "$0")/venv.sh"
exec python -m vnr.train --config configs/moviepuzzle/main.py --workdir "${WORKDIR:-workdirs/main}" "$@"
