"""Zero-shot YMS alignment from a SYMON retrieval run (SYMON §7.3, Table 9 UniVL-SYMON rows).

    python -m vnr.train --config configs/symon/yms_transfer.py[:ARGS] --workdir DIR \\
        --config.transfer.source_run=SYMON_RUN --config.data.manual_dir=YMS_DIR \\
        --config.data.dim=D

SYMON_RUN: a finished `configs/symon/retrieval.py:exclude_yms[,no_memory]` run (the 94 YMS
movies removed from its training set) with the same model sizes and feature width D; its
model at `--config.transfer.source_step` (default `selected`: the step its results.json
reports, selected by validation; or best, last, a step number).
ARGS (comma-separated): memory (default, UniVL-SYMON-memory) or no_memory (UniVL-SYMON): must
match the source run; univl (UniVL's towers, as the source run's `univl` preset:
--config.model.univl_checkpoint and --config.data.tokenizer as there; with no source run the
UniVL rows score with univl.pretrained.bin itself); videoclip (Table 9's VideoCLIP rows:
VideoCLIP itself, zero-shot, from --config.model.videoclip_checkpoint=PATH/checkpoint_best.pt
with --config.data.tokenizer=DIR holding bert-base-uncased's vocab.txt; YMS features from
VideoCLIP's S3D, 512-d (data.dim), a release of their own built under data/tfds_videoclip; no
memory); original (default: YMS test split, original segmentation, threshold tuned on val) or
new (70 % test / 30 % val by video, two-scene clips from feature-distance cuts: YMS has no
TransNetV2 cuts, see REPRODUCING.md); sentences (default) or phrases (sub-sentence annotations);
smoke (tiny sizes for tests). The public YMS sample annotates only its training split: evaluate
on what exists
(e.g. --config.data.val_split=train
--config.data.test_splits='("train",)').
"""

import ml_collections

from configs import common
from configs.symon.base import base


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    args = common.parse_arg(arg, __file__, ("memory", "no_memory", "original", "new",
                                            "sentences", "phrases", "univl", "videoclip",
                                            "smoke"))
    args.pick(("memory", "no_memory"), "memory")
    args.pick(("univl", "videoclip"), "pretrained encoder")
    if "videoclip" in args and "memory" in args:
        raise args.error("videoclip has no memory inputs: use videoclip or videoclip,no_memory")
    videoclip = "videoclip" in args
    args.pick(("original", "new"), "setting")
    args.pick(("sentences", "phrases"), "annotation level")
    smoke = "smoke" in args
    c = base("symon.yms_transfer", smoke)
    new = "new" in args
    c.data = dict(builder="yms", config="phrases" if "phrases" in args else "sentences",
                  data_dir="data/tfds", manual_dir="",
                  dim=512 if videoclip else 32 if smoke else 1024, fps=1.0, clip_seconds=3.0,
                  max_frames=4, max_tokens=32 if smoke else 64,
                  vocab_size=1024 if smoke else 8192,
                  memory="no_memory" not in args and not videoclip,
                  memory_window=10, train_split="train",
                  val_split="new_val" if new else "val",
                  test_splits=("new_test",) if new else ("test",), num_workers=0,
                  segmentation="scenes" if new else "release")
    common.evals(c)  # on the new data keys; the test evaluator draws <split>_alignment.png
    if smoke:
        c.evals.val.max_examples, c.evals.test.max_examples = 40, 40
    c.model.embed_dim = 32 if smoke else 64
    c.transfer = dict(source_run="", source_step="selected")  # as vnr.evaluate --step
    # As configs/symon/retrieval.py: "univl" embeds with UniVL's towers (the source run's,
    # or, with no source run, univl.pretrained.bin's own: the UniVL rows), BERT WordPiece
    # tokens from data.tokenizer; "scratch" is our from-scratch dual encoder.
    c.data.tokenizer = "hash"
    c.model.update(encoder="univl" if "univl" in args else "scratch", univl_checkpoint="",
                   univl_heads=12)
    # "videoclip": as configs/symon/retrieval.py:videoclip (VideoCLIP's towers, zero-shot)
    c.model.update(videoclip_checkpoint="", videoclip_heads=12, videoclip_max_video_len=32,
                   videoclip_max_len=96)
    if videoclip:  # its 512-d YMS build apart from any other 512-d one (M-SYMON's)
        c.model.encoder = "videoclip"
        c.data.data_dir = "data/tfds_videoclip"
    c.total_steps, c.warmup_steps = 0, 0
    return c
