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

MODELS = ("sa", "gf", "lf", "lf_t", "lf_v", "similarity", "prior")


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    args = {a.strip() for a in (arg or "").split(",") if a.strip()}
    unknown = args - set(MODELS) - {"smoke", "lsmdc", "released"}
    if unknown:
        raise ValueError(f"unknown config arg(s) {sorted(unknown)} for configs/sc2st/main.py")
    models = sorted(args & set(MODELS))
    if len(models) > 1:
        raise ValueError(f"pass one model of {MODELS}, got {models}")
    fusion = models[0] if models else "sa"
    baseline = fusion in ("similarity", "prior")
    if {"lsmdc", "released"} <= args:
        raise ValueError("pass 'lsmdc' or 'released', not both")
    real = bool(args & {"lsmdc", "released"})
    c = ml_collections.ConfigDict()
    c.task = "sc2st.storyboard"
    c.seed = 0
    c.data = dict(
        builder="sc2st",
        config=next((a for a in ("lsmdc", "released") if a in args), "synthetic"),
        data_dir="data/tfds",
        manual_dir="",
        train_split="train",
        val_split="val",
        test_splits=("test",),
        length=10,
        feature_dim=512 if real else 32,  # the builder config's CLIP width
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
    c.batch_size = 32
    c.eval_batch_size = 32
    c.total_steps = 0 if baseline else 300  # baselines: evaluation only
    c.warmup_steps = 0 if baseline else 100
    c.lr = 2e-3
    c.weight_decay = 0.01
    c.b1, c.b2 = 0.9, 0.999
    c.grad_clip = 1.0

    c.mesh = dict(shape=(-1, 1), axes=("data", "model"))
    c.sharding_rules = (("mlp", "model"), ("heads", "model"), ("vocab", "model"))

    c.log_every = 50
    c.eval_every = 150
    c.ckpt_every = 150
    c.keep_ckpts = 1
    c.best_metric = ""
    c.best_mode = "max"
    c.progress = True
    c.eval = dict(max_val_clips=0, max_test_clips=0)  # storyboards; 0 = the whole split

    if "smoke" in args:
        c.data.config = "synthetic_tiny" if c.data.config == "synthetic" else c.data.config
        c.model.update(width=16, mlp=32, heads=2,
                       text_overrides=dict(hidden_size=32, intermediate_size=64))
        c.batch_size = c.eval_batch_size = 8
        c.total_steps = 0 if baseline else 4
        c.warmup_steps = 0 if baseline else 1
        c.log_every = c.eval_every = c.ckpt_every = 2
        c.eval.update(max_val_clips=8, max_test_clips=6)  # 6 = a short batch
    return c
