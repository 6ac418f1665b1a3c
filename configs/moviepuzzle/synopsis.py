"""Movie Synopsis Association (MoviePuzzle Table 4): segment -> synopsis retrieval.

    python -m vnr.train --config configs/moviepuzzle/synopsis.py[:ARGS] --workdir DIR \
        [--config.init_from=REORDER_WORKDIR]

Table 4's two rows are two runs of this config:
  without reordering pre-training: as is (frame encoder from scratch);
  with reordering pre-training:    --config.init_from=<workdir of a finished run of
                                   configs/moviepuzzle/main.py> (its latest checkpoint's
                                   image/text/fuse parameters initialise the frame encoder).
The model.* and data.image_size/max_tokens/vocab_size defaults equal configs/moviepuzzle/main.py
(and its `smoke` sizes under `smoke`), so its runs load without overrides.

ARGS is a comma-separated list of:
  smoke     tiny sizes for tests (a few steps, the tiny synthetic corpus)
  movienet  MovieNet's synopsis alignment (config movienet_synopsis): add
            --config.data.manual_dir=<raw MovieNet>; splits train / val / test (movie-disjoint)
Defaults use `synthetic_synopsis` (the synthetic corpus's clips with generated paragraphs).
"""

import ml_collections


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    args = {a.strip() for a in (arg or "").split(",") if a.strip()}
    unknown = args - {"smoke", "movienet"}
    if unknown:
        raise ValueError(f"unknown config arg(s) {sorted(unknown)} for "
                         "configs/moviepuzzle/synopsis.py")
    c = ml_collections.ConfigDict()
    c.task = "moviepuzzle.synopsis"
    c.seed = 0
    c.init_from = ""  # workdir of a finished moviepuzzle reordering run ("" = from scratch)
    c.init_params = ("image", "text", "fuse")  # PairOrderModel parts copied by name

    movienet = "movienet" in args
    c.data = dict(
        builder="moviepuzzle",
        config="movienet_synopsis" if movienet else "synthetic_synopsis",
        data_dir="data/tfds",
        manual_dir="",
        train_split="train",
        val_split="val",
        test_splits=("test",) if movienet else ("test_in_domain", "test_out_domain"),
        max_frames=20,
        image_size=64,
        max_tokens=16,
        vocab_size=4096,
        synopsis_tokens=64,
        num_workers=2,
        augment=False,  # colour/flip changes would contradict colour words of a synopsis
    )
    c.model = dict(
        modalities=("vision", "text"),
        stem=4,
        conv="patch",
        channels=(32, 64, 64),
        width=128,
        text_layers=0,
        segment_layers=1,
        synopsis_layers=1,
        heads=4,
        mlp=256,
        embed=128,
        dropout=0.1,
    )

    c.batch_size = 32
    c.eval_batch_size = 32
    c.total_steps = 600
    c.warmup_steps = 50
    c.lr = 1e-3
    c.weight_decay = 0.05
    c.b1, c.b2 = 0.9, 0.999
    c.grad_clip = 1.0

    c.mesh = dict(shape=(-1, 1), axes=("data", "model"))
    c.sharding_rules = (("mlp", "model"), ("heads", "model"), ("vocab", "model"))

    c.log_every = 25
    c.eval_every = 200
    c.ckpt_every = 200
    c.keep_ckpts = 2
    c.best_metric = ""  # e.g. "r1"
    c.best_mode = "max"
    c.progress = True
    c.eval = dict(max_val_clips=0, max_test_clips=0)  # 0 = the whole split

    if "smoke" in args:
        c.data.config = "synthetic_synopsis_tiny" if not movienet else c.data.config
        c.data.num_workers = 0
        c.data.image_size = 16
        c.data.synopsis_tokens = 32
        c.model.update(stem=1, channels=(8, 16), width=32, mlp=64, heads=2, embed=32)
        c.batch_size = c.eval_batch_size = 8
        c.total_steps, c.warmup_steps = 6, 2
        c.log_every = c.eval_every = c.ckpt_every = 3
        c.eval.update(max_val_clips=8, max_test_clips=10)
    return c
