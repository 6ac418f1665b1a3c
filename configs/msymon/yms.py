"""YMS clip/sentence alignment (NeuMATCH's YouTube Movie Summaries; SYMON §7.3).

    python -m vnr.train --config configs/msymon/yms.py[:ARGS] --workdir DIR \
        --config.data.manual_dir=YMS_DIR                       # supervised
    python -m vnr.benchmarks.msymon.alignment evaluate --config configs/msymon/yms.py:zeroshot \
        --init_from RUN --manual_dir YMS_DIR --data_dir data/tfds   # zero-shot

Same task as M-SyMoN (`vnr/benchmarks/msymon/alignment.py`: Eq. 2 InfoNCE, cosine similarity, Drop-DTW or
argmax); clips come from `clip_segmentation.txt`. ARGS is a comma-separated list of:
  supervised   (default) train on YMS `train`, select on `val`, report `test`
  zeroshot     no YMS training: evaluate the model of another run (`evaluate --init_from
               RUN`, e.g. an M-SyMoN English run with the same features and model sizes)
               on `test`, each clip given its most similar sentence when the cosine exceeds
               a threshold tuned for F1 on `val` (SYMON §7.3); add `dtw` for Drop-DTW
  dtw          Drop-DTW inference in zeroshot
  phrases      align phrases (annotations_phrases.txt) instead of sentences
  smoke        tiny sizes for tests
The public sample annotates only the training split: evaluate on what exists, e.g.
--config.data.val_split=train --config.data.test_splits='("train",)'.
"""

import ml_collections

from configs.msymon.main import get_config as msymon_config


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    args = {a.strip() for a in (arg or "").split(",") if a.strip()}
    unknown = args - {"supervised", "zeroshot", "dtw", "phrases", "smoke"}
    if unknown:
        raise ValueError(f"unknown config arg(s) {sorted(unknown)} for configs/msymon/yms.py")
    if {"supervised", "zeroshot"} <= args:
        raise ValueError("pass 'supervised' or 'zeroshot', not both")
    c = msymon_config("smoke" if "smoke" in args else None)
    text = "phrases" if "phrases" in args else "sentences"
    c.data.update(builder="yms", config=text, manual_dir="", dim=c.data.dim if "smoke" in args
                  else 512, train_split="train", val_split="val", test_splits=("test",))
    if "smoke" in args:
        c.data.dim = 32
    if "zeroshot" in args:
        c.total_steps, c.warmup_steps = 0, 0
        c.eval.method = "drop_dtw" if "dtw" in args else "argmax"
        c.eval.threshold = None  # tuned on val_split
    return c
