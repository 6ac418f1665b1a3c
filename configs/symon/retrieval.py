"""SYMON bidirectional retrieval (§7.1, Eq. 5-6) with long-term memory.

    python -m vnr.train --config configs/symon/retrieval.py[:ARGS] --workdir DIR

ARGS (comma-separated): no_memory (drop the Eq. 6 memory inputs); smoke (tiny sizes for
tests). The NCE loss runs over the whole global batch (sharded over the "data" axis).
Defaults use the generated `synthetic` corpus; for real features pass
--config.data.config=features --config.data.manual_dir=DIR.
"""

import ml_collections

from configs import common
from configs.symon.base import base


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    args = common.parse_arg(arg, __file__, ("no_memory", "smoke"))
    c = base("symon.retrieval", "smoke" in args)
    # Frames per segment (sampled uniformly if longer); the long-term memory of Eq. 6 over
    # the previous memory_window sentences.
    c.data.update(max_frames=8 if "smoke" in args else 16, memory="no_memory" not in args,
                  memory_window=10)
    c.model.embed_dim = 64 if "smoke" not in args else 32
    c.temperature = 1.0  # the paper's plain dot product
    c.memory_mask_rate = 0.6  # 60% of the memory's tokens masked in training
    c.best_metric = "" if "smoke" in args else "v2t_r@10"
    return c
