"""MoviePuzzle Table 4's Singularity rows (task moviepuzzle.singularity_synopsis):

    python -m vnr.train --workdir DIR \
      --config configs/moviepuzzle/singularity_synopsis.py:movienet,checkpoint=PTH,tokenizer=BERT \
      --config.data.manual_dir=$MOVIENET [--config.init_from=T1_RUN]

  Singularity               as above: fine-tuned from the checkpoint PTH
  Singularity +reordering   add --config.init_from=<workdir of a finished
                            configs/moviepuzzle/singularity_pairs.py run> (Table 1's
                            Singularity +fusion: the reordering task "added upstream"); its
                            encoder (at --config.init_step, default the selected step)
                            replaces the checkpoint's
  zero_shot                 (flag) nothing trained: the model evaluated as loaded

PTH is a released Singularity checkpoint (ours: singularity_temporal_17m.pth), BERT a
bert-base-uncased directory. Nothing downloads. The paper gives no setting for these rows;
ours follow upstream's paragraph-retrieval recipe (jayleicn/singularity configs/ret_anet.yaml
and its README's temporal settings): 224 px frames normalised with mean = std = 0.5, 4 frames
per segment in training and 12 at test ("middle" sampling), synopses of 150 WordPiece tokens,
ITC loss at the checkpoint's learnt temperature, AdamW lr 1e-5 (betas 0.9 / 0.999,
weight decay 0.02), cosine to 0.1 x lr without warmup or clipping, 10 epochs, batch 32; the
step of best validation R@5. Not upstream's: no ITM loss and no ITM re-ranking.

ARGS is a comma-separated list of:
  checkpoint=PTH, tokenizer=DIR   required (`validate` says so)
  movienet                        MovieNet's synopsis alignment (config movienet_synopsis;
                                  add --config.data.manual_dir); default: synthetic_synopsis
  zero_shot                       evaluation only (total_steps 0)
  smoke                           tiny sizes for tests (the golden tiny checkpoint: 16 px)
"""

import ml_collections

from configs import common

FLAGS = ("movienet", "zero_shot", "smoke")
VALUES = {"checkpoint": str, "tokenizer": str}


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    args = common.parse_arg(arg, __file__, FLAGS, VALUES)
    movienet = "movienet" in args
    c = common.base("moviepuzzle.singularity_synopsis", log_every=25, eval_every=200,
                    ckpt_every=200, total_steps=600)  # total_steps: until the data is built
    c.init_from = ""  # workdir of a finished singularity_pairs run ("" = the checkpoint)
    c.init_step = "selected"
    c.data = dict(
        config="movienet_synopsis" if movienet else "synthetic_synopsis",
        data_dir="data/tfds", manual_dir="", train_split="train", val_split="val",
        test_splits=("test",) if movienet else ("test_in_domain", "test_out_domain"),
        image_size=224,  # upstream's image_res (checked against the checkpoint)
        num_frames=4,  # upstream's temporal fine-tuning (video_input.num_frames=4)
        num_frames_test=12,  # upstream's README evaluation (num_frames_test=12)
        synopsis_tokens=150,  # ret_anet.yaml max_txt_l (paragraph retrieval)
        tokenizer=args.values.get("tokenizer", ""),
        num_workers=2,
    )
    c.model = dict(checkpoint=args.values.get("checkpoint", ""), loss="itc")
    c.update(optimizer="adamw", lr=1e-5, b1=0.9, b2=0.999, eps=1e-8, weight_decay=0.02,
             schedule="cosine", warmup_steps=0, end_lr_factor=0.1, grad_clip=0.0, epochs=10,
             batch_size=32, eval_batch_size=32)
    common.evals(c, report=False)
    if movienet:  # as Table 4's other rows: the step of best validation R@5 (ours)
        c.select = dict(metric="val/r5", mode="max")
    if "zero_shot" in args:  # nothing trained: the loaded model is evaluated
        c.epochs = c.total_steps = 0
        c.select = dict(metric="", mode="max")
    if "smoke" in args:
        c.data.config = "synthetic_synopsis_tiny" if not movienet else c.data.config
        c.data.update(num_workers=0, image_size=16, synopsis_tokens=24, num_frames=2,
                      num_frames_test=3)
        zero = c.total_steps == 0
        c.epochs = 0
        common.smoke(c)
        c.warmup_steps = 0
        c.total_steps = 0 if zero else c.total_steps
        c.evals.val.max_examples, c.evals.test.max_examples = 8, 10
    return c
