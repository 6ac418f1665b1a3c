"""Sc2St contextual retrieval (paper §4.4): script + two LSTM streams + fusion.

    python -m vnr.train --config configs/sc2st/main.py[:ARGS] --workdir DIR

ARGS is a comma-separated list of at most one model and any options:
  sa | gf | lf     fusion (default sa): self-attention, cross gating, late fusion
  lf_t | lf_v      ablations: text context only / visual context only (late fusion)
  similarity       baseline: cosine of each candidate to keyframe t-1 (nothing trained)
  prior            baseline: random scores (nothing trained)
  smoke            tiny sizes for tests (synthetic_tiny corpus, a few steps)
  lsmdc            real data: add --config.data.manual_dir=DIR (LSMDC16 CSVs, meta.csv,
                   frames/ or features/; CLIP ViT-B/32 keyframes from $VNR_ENCODERS_DIR)
  released         the released story10_all_*_no.json storyboards: add
                   --config.data.manual_dir=DIR (story files, lsmdc.json, frames/)

Defaults train on the generated `synthetic` corpus (built on first use into
data.data_dir). A 300-step run took 12-15 min on a shared 2-core CPU (load
average ~30); the benchmark measured ~0.24 s/step at load ~10.
"""

import ml_collections

from configs import common

MODELS = ("sa", "gf", "lf", "lf_t", "lf_v", "similarity", "prior")


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    args = common.parse_arg(arg, __file__, (*MODELS, "smoke", "lsmdc", "released"))
    fusion = args.pick(MODELS, "model", "sa")
    baseline = fusion in ("similarity", "prior")  # evaluation only
    source = args.pick(("lsmdc", "released"), "real data source")
    real = source is not None
    c = common.base("sc2st.storyboard", total_steps=0 if baseline else 300,
                    warmup_steps=0 if baseline else 100, lr=2e-3, eval_every=150,
                    ckpt_every=150, keep_ckpts=1)
    c.data = dict(
        config=source or "synthetic",
        data_dir="data/tfds",
        manual_dir="",
        train_split="train",
        val_split="val",
        test_splits=("test",),
        max_tokens=40 if real else 16,
        vocab_size=30522 if real else 1024,
        num_workers=0,  # records are small arrays: the main process keeps up
    )
    c.model = dict(
        fusion=fusion,
        text_encoder="scratch:bert-tiny",  # or a local pretrained BERT, e.g. bert-base-uncased
        text_overrides=dict(hidden_size=64, intermediate_size=128),
        width=64,
        mlp=128,
        heads=2,
        dropout=0.1,
    )
    if "smoke" in args:
        c.data.config = "synthetic_tiny" if c.data.config == "synthetic" else c.data.config
        c.model.update(width=16, mlp=32, heads=2,
                       text_overrides=dict(hidden_size=32, intermediate_size=64))
        common.smoke(c, steps=(0, 0) if baseline else (4, 1), every=2)
        c.eval.update(max_val_clips=8, max_test_clips=6)  # 6 = a short batch
    return c
