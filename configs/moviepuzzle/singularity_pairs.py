"""MoviePuzzle Table 1's "Singularity +fusion" row (task moviepuzzle.singularity_pairs):

    python -m vnr.train --workdir DIR \
      --config configs/moviepuzzle/singularity_pairs.py:movienet,checkpoint=PTH,tokenizer=BERT \
      --config.data.manual_dir=$MOVIENET

PTH is a released Singularity checkpoint file (ours: singularity_temporal_17m.pth from
jayleicn/singularity's README; the paper names the model, not a file), BERT a
bert-base-uncased directory (its vocab.txt: Singularity's tokenizer). Nothing downloads.

The paper (§4.1) runs its pretrained baselines as pair classifiers after BERT's NSP task,
"+fusion" being the early-fusion mechanism, and states AdamW at lr 1e-4, betas 0.9 / 0.999,
eps 1e-6, 5 epochs. Everything else is ours (REPRODUCING.md, row t1-singularity-fusion): a
pair is a 2-frame video (frame i, frame j) and the text "[CLS] u_i [SEP] u_j [SEP]" through
Singularity's fusion layers (`Singularity.pair_cls`), a linear 2-way head on the fused
[CLS], NSP labels, frames resized to 224 x 224 bicubic and normalised with mean = std = 0.5
(upstream's), utterances of at most 32 WordPiece tokens each, batch 8 clips x 8 pairs,
weight decay 0.01, constant lr, the step of best validation OS2, Algorithm 3 (per-start
beam, width 10) on Eq. 5 scores.

ARGS is a comma-separated list of:
  checkpoint=PTH    the Singularity checkpoint (required: `validate` says so)
  tokenizer=DIR     the bert-base-uncased directory (required)
  sop               ALBERT's SOP labels instead of NSP (ours)
  clips | movienet  the public per-clip release / raw MovieNet (add
                    --config.data.manual_dir=DIR); default: the generated corpus
  smoke             tiny sizes for tests (the golden tiny checkpoint reads 16 x 16 frames)
"""


import ml_collections

from configs import common
from configs.moviepuzzle import video_pairs

FLAGS = ("sop", "clips", "movienet", "smoke")
VALUES = {"checkpoint": str, "tokenizer": str}


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    args = common.parse_arg(arg, __file__, FLAGS, VALUES)
    c = common.base("moviepuzzle.singularity_pairs", log_every=25)
    c.data = dict(
        config=args.pick(("clips", "movienet"), "data source", "synthetic"),
        data_dir="data/tfds", manual_dir="", train_split="train", val_split="val",
        test_splits=("test_in_domain", "test_out_domain"),
        max_frames=20,
        image_size=224,  # upstream's image_res (checked against the checkpoint)
        max_tokens=32,  # WordPiece tokens per utterance ([CLS] and [SEP] included; ours)
        vocab_size=4096,  # unused (hashed words are not read): the checkpoint's tokenizer
        tokenizer=args.values.get("tokenizer", ""),
        num_workers=2,
    )
    c.model = dict(checkpoint=args.values.get("checkpoint", ""),
                   head="sop" if "sop" in args else "nsp")
    video_pairs.pair_training(c)  # §4.1 and ours, as the VideoMAE / TimeSformer rows
    if "smoke" in args:
        video_pairs.pair_smoke(c, image_size=16, max_tokens=8)
    return c
