"""Movie101 MCN: RMN (role-aware narrator with the Eq. 1 role pointer), greedy decoding.

    python -m vnr.train --config configs/movie101/mcn.py[:ARGS] --workdir DIR

ARGS, comma-separated:
  smoke       tiny sizes for tests (a few steps on the tiny generated corpus)
  Table 3 rows (default: RMN = faces f_v + genre g + role pointer + OVP's memory bank):
  vt          Vanilla Transformer: video only, fixed encoder memory, no pointer
  ovp         OVP: video only, dynamic memory bank, no pointer
  no_faces    RMN w/o f_v (no frame face features)
  no_genre    RMN w/o g (no genre tokens); `no_faces,no_genre` is Table 3's first RMN row
  Our ablations / options (not rows of the paper):
  no_pointer  RMN without the role pointer (names must come from the vocabulary)
  no_bank     RMN with the fixed encoder memory instead of the memory bank
  uniform     64 frames sampled uniformly over a long clip instead of its first 40 s
  beam        beam search (5 beams) instead of upstream's greedy decoding
  plain_loss  cross-entropy, §4.4's MLE objective (the Table 3 rows), instead of upstream
              RMN's label smoothing 0.1 + unlikelihood
  aug         (with v1) train on narration_role/train_merge.json's augmentation clips too
              (split train_clips), as upstream's RMN training does
  v1          Movie101-N (v1_narration; add --config.data.manual_dir=<Movie101v1 with features/>)
  v2          Movie101v2 short Chinese narrations (v2_short_zh; manual_dir=<Movie101v2/data>)
  en          with v2: the English narrations (v2_short_en)
  mnscore     also report BERTScore, EMScore and MNScore (Eq. 2) with the checkpoints below
  em_features (with mnscore) EMScore by OpenAI CLIP's text tower against the release's CLIP
              frame features instead of Chinese-CLIP on 10 frames a clip of the videos
              (always for English narrations: `v2,en` and the generated corpus)

Frames: the paper rows keep a clip's first 40 one-second feature rows (upstream's reader,
`max_v_l = 40`; 168 of the 1,416 val paragraphs are longer); text: at most 150 tokens + EOS
(upstream's `max_words_in_sent = 150`). Training data of the paper rows: Movie101-N train
(the paper is silent on upstream's augmentation clips: `aug`). Where the paper is silent the
rows follow upstream RMN (Movie101v1/baseline/RMN): d_model 512, 3 + 3 layers, 8 heads
(modules/transformer.py TransformerConfig), FFN 2048 (modules/common.py FeedForward),
dropout 0.1, up to 4 genre tokens (modules/transformer_encoder.py TagsEncoder, tags_len 4),
greedy decoding (models/transformer.py evaluate). The loss: the rows add `plain_loss`, §4.4's
MLE; without it, upstream RMN's label smoothing 0.1 + unlikelihood (models/transformer.py
build_loss).

Defaults train on the generated `synthetic_narration` corpus (planted role/face signal, built
on first use into data.data_dir). Real data needs the release's features (see
tfds_builders/movie101/README.md): frame_dim = 512 + 1024, face_dim = 512.

MNScore with real checkpoints. Nothing is downloaded at run time: fetch the directories once
where there is internet and put them under $VNR_ENCODERS_DIR (default
~/.cache/vnr/encoders), named as below, or pass a directory to the eval.* key:

  huggingface-cli download OFA-Sys/chinese-clip-vit-huge-patch14 \
      --local-dir ~/.cache/vnr/encoders/chinese-clip-vit-huge-patch14  # eval.clip_model
  huggingface-cli download openai/clip-vit-base-patch32 \
      --local-dir ~/.cache/vnr/encoders/clip-vit-base-patch32      # em_features
  huggingface-cli download google-bert/bert-base-chinese \
      --local-dir ~/.cache/vnr/encoders/bert-base-chinese          # eval.bert_model (zh)
  huggingface-cli download FacebookAI/roberta-large \
      --local-dir ~/.cache/vnr/encoders/roberta-large              # eval.bert_model (en)

(each needs config.json, model.safetensors or flax_model.msgpack, and its tokenizer files:
vocab.json + merges.txt for CLIP/RoBERTa, vocab.txt for BERT). Then

  python -m vnr.train --config configs/movie101/mcn.py:v1,mnscore --workdir DIR \
      --config.data.manual_dir=<Movie101v1 with features/> \
      --config.eval.clip_weights=<cnclip-huge-movie101.pt> --config.data.videos=<videos>

`mnscore` scores EMScore as upstream's evaluation/README.md: Chinese-CLIP (the directory
gives the architecture, tokenizer and processor; eval.clip_weights upstream's
Movie101-fine-tuned training checkpoint, from CNCLIP+RNL/README.md's link, read without
torch) on eval.em_frames = 10 frames a clip (Appendix C) decoded from data.videos
(<movie_id>.mp4, default <manual_dir>/videos; vnr/benchmarks/movie101/emscore.py); with
`em_features`, eval.clip_model=clip-vit-base-patch32 against the release's 512-d CLIP frame
features (use clip-vit-base-patch16 if yours came from B/16). BERTScore is bert_score's
`--lang zh --rescale_with_baseline` (bert-base-chinese, layer 8, baseline 0.54755783) or,
for English (`v2,en`; the generated corpus), `--lang en` (roberta-large, layer 17, baseline
0.83122575; bert_score adds a prefix space to RoBERTa's first word, we do not).
Without eval.clip_weights, EMScore is the base Chinese-CLIP's, not upstream's fine-tuned
one's; with `em_features` it compares our runs with each other only.
"""

