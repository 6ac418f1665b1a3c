"""SYMON segment ordering across a cut (§6.2, Eq. 4).

    python -m vnr.train --config configs/symon/order.py[:ARGS] --workdir DIR

ARGS (comma-separated): text_video (default: segment features + narration) or video_only
(text replaced by zeros); smoke (tiny sizes for tests). Defaults use the generated
`synthetic` SYMON corpus; for real features pass --config.data.config=features
--config.data.manual_dir=DIR.
"""

import ml_collections

from configs import common
from configs.symon.base import base


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    args = common.parse_arg(arg, __file__, ("text_video", "video_only", "smoke"))
    args.pick(("text_video", "video_only"), "input")
    c = base("symon.order", "smoke" in args)
    c.model.use_text = "video_only" not in args
    c.best_metric = "" if "smoke" in args else "accuracy"
    return c
