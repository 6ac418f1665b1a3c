"""YMS clip/sentence alignment (NeuMATCH's YouTube Movie Summaries; SYMON §7.3).

    python -m vnr.train --config configs/msymon/yms.py[:ARGS] --workdir DIR \
        --config.data.manual_dir=YMS_DIR                       # supervised
    python -m vnr.benchmarks.msymon.tools evaluate --config configs/msymon/yms.py:zeroshot \
        --init_from RUN --manual_dir YMS_DIR --data_dir data/tfds   # zero-shot

Same task as M-SyMoN (`vnr/benchmarks/msymon/alignment.py`: Eq. 2 InfoNCE, cosine similarity,
Drop-DTW or argmax); clips come from `clip_segmentation.txt`. ARGS is a comma-separated list of:
  supervised   (default) train on YMS `train`, select on `val`, report `test`
  zeroshot     no YMS training: evaluate the model of another run (`evaluate --init_from
               RUN`, e.g. an M-SyMoN English run with the same features and model sizes)
               on `test`, each clip given its most similar sentence when the cosine exceeds
               a threshold tuned for F1 on `val` (SYMON §7.3); add `dtw` for Drop-DTW
  dtw          Drop-DTW inference in zeroshot
  phrases      align phrases (annotations_phrases.txt) instead of sentences
  cclm         M-SyMoN §5.1's model (CCLM's Swin-B and XLM-R text layers, 3 frames a clip from
               YMS's videos/, builder config sentences_videos / phrases_videos; as
               main.py:cclm, with --config.model.cclm_checkpoint and --config.data.tokenizer)
  paper        §6.1's hyperparameters (main.py:paper) for a supervised run
  smoke        tiny sizes for tests
The public sample annotates only the training split: evaluate on what exists, e.g.
--config.data.val_split=train --config.data.test_splits='("train",)'.
"""

import ml_collections

from configs import common
from configs.msymon import main


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    args = common.parse_arg(arg, __file__, ("supervised", "zeroshot", "dtw", "phrases", "cclm",
                                            "paper", "smoke"))
    args.pick(("supervised", "zeroshot"), "setting")
    c = main.get_config(",".join(a for a in ("cclm", "paper", "smoke") if a in args) or None)
    text = "phrases" if "phrases" in args else "sentences"
    c.data.update(builder="yms", config=f"{text}_videos" if "cclm" in args else text,
                  manual_dir="", dim=32 if "smoke" in args else 512, train_split="train",
                  val_split="val", test_splits=("test",),
                  clips="grid")  # YMS's own clips (clip_segmentation.txt); else fixed-length
    if "zeroshot" in args:
        c.total_steps, c.warmup_steps, c.epochs = 0, 0, 0
        c.eval.method = "drop_dtw" if "dtw" in args else "argmax"
        c.eval.threshold = None  # tuned on val_split
    return c
