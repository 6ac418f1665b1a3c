"""SYMON bidirectional retrieval (§7.1-7.2, Eq. 5-6, Appendix E; Table 8 rows).

    python -m vnr.train --config configs/symon/retrieval.py[:ARGS] --workdir DIR

ARGS (comma-separated): univl (the paper's encoders: UniVL's text and video towers from
--config.model.univl_checkpoint=PATH/univl.pretrained.bin, tokens from
--config.data.tokenizer=DIR holding UniVL's bert-base-uncased vocab.txt, and Appendix E's
SGD: momentum 0.9, weight decay 0.5, lr 5e-5, cosine after a warm-up, batch 1024, 20 epochs
with 1 of warm-up counted on the built train split (`epochs`, `warmup_epochs`; epochs=0
gives total_steps directly: epochs=0,total_steps=0 is the zero-shot UniVL row);
videoclip (Table 8's zero-shot VideoCLIP rows: fairseq MMPT's VideoCLIP from
--config.model.videoclip_checkpoint=PATH/checkpoint_best.pt, bert-base-uncased WordPiece from
--config.data.tokenizer=DIR with its vocab.txt; VideoCLIP's S3D features, 512-d
`video_embedding` at 30 fps, one a second, in a release of their own
(--config.data.manual_dir), built under data/tfds_videoclip; no memory; nothing trained:
total_steps 0); exclude_yms
(remove the summary videos of the YMS movies from training for the §7.3 transfer: set
--config.data.exclude_movies=YMS_DIR/movie_list.txt; YMS's url_list.txt beside it is
required and removes the YMS videos themselves by id); memory (default: UniVL-SYMON-memory,
the Eq. 6 memory and the 60 % masking) or no_memory (UniVL-SYMON); mask_memory_only (our
option: the 60 % mask on the memory part only); smoke (tiny sizes for tests). Units:
two-scene clips, 4 feature rows, 64 text tokens per clip (128 with the memory's). The NCE
loss (Eq. 5) runs over the whole global batch (sharded over the "data" axis). Without
`univl` / `videoclip` the encoders are ours, trained from scratch with the shared AdamW defaults (a
stand-in). Defaults use the generated `synthetic` corpus; for real features pass
--config.data.config=features --config.data.manual_dir=DIR.
"""

import ml_collections

from configs import common
from configs.symon.base import base


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    args = common.parse_arg(arg, __file__, ("memory", "no_memory", "mask_memory_only",
                                            "exclude_yms", "univl", "videoclip", "smoke"))
    args.pick(("memory", "no_memory"), "memory")
    args.pick(("univl", "videoclip"), "pretrained encoder")
    if "videoclip" in args and "memory" in args:
        raise args.error("videoclip has no memory inputs: use videoclip or videoclip,no_memory")
    c = base("symon.retrieval", "smoke" in args)
    # One clip = 4 feature rows (1 fps); 64 text tokens; memory over the past 10 clips.
    c.data.update(max_frames=4, max_tokens=64 if "smoke" not in args else 32,
                  memory="no_memory" not in args and "videoclip" not in args,
                  memory_window=10,
                  exclude_movies="" if "exclude_yms" not in args else "MOVIE_LIST_REQUIRED")
    c.model.embed_dim = 64 if "smoke" not in args else 32
    c.temperature = 1.0  # the paper's plain dot product
    c.memory_mask_rate = 0.6  # Appendix E, memory model only
    c.memory_mask_scope = "memory" if "mask_memory_only" in args else "all"
    c.epochs, c.warmup_epochs = 0, 0  # > 0: step counts from the built train split
    c.data.tokenizer = "hash"  # or a tokenizer directory (UniVL: its bert-base-uncased)
    # "scratch" (our dual encoder) or "univl" (UniVL's towers, `univl_checkpoint`; its
    # heads are not in the file: 12 for the released model)
    c.model.update(encoder="scratch", univl_checkpoint="", univl_heads=12)
    if "univl" in args:  # §7.1 encoders, Appendix E optimisation
        c.model.encoder = "univl"
        c.update(optimizer="sgd", momentum=0.9, weight_decay=0.5, lr=5e-5,
                 schedule="warmup_cosine", end_lr_factor=0.0, grad_clip=0.0)
        if "smoke" not in args:  # 20 epochs, the first one warm-up (`data.resolve_epochs`)
            c.update(batch_size=1024, epochs=20, warmup_epochs=1)
    # "videoclip": VideoCLIP's towers (`videoclip_checkpoint`; its heads and upstream's
    # max_video_len / max_len are not in the file: 12, 32 and 96 for the released model)
    c.model.update(videoclip_checkpoint="", videoclip_heads=12, videoclip_max_video_len=32,
                   videoclip_max_len=96)
    if "videoclip" in args:  # zero-shot (SYMON Appendix E: "without finetuning")
        c.model.encoder = "videoclip"
        c.data.data_dir = "data/tfds_videoclip"  # its 512-d build apart from UniVL's 1024-d
        c.update(total_steps=0, warmup_steps=0)
    if "smoke" not in args and "videoclip" not in args:  # the paper tunes on validation R@5
        c.select = dict(metric="val/v2t_r@5", mode="max")  # (zero-shot: nothing to select)
    return c
