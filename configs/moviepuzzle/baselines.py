"""MoviePuzzle Table 1 baselines that this project provides (task moviepuzzle.hcmc):

    python -m vnr.train --config configs/moviepuzzle/baselines.py:ROW[,smoke|clips] --workdir DIR

Only Random, Bert (NSP) and AlBert (SOP) are rows of Table 1; `vision`, `text`,
`early_fusion` and `fusion` are our small-encoder pair models (Table 1's VideoMAE,
Timesformer, Singularity, the "+fusion" rows, GPT-3.5/4 and the video LLMs are not provided:
see vnr/benchmarks/moviepuzzle/REPRODUCING.md). Every row orders frames with the paper's
search: Algorithm 3 (per-start beam, width 10) on Eq. 5 scores read as "directly before".

ROW is one of:
  random        nothing trained (evaluation only): exact expected metrics of random orders
  nsp_bert      text pairs "[CLS] utt_i [SEP] utt_j [SEP]" on BERT, NSP-style head
  sop_albert    the same on ALBERT, SOP-style head
  vision        vision-only pair model (the main job's model without text)
  text          text-only pair model (the main job's model without images)
  early_fusion  image and utterance tokens of both frames in one pair transformer
  fusion        late fusion = the main job's model (configs/moviepuzzle/main.py), with the
                paper's search instead of the main job's (linear objective, shared beam)

Text encoders are `scratch:<bert|albert>-small` by default (random init, trained here; the
hashed subtitle vocabulary of vnr.data.text, no download).
`--config.model.encoder=scratch:bert-tiny` changes the size. Sizes, optimizer and steps are
the main job's, so rows compare at equal steps and batch. Add `movienet` (raw MovieNet, with
--config.data.manual_dir=DIR) or `clips` for the real data.

Real weights (the paper's rows: BERT-base uncased, ALBERT-base v2): `encoder=<checkpoint>`
takes the encoder and its tokenizer from a checkpoint directory (or a $VNR_ENCODERS_DIR /
Hugging Face cache name; nothing downloads at run time), fine-tuned with §4.1's Setup, which
says it covers "all models" (AdamW, lr 1e-4, betas 0.9 / 0.999, eps 1e-6, 5 epochs of the
built train split), with the batch, weight decay and search every pretrained pair row of
Table 1 uses (`video_pairs.pair_training`: 8 clips x 8 pairs; ours, the paper gives none
for the baselines), utterances of up to 32 tokens (ours). The scratch encoders keep the
main job's loop at lr 3e-4:

    huggingface-cli download google-bert/bert-base-uncased --local-dir $CKPT/bert-base-uncased
    huggingface-cli download albert/albert-base-v2 --local-dir $CKPT/albert-base-v2
    python -m vnr.train --workdir runs/nsp_bert \
      --config configs/moviepuzzle/baselines.py:nsp_bert,movienet,encoder=$CKPT/bert-base-uncased \
      --config.data.manual_dir=$MOVIENET
    python -m vnr.train --workdir runs/sop_albert \
      --config configs/moviepuzzle/baselines.py:sop_albert,movienet,encoder=$CKPT/albert-base-v2 \
      --config.data.manual_dir=$MOVIENET

(the encoder and tokenizer are --config.model.encoder=DIR --config.data.tokenizer=DIR
--config.data.vocab_size=0 --config.data.max_tokens=32).
"""

import ml_collections

from configs import common
from configs.moviepuzzle import hcmc, main, video_pairs

ROWS = ("random", "nsp_bert", "sop_albert", "vision", "text", "early_fusion", "fusion")


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    args = common.parse_arg(arg, __file__, (*ROWS, "smoke", "clips", "movienet"),
                            {"encoder": str})
    row = args.pick(ROWS, "row")
    if row is None:
        raise args.error(f"needs exactly one row of {ROWS}, got none")
    c = hcmc.base_config(args)
    c.model.update(kind="pair", fusion="late")
    c.pairs_per_clip = 64
    if row == "random":
        c.model.kind = "random"
        c.total_steps = c.warmup_steps = 0
    elif row in ("nsp_bert", "sop_albert"):
        c.model.update(kind="text_pair", head=row[:3],
                       encoder="scratch:bert-small" if row == "nsp_bert" else
                       "scratch:albert-small")
        c.model.dropout = 0.1
        c.eval.objective = "path"  # both heads score consecutive pairs
        c.lr = 3e-4
        hcmc.select_by_validation(c)  # Table 1's Bert / AlBert rows
    else:
        c.model.update(pair_layers=1, modalities={"vision": ("vision",), "text": ("text",)}.get(
            row, ("vision", "text")), fusion="early" if row == "early_fusion" else "late")
    encoder = args.values.get("encoder")
    if encoder is not None:
        if c.model.kind != "text_pair":
            raise args.error(f"encoder=<checkpoint> goes with nsp_bert or sop_albert, not {row}")
        c.model.encoder = encoder
        c.data.update(tokenizer=encoder, vocab_size=0, max_tokens=32)
        video_pairs.pair_training(c)  # §4.1's optimiser and epochs (the paper's rows)
    if "smoke" in args:
        c.epochs = 0  # the smoke step count
        main.smoke(c)
        if c.model.kind == "text_pair" and c.model.encoder.startswith("scratch:"):
            c.model.encoder = c.model.encoder.replace("-small", "-tiny")
        if encoder is not None:  # tiny test checkpoints have 40 positions: pairs of 31
            c.data.max_tokens = 16
            c.warmup_steps = 0  # §4.1's constant lr (pair_training) has no warmup
        if row == "random":
            c.total_steps = c.warmup_steps = 0
    return c
