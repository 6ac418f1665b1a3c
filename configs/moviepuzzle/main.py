"""MoviePuzzle main job: multimodal pairwise-order model ("+fusion" baseline shape).

    python -m vnr.train --config configs/moviepuzzle/main.py[:ARGS] --workdir DIR

ARGS is a comma-separated list of:
  smoke   tiny sizes for tests (a few steps, a tiny corpus)
  text    text-only baseline (no image encoder)
  vision  vision-only baseline (no text encoder)
  clips   the public per-clip release layout: add --config.data.manual_dir=DIR and
          name its splits (--config.data.train_split=..., test_splits=...)

Defaults train on the embedded `synthetic` corpus (built on first use into
data.data_dir) and finish in under 10 minutes on a 2-core CPU.
"""

import ml_collections


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    args = {a.strip() for a in (arg or "").split(",") if a.strip()}
    unknown = args - {"smoke", "text", "vision", "clips"}
    if unknown:
        raise ValueError(f"unknown config arg(s) {sorted(unknown)} for configs/moviepuzzle/main.py")
    c = ml_collections.ConfigDict()
    c.task = "moviepuzzle.pairwise"
    c.seed = 0

    c.data = dict(
        builder="moviepuzzle",
        config="clips" if "clips" in args else "synthetic",
        data_dir="data/tfds",
        manual_dir="",
        train_split="train",
        val_split="val",
        test_splits=("test_in_domain", "test_out_domain"),
        max_frames=20,
        image_size=64,
        max_tokens=16,  # the synthetic grammar has <= 15 words per frame
        vocab_size=4096,
        num_workers=2,
        augment=True,  # clip-consistent flip + colour-channel permutation (training only)
    )
    if {"text", "vision"} <= args:
        raise ValueError("pass 'text' or 'vision' (single-modality baselines), not both")
    modalities = ("vision", "text")
    if "text" in args:
        modalities = ("text",)
    if "vision" in args:
        modalities = ("vision",)
    c.model = dict(
        modalities=modalities,
        stem=4,  # 4x4 patchify stem, then layers halving the map: 64 -> 16 -> 8 -> 4
        conv="patch",  # halving layers: 2x2 patchify GEMMs (fast on CPU), or "3x3" convs
        channels=(32, 64, 64),
        width=128,
        text_layers=0,  # token + position embeddings, masked mean pool (no attention)
        pair_layers=1,
        heads=4,
        mlp=256,
        dropout=0.1,
    )
    c.pairs_per_clip = 64

    # AdamW as in the paper (Appendix D), from scratch: warmup + cosine decay.
    c.batch_size = 32
    c.eval_batch_size = 32
    c.total_steps = 1000
    c.warmup_steps = 50
    c.lr = 1e-3
    c.weight_decay = 0.05
    c.b1, c.b2 = 0.9, 0.999
    c.grad_clip = 1.0

    c.mesh = dict(shape=(-1, 1), axes=("data", "model"))
    # Logical axis -> mesh axis; names not listed are replicated.
    c.sharding_rules = (("mlp", "model"), ("heads", "model"), ("vocab", "model"))

    c.log_every = 25
    c.eval_every = 500
    c.ckpt_every = 500
    c.keep_ckpts = 2
    c.best_metric = ""  # e.g. "os2": keep the best keep_ckpts checkpoints by val os2
    c.best_mode = "max"  # "min" for lsd, lmd, sd, ssd
    c.progress = True
    c.eval = dict(
        max_val_clips=200,
        max_test_clips=0,  # 0 = the whole split
        search="beam",  # or "exact" (subset DP, n <= 20 frames is fine)
        beam_size=10,
        objective="linear",
        report_clips=4,
    )

    if "smoke" in args:
        c.data.config = "synthetic_tiny" if c.data.config == "synthetic" else c.data.config
        c.data.num_workers = 0
        c.data.image_size = 16
        c.model.update(stem=1, channels=(8, 16), width=32, mlp=64, heads=2)
        c.pairs_per_clip = 8
        c.batch_size = c.eval_batch_size = 8
        c.total_steps, c.warmup_steps = 6, 2
        c.log_every = c.eval_every = c.ckpt_every = 3
        c.eval.update(max_val_clips=8, max_test_clips=10, report_clips=2)  # 10 = a short batch
    return c
