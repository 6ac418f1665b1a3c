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
    c.data.memory = "no_memory" not in args
    c.model.embed_dim = 64 if "smoke" not in args else 32
    c.temperature = 1.0  # the paper's plain dot product
    c.memory_mask_rate = 0.6  # 60% of the memory's tokens masked in training
    c.best_metric = "" if "smoke" in args else "v2t_r@10"
    return c
