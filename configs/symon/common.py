"""Shared settings of the SYMON configs (imported by order.py and retrieval.py)."""

import ml_collections


def base(task: str, smoke: bool) -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.task = task
    c.seed = 0
    c.data = dict(
        builder="symon",
        config="synthetic",  # "features" for real SYMON features (add data.manual_dir)
        data_dir="data/tfds",
        manual_dir="",
        train_split="train",
        val_split="val",
        test_splits=("test",),
        segment_seconds=4.0,  # ordering: 4-second segments on each side of a cut
        max_frames=16,  # retrieval: frames per segment (sampled uniformly if longer)
        max_tokens=32,
        vocab_size=8192,
        memory=True,  # retrieval: long-term memory of Eq. 6
        memory_window=10,
        num_workers=0,
    )
    c.model = dict(width=128, layers=1, heads=4, mlp=256, dropout=0.1)
    c.batch_size = 64
    c.eval_batch_size = 64
    c.total_steps = 1500
    c.warmup_steps = 100
    c.lr = 1e-3
    c.weight_decay = 0.01
    c.b1, c.b2 = 0.9, 0.999
    c.grad_clip = 1.0
    c.mesh = dict(shape=(-1, 1), axes=("data", "model"))
    c.sharding_rules = (("mlp", "model"), ("heads", "model"), ("vocab", "model"))
    c.log_every = 50
    c.eval_every = 500
    c.ckpt_every = 500
    c.keep_ckpts = 2
    c.best_metric = ""
    c.best_mode = "max"
    c.progress = True
    c.eval = dict(max_val_clips=0, max_test_clips=0)
    if smoke:
        c.data.config = "synthetic_tiny"
        c.data.update(max_frames=8, max_tokens=16, vocab_size=1024)
        c.model.update(width=32, heads=2, mlp=64)
        c.batch_size = c.eval_batch_size = 16
        c.total_steps, c.warmup_steps = 6, 2
        c.log_every = c.eval_every = c.ckpt_every = 3
        c.eval.update(max_val_clips=40, max_test_clips=40)
    return c


def parse_args(arg: str | None, allowed: set[str], path: str) -> set[str]:
    args = {a.strip() for a in (arg or "").split(",") if a.strip()}
    if args - allowed:
        raise ValueError(f"unknown config arg(s) {sorted(args - allowed)} for {path} "
                         f"(choose from {sorted(allowed)})")
    return args