import ml_collections

from configs import common
from tfds_builders.movie101 import feature_dims

ARGS = ("smoke", "vt", "ovp", "no_faces", "no_genre", "no_pointer", "no_bank", "v1", "v2", "en",
        "mnscore", "em_features", "uniform", "aug", "beam", "plain_loss")


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    args = common.parse_arg(arg, __file__, ARGS)
    release = args.pick(("v1", "v2"), "release")
    real = release is not None
    config, movies = {None: ("synthetic_narration", "synthetic_movies"),
                      "v1": ("v1_narration", "v1_movies"),
                      "v2": ("v2_short_en" if "en" in args else "v2_short_zh", "v2_movies")
                      }[release]
    if "aug" in args and release != "v1":
        raise args.error("aug adds Movie101v1's train_merge.json augmentation clips: add v1")
    model = args.pick(("vt", "ovp"), "model") or "rmn"
    if model != "rmn" and args.flags & {"no_faces", "no_genre", "no_pointer", "no_bank"}:
        raise args.error(f"{model} has no faces, genre, pointer or bank to drop; the "
                         "ablation flags go with RMN")
    # Appendix C: VT batch 150, OVP / RMN 56, lr 1e-4, <= 100 epochs: 100 epochs of the
    # built train split (`mcn.validate` turns them into steps); the generated corpus: our
    # small preset in steps
    c = common.base("movie101.mcn", total_steps=20000 if real else 600,
                    warmup_steps=100 if real else 30, lr=1e-4 if real else 2e-3, b2=0.98,
                    eval_every=2000 if real else 300, ckpt_every=2000 if real else 300)
    c.epochs = 100 if real else 0
    if real:
        c.batch_size = 150 if model == "vt" else 56
    c.data = dict(
        config=config, movies_config=movies, data_dir="data/tfds", manual_dir="",
        train_split="train+train_clips" if "aug" in args else "train", val_split="val",
        test_splits=("test",),
        # upstream: the first max_v_l = 40 s of a clip, max_words_in_sent = 150 (+ EOS)
        max_frames=(64 if "uniform" in args else 40) if real else 12,
        frame_sampling="uniform" if "uniform" in args else "first",
        max_tokens=150 if real else 12,
        vocab_size=8000 if real else 64, max_roles=16 if real else 6, max_genres=4, genres=64,
        faces=0 if model != "rmn" or "no_faces" in args else 3,
        pointer=model == "rmn" and "no_pointer" not in args, num_workers=0,
        videos="",  # EMScore's frames (eval.em_source="videos"): default <manual_dir>/videos
        l2_frames=True,  # upstream L2-normalises each second's CLIP ⊕ S3D ⊕ faces row
    )
    # upstream's TransformerConfig for real data (d_model 512, 3 + 3 layers, 8 heads) and
    # FeedForward's d_ff 2048; smaller for the generated corpus
    c.model = dict(width=512 if real else 256, enc_layers=3 if real else 2,
                   dec_layers=3 if real else 2, heads=8 if real else 4,
                   mlp=2048 if real else 1024, dropout=0.1,
                   genre_token=model == "rmn" and "no_genre" not in args,
                   memory_bank=model == "ovp" or (model == "rmn" and "no_bank" not in args),
                   label_smoothing=0.0 if "plain_loss" in args else 0.1,
                   unlikelihood="plain_loss" not in args)
    common.evals(c, val_max=256)
    if real:  # the paper does not say how a model is selected (Appendix C: "<= 100"
        # epochs); ours: the step of best validation CIDEr-D (every run has it, not MNScore)
        c.select = dict(metric="val/cider_d", mode="max")
    c.eval.update(beam_size=5 if "beam" in args else 1, alpha=0.0, bert_model="", bert_layer=0,
                  bert_baseline=-1.0, clip_model="", clip_weights="", em_source="videos",
                  em_frames=10, em_idf=False, mnscore_em="fine")
    if "em_features" in args and "mnscore" not in args:
        raise args.error("em_features changes how mnscore scores EMScore: add mnscore")
    if "mnscore" in args:
        english = not real or (release == "v2" and "en" in args)  # generated corpus: English
        bert = ("roberta-large", 17, 0.83122575) if english else \
            ("bert-base-chinese", 8, 0.54755783)
        c.eval.update(bert_model=bert[0], bert_layer=bert[1], bert_baseline=bert[2],
                      clip_model="chinese-clip-vit-huge-patch14")
        if "em_features" in args or english:  # Chinese-CLIP reads Chinese text only
            c.eval.update(clip_model="clip-vit-base-patch32", em_source="features")
    if "smoke" in args:
        if not real:
            c.data.update(config="synthetic_tiny_narration", movies_config="synthetic_tiny_movies")
        c.data.update(max_frames=8, max_tokens=10)
        c.model.update(width=32, enc_layers=1, dec_layers=1, heads=2, mlp=64, dropout=0.0)
        common.smoke(c)
        c.evals.val.max_examples, c.evals.test.max_examples = 8, 10
        c.eval.beam_size = 2 if "beam" in args else 1
    # the feature widths are the builder's (BuilderConfig), never a second literal here
    c.data.frame_dim, c.data.face_dim = feature_dims(c.data.movies_config)
    return c
