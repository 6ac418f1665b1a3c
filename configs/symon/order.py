"""SYMON segment ordering across a cut (§6.2, Eq. 4, Appendix D; Table 6 rows).

    python -m vnr.train --config configs/symon/order.py[:ARGS] --workdir DIR

ARGS (comma-separated): text_video (default) or video_only (text replaced by zeros);
split: builder (train / val / test, default), a_to_b (train on Set A, test on Set B) or
b_to_a (the reverse): the paper's Table 6 protocol is the mean of the a_to_b and b_to_a
test accuracies (`python -m vnr.benchmarks.symon.order_mean DIR_AB DIR_BA`); smoke (tiny
sizes for tests). Text: the narration overlapping both 4 s segments, extended to
sentence boundaries, 128 tokens trimmed from both ends. Defaults use the generated
`synthetic` corpus; for real features pass --config.data.config=features
--config.data.manual_dir=DIR.
"""

import ml_collections

from configs import common
from configs.symon.base import base


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    args = common.parse_arg(arg, __file__, ("text_video", "video_only", "builder", "a_to_b",
                                            "b_to_a", "smoke"))
    args.pick(("text_video", "video_only"), "input")
    args.pick(("builder", "a_to_b", "b_to_a"), "split")
    c = base("symon.order", "smoke" in args)
    c.data.max_tokens = 128 if "smoke" not in args else 32
    if "a_to_b" in args or "b_to_a" in args:
        train, test = ("setA", "setB") if "a_to_b" in args else ("setB", "setA")
        c.data.update(train_split=train, test_splits=(test,))
    c.model.use_text = "video_only" not in args
    if "smoke" not in args:  # §7.1: the epoch of highest validation accuracy
        c.select = dict(metric="val/accuracy", mode="max")
    return c
