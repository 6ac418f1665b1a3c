"""Movie Synopsis Association (MoviePuzzle Table 4): segment -> synopsis retrieval.

    python -m vnr.train --config configs/moviepuzzle/synopsis.py[:ARGS] --workdir DIR \
        [--config.init_from=REORDER_WORKDIR]

Table 4's two rows are two runs of this config:
  without reordering pre-training: as is (frame encoder from scratch);
  with reordering pre-training:    add `hcmc` and --config.init_from=<workdir of a finished
                                   configs/moviepuzzle/hcmc.py run> (the paper: HCMC's
                                   frame encoder, encoders.frame, initialises this one);
                                   or (ours) --config.init_from=<workdir of a finished
                                   configs/moviepuzzle/main.py run> (image/text/fuse).
The model.* and data.image_size/max_tokens/vocab_size defaults equal configs/moviepuzzle/main.py
(and its `smoke` sizes under `smoke`), so its runs load without overrides.

ARGS is a comma-separated list of:
  smoke     tiny sizes for tests (a few steps, the tiny synthetic corpus)
  hcmc      the frame encoder of HCMC (configs/moviepuzzle/hcmc.py, small encoders), so that
            --config.init_from=<HCMC workdir> starts from an HCMC run (the paper's "+reordering")
  movienet  MovieNet's synopsis alignment (config movienet_synopsis): add
            --config.data.manual_dir=<raw MovieNet>; splits train / val / test (movie-disjoint)
Defaults use `synthetic_synopsis` (the synthetic corpus's clips with generated paragraphs).
The init_from run is read at `--config.init_step`: `selected` (default), the step its
results.json reports (its model selected by validation); or best, last, a step number.
"""

import ml_collections

from configs import common


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    args = common.parse_arg(arg, __file__, ("smoke", "movienet", "hcmc"))
    movienet = "movienet" in args
    c = common.base("moviepuzzle.synopsis", total_steps=600, warmup_steps=50,
                    weight_decay=0.05, log_every=25, eval_every=200, ckpt_every=200)
    c.init_from = ""  # workdir of a finished moviepuzzle reordering run ("" = from scratch)
    c.init_step = "selected"  # its step: what its results.json reports, best, last or N
    c.init_params = ("image", "text", "fuse")  # PairOrderModel parts copied by name
    c.data = dict(
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
    c.model = dict(modalities=("vision", "text"), stem=4, conv="patch", channels=(32, 64, 64),
                   width=128, text_layers=0, segment_layers=1, synopsis_layers=1, heads=4,
                   mlp=256, embed=128, dropout=0.1, frame_encoder="pair")
    if "hcmc" in args:  # Table 4 "+reordering" from an HCMC run (its frame encoder)
        c.model.frame_encoder = "hcmc"
        c.init_params = ("encoders.frame",)
    common.evals(c, report=False)
    if movienet:  # Table 4's rows; the paper does not say how a model is selected: ours,
        c.select = dict(metric="val/r5", mode="max")  # the step of best validation R@5
    if "smoke" in args:
        c.data.config = "synthetic_synopsis_tiny" if not movienet else c.data.config
        c.data.update(num_workers=0, image_size=16, synopsis_tokens=32)
        c.model.update(stem=1, channels=(8, 16), width=32, mlp=64, heads=2, embed=32)
        common.smoke(c)
        c.evals.val.max_examples, c.evals.test.max_examples = 8, 10
    return c
