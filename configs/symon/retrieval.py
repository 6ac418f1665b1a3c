"""SYMON bidirectional retrieval (§7.1, Eq. 5-6) with long-term memory.

    python -m vnr.train --config configs/symon/retrieval.py[:ARGS] --workdir DIR

ARGS (comma-separated): no_memory (drop the Eq. 6 memory inputs); smoke (tiny sizes for
tests). The NCE loss runs over the whole global batch (sharded over the "data" axis).
Defaults use the generated `synthetic` corpus; for real features pass
--config.data.config=features --config.data.manual_dir=DIR.
"""

import importlib.util
import pathlib

import ml_collections


def _common():
    path = pathlib.Path(__file__).with_name("common.py")
    spec = importlib.util.spec_from_file_location("_symon_common", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    common = _common()
    args = common.parse_args(arg, {"no_memory", "smoke"}, __file__)
    c = common.base("symon.retrieval", "smoke" in args)
    c.data.memory = "no_memory" not in args
    c.model.embed_dim = 64 if "smoke" not in args else 32
    c.temperature = 1.0  # the paper's plain dot product
    c.memory_mask_rate = 0.6  # 60% of the memory's tokens masked in training
    c.best_metric = "" if "smoke" in args else "v2t_r@10"
    return c
