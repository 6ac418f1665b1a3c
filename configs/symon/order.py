"""SYMON segment ordering across a cut (§6.2, Eq. 4, Appendix D; Table 6 rows).

    python -m vnr.train --config configs/symon/order.py[:ARGS] --workdir DIR

ARGS (comma-separated): univl (the paper's model, Fig. 10: UniVL's text, video and cross
encoders from --config.model.univl_checkpoint, WordPiece tokens from
--config.data.tokenizer, Appendix D's Adam with cosine decay: text+video batch 128, lr 5e-6;
video only batch 256, lr 1e-5; 30 epochs with 6 of warm-up, counted on the built train
split); text_video (default) or video_only (text replaced by zeros); split: builder (train /
val / test, default), a_to_b (train on Set A, test on Set B) or b_to_a (the reverse): the
paper's Table 6 protocol is the mean of the a_to_b and b_to_a test accuracies (`python -m
vnr.benchmarks.symon.order_mean DIR_AB DIR_BA`); smoke (tiny sizes for tests). Text: the
narration overlapping both 4 s segments, extended to sentence boundaries, 128 tokens trimmed
from both ends. Defaults use the generated `synthetic` corpus; for real features pass
--config.data.config=features --config.data.manual_dir=DIR.
"""

import ml_collections

from configs import common
from configs.symon.base import base


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    args = common.parse_arg(arg, __file__, ("text_video", "video_only", "builder", "a_to_b",
                                            "b_to_a", "univl", "smoke"))
    args.pick(("text_video", "video_only"), "input")
    args.pick(("builder", "a_to_b", "b_to_a"), "split")
    c = base("symon.order", "smoke" in args)
    c.data.max_tokens = 128 if "smoke" not in args else 32
    if "a_to_b" in args or "b_to_a" in args:
        train, test = ("setA", "setB") if "a_to_b" in args else ("setB", "setA")
        c.data.update(train_split=train, test_splits=(test,))
    c.model.use_text = "video_only" not in args
    # "scratch" (our cross encoder) or "univl" (UniVL's text, video and cross encoders,
    # Fig. 10; as configs/symon/retrieval.py: univl_checkpoint, data.tokenizer)
    c.epochs, c.warmup_epochs = 0, 0  # > 0: step counts from the built train split
    c.data.tokenizer = "hash"
    c.model.update(encoder="scratch", univl_checkpoint="", univl_heads=12)
    if "univl" in args:  # Appendix D: Adam, cosine decay after warm-up (30 / 6 epochs)
        c.model.encoder = "univl"
        text = "video_only" not in args
        c.update(optimizer="adam", schedule="warmup_cosine", end_lr_factor=0.0, grad_clip=0.0,
                 lr=5e-6 if text else 1e-5)
        if "smoke" not in args:  # 30 epochs, 6 of warm-up (`data.resolve_epochs`)
            c.update(batch_size=128 if text else 256, epochs=30, warmup_epochs=6)
    if "smoke" not in args:  # §7.1: the epoch of highest validation accuracy
        c.select = dict(metric="val/accuracy", mode="max")
    return c
