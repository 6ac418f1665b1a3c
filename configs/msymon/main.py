"""M-SyMoN clip/sentence alignment (§5.1 Eq. 2 InfoNCE, Drop-DTW inference, §5.2 regimes).

    python -m vnr.train --config configs/msymon/main.py[:ARGS] --workdir DIR \
        --config.data.manual_dir=RELEASE [--config.data.dim=512 ...]

ARGS is a comma-separated list of one training regime (§5.2, Table 3) and options:
  multilingual       (default) the weak data (§4.4: `<l>_weak`) of all 7 languages together
  individual:<l>     the weak data of one language l in en, ch, es, fr, pt, hi, ru
  translate          the weak data of all languages translated to English: manual_dir is
                     the translated release (`python -m vnr.benchmarks.msymon.translate`),
                     built under data/tfds_translated so it never mixes with the original
  translate_supervision  fine-tune a translate run (--config.init_from=RUN) on the
                     translated annotated train splits of all languages
  two_stage:<l>      fine-tune a translate run (--config.init_from=RUN) on l's weak data
  two_stage_supervision:<l>  fine-tune a two_stage:<l> run on l's annotated train split
  annotated          (ours) train on the annotated `<l>_train` splits instead of the weak data
  cclm               §5.1's model (every paper row): clips from the release's videos (builder
                     config `videos`), 3 frames per clip (at random of a stored pool of 9 in
                     training, the centres of the clip's thirds at evaluation: ours) through
                     CCLM's Swin-B, the mean over the frames; sentences through CCLM's XLM-R
                     text layers, their [CLS]; both towers from CCLM's checkpoint
                     (--config.model.cclm_checkpoint=FILE.th; the XLM-R tokenizer:
                     --config.data.tokenizer=DIR). Without it (the default, ours) clips are
                     per-second features (features/<id>.npy) and the text encoder is
                     model.text_encoder (`vnr/benchmarks/msymon/frames.py`, README)
  paper              §6.1's hyperparameters: AdamW, lr 4e-5 (4e-6 when fine-tuning a run),
                     cosine decay, no warmup, weight decay 0.2, 20 epochs of the built train
                     split (an epoch: draws seeing its clips once in expectation); with
                     `cclm`, its random augmentation (CCLM's training transform of every
                     frame, `vnr.ops.randaugment`)
  window             §6.5: clips may only match sentences narrated within eval.window = 1 s
                     (on estimated narration times, without subtitle times, the metrics are
                     `estimated_*`, and `paper` then selects on val/estimated_f1)
  percentile         (ours) drop costs from the Drop-DTW authors' per-video percentile rule
                     instead of the tuned (eval.d_v, eval.d_t)
  context            (ours) transformer layers across a video's clips (2) and across its
                     sentences (1) before the projections; the paper encodes each clip and
                     each sentence on its own, so every paper row runs without them
  punctuation        a different task: Appendix C's punctuation restoration
                     (`vnr/benchmarks/msymon/punctuation.py`; data.corpus, model.encoder)
  shots / grid       clips are the video's shots (Appendix A: TransNetV2's hard cuts in
                     cuts/<id>.txt, `python -m vnr.extract --model transnetv2`; the default
                     with `cclm`) or consecutive data.clip_seconds clips (ours; the default
                     of the feature model)
  synthetic          the generated corpus with known alignment (no manual_dir; dim 32)
  smoke              tiny sizes for tests (implies synthetic: the generated corpus; with a
                     manual_dir, set data.config to the release's config)

Val/test splits are the regime's languages' `<l>_val` / `<l>_test`. The public release has
test.json for every language but an empty val.json for every language except ru: the builder
then carves a validation set from the language's train videos by movie (logged, counted as
`kept_val_carved_from_train`; tfds_builders/msymon/README.md). Inference (Appendix E.1):
Drop-DTW on d = 1 - cosine with drop costs eval.d_v (clip) and eval.d_t (sentence). The paper
calls them hyperparameters without values or a selection rule; ours: tuned for F1 on the val
split when eval.drop="tune" (the default; reported as `d_v`, `d_t`, `tuned_on_videos`, with a
warning under 10 val videos, which the carved val splits are). Loss: Eq. 2 as printed, the sum
of the two directions (`loss.directions="mean"`: ours, their mean). The transcript-only
baseline is reported next to the model
(`transcript_*`) and runs alone, without video, as
`python -m vnr.benchmarks.msymon.tools baseline --data_dir D --manual_dir RELEASE`.
A run fine-tuned from another (`init_from`) starts from that run's model at
`--config.init_step`: `selected` (default), the step its results.json reports (its best
validation F1 under `paper`); or best, last, a step number (as `python -m vnr.evaluate --step`).
"""

import ml_collections

from configs import common

LANGUAGES = ("en", "ch", "es", "fr", "pt", "hi", "ru")
REGIMES = ("multilingual", "translate", "translate_supervision")
PER_LANGUAGE = ("individual", "two_stage", "two_stage_supervision")
FROM_RUN = ("translate_supervision", "two_stage", "two_stage_supervision")


def _regime(args) -> tuple[str, str | None]:
    picked = [r for r in REGIMES if r in args] + [r for r in PER_LANGUAGE if r in args.values]
    if len(picked) > 1:
        raise args.error(f"one training regime, got {picked}")
    regime = picked[0] if picked else "multilingual"
    return regime, args.values.get(regime)  # a language of LANGUAGES (parse_arg checks it)


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    args = common.parse_arg(arg, __file__, (*REGIMES, "annotated", "paper", "window",
                                            "percentile", "context", "synthetic", "smoke",
                                            "punctuation", "cclm", "grid", "shots"),
                            dict.fromkeys(PER_LANGUAGE, LANGUAGES), sep=":")
    if "punctuation" in args:
        return punctuation_config("smoke" in args)
    regime, lang = _regime(args)
    synthetic = "synthetic" in args or "smoke" in args
    langs = (lang,) if lang else LANGUAGES
    supervised = regime.endswith("supervision") or "annotated" in args
    translated = regime.startswith("translate")

    c = common.base("msymon.alignment", batch_size=16, eval_batch_size=8, total_steps=3000,
                    warmup_steps=200, lr=3e-4)
    c.regime = regime
    c.epochs = 0  # > 0: total_steps from the built train split's videos (`paper`: 20)
    c.init_from = ""  # a workdir whose model initialises the whole model
    c.init_step = "selected"  # its step: what its results.json reports, best, last or N
    c.require_init_from = regime in FROM_RUN  # fine-tuning without its first run is an error
    split = "train" if supervised else "weak"
    c.data = dict(
        builder="msymon",
        config="synthetic" if synthetic else "features",
        data_dir="data/tfds_translated" if translated else "data/tfds",
        manual_dir="",
        translated=translated,  # manual_dir is a release translated to English
        features=True,
        dim=32 if synthetic else 512,  # feature width of features/<id>.npy
        fps=1.0,  # feature rows per second
        clip_seconds=3.0 if not synthetic else 2.0,
        # clips: "shots" (Appendix A: TransNetV2's shots, cuts/<id>.txt; the `cclm` paper rows)
        # or "grid" (consecutive clip_seconds clips: ours, the feature model's default)
        clips="shots" if "shots" in args else "grid",
        train_split="+".join(f"{x}_{split}" for x in langs),
        val_split="+".join(f"{x}_val" for x in langs),
        test_splits=tuple(f"{x}_test" for x in langs),
        max_clips=128,  # training crop
        max_sentences=48,
        max_tokens=32,
        vocab_size=8192,
        tokenizer="hash",  # a checkpoint text encoder needs its own: the same name as it
        num_workers=2,
        # clips from frames (`cclm`, frames.py): per_clip frames of a stored pool per clip
        frames=dict(per_clip=0, pool=9, image_size=224, interpolation="bicubic",
                    pick="shown", workers=-1,
                    augment="none"),  # "cclm": CCLM's training transform (`paper` + `cclm`)
    )
    # clip_layers / sentence_layers: context across a video's clips / sentences (`context`,
    # ours); 0 = each clip and sentence encoded on its own, as the paper's model.
    context = "context" in args
    c.model = dict(width=256, embed=256, text_layers=2, clip_layers=2 if context else 0,
                   sentence_layers=1 if context else 0, heads=4, dropout=0.1,
                   text_encoder="hash",  # or "scratch:bert-small", or a checkpoint (the
                   # paper's XLM-R; set data.tokenizer to the same name; weights via the
                   # pretrained hook)
                   encoder="features",  # or "cclm": §5.1's towers (the `cclm` arg)
                   cclm_checkpoint="",  # CCLM's released .th (both towers)
                   cclm_head="none",  # the towers' features compared directly; "linear" (ours)
                   # CCLM-base's sizes (configs/config_swinB_224.json, 6 text layers of
                   # XLM-R large); the loader refuses a checkpoint of other shapes
                   swin=dict(image_size=224, embed_dim=128, depths=(2, 2, 18, 2),
                             num_heads=(4, 8, 16, 32), window_size=7),
                   cclm_text=dict(vocab_size=250002, hidden_size=1024, layers=6, heads=16,
                                  intermediate_size=4096, max_positions=514),
                   image_chunk=32)  # clips per Swin call at evaluation (memory)
    c.loss = dict(temperature=0.07, num_negatives=16,  # K: the paper gives no value (ours)
                  directions="sum")  # Eq. 2 as printed; "mean" halves it (ours)
    common.evals(c)  # max_examples counts videos
    c.eval.update(
        method="drop_dtw",  # or "argmax" (threshold tuned on val unless eval.threshold)
        # "tune": (d_v, d_t) by grid search for F1 on val (Appendix E.1); "fixed": eval.d_v
        # and eval.d_t as given; "percentile" (ours): both from the per-video percentile rule
        drop="percentile" if "percentile" in args else "tune",
        d_v=0.5,  # cost of dropping a clip (fixed), on the distance d = 1 - cosine
        d_t=0.5,  # cost of dropping a sentence (fixed)
        drop_grid=(0.1, 0.3, 0.5, 0.7, 0.9, 1.1, 1.3, 1.5),  # candidates of d_v and d_t
        keep_percentile=0.3,
        drop_sentences=True,  # two-sided Drop-DTW: unmatched sentences can be dropped
        contiguous=True,  # no dropped clip between two clips of one sentence
        window=1.0 if "window" in args else 0.0,  # §6.5: seconds around the narration
        threshold=None,
    )
    if regime in FROM_RUN:  # fine-tuning a run (ours unless `paper`)
        c.lr, c.total_steps, c.warmup_steps = 1e-4, 1000, 50
    if "cclm" in args:
        _cclm(c, regime in FROM_RUN)
        c.data.clips = "grid" if "grid" in args else "shots"
    elif "grid" in args and "shots" in args:
        raise args.error("grid and shots are two ways to cut clips: name one")
    if "paper" in args:  # §6.1
        c.optimizer, c.schedule, c.warmup_steps, c.end_lr_factor = "adamw", "cosine", 0, 0.0
        c.lr = 4e-6 if regime in FROM_RUN else 4e-5
        c.weight_decay = 0.2
        c.epochs = 20  # an epoch: draws seeing every training clip once in expectation
        if "cclm" in args:  # "random augmentation": CCLM's training transform of each frame
            c.data.frames.augment = "cclm"
        # the paper does not say how a model is selected; ours: best validation F1; with the
        # window on estimated narration times the evaluator reports it as estimated_f1
        c.select = dict(metric="val/f1|val/estimated_f1" if "window" in args else "val/f1",
                        mode="max")
    if synthetic:
        c.epochs = 0
        c.model.update(width=64, embed=64, text_layers=0, clip_layers=int(context),
                       sentence_layers=0, heads=2)
        c.data.update(max_clips=32, max_sentences=16, max_tokens=8, vocab_size=1024)
        c.loss.num_negatives = 8
        c.batch_size, c.total_steps, c.lr = 16, 300, 2e-3
        c.warmup_steps = 0 if "paper" in args else 20
        c.eval_every = c.ckpt_every = 150
    if "smoke" in args:
        c.epochs = 0
        c.data.num_workers = 0
        c.model.update(width=32, embed=32, clip_layers=int(context), heads=2)
        common.smoke(c, steps=(4, 0 if "paper" in args else 1), every=2)
        c.evals.val.max_examples, c.evals.test.max_examples = 6, 6
        c.eval.drop_grid = (0.3, 0.7, 1.1)
        c.progress = False
    return c


def _cclm(c: ml_collections.ConfigDict, from_run: bool) -> None:
    """§5.1's model (the `cclm` arg). Sizes the paper leaves open are ours: a training window
    of 32 clips (a batch of 8 videos: 768 frames a step), CCLM's 40 tokens a sentence, a
    fine-tuning lr (4e-5, §6.1's; 4e-6 from a run) without `paper`, the Swin and XLM-R
    layers recomputed in the backward pass (`remat`)."""
    c.data.update(config="videos", features=False, tokenizer="", max_clips=32, max_tokens=40)
    c.data.frames.per_clip = 3
    c.model.update(encoder="cclm", text_encoder="cclm")  # the text tower is CCLM's
    c.batch_size, c.eval_batch_size = 8, 2
    c.lr = 4e-6 if from_run else 4e-5
    c.remat = "towers"


def punctuation_config(smoke: bool = False) -> ml_collections.ConfigDict:
    """Appendix C: XLM-R large token classification (period / comma / question mark after
    each word, after each character in scripts written without spaces). The paper gives no
    training hyperparameters: these are ours. `model.encoder` names a local checkpoint
    (XLM-RoBERTa-large as the paper; any XLM-R/BERT directory with its tokenizer)."""
    c = common.base("msymon.punctuation", batch_size=32, eval_batch_size=32, total_steps=20000,
                    warmup_steps=1000, lr=3e-5)
    c.init_from = ""  # a punctuation run (to restore subtitles with it)
    c.init_step = "selected"  # its step: what its results.json reports, best, last or N
    c.data = dict(corpus="", max_tokens=128)  # corpus: one punctuated paragraph per line
    c.data.val_split, c.data.test_splits = "val", ("test",)
    common.evals(c)
    c.model = dict(encoder="FacebookAI/xlm-roberta-large")  # the paper's; local only
    if smoke:
        common.smoke(c, batch=8, steps=(2, 0), every=2)
        c.data.max_tokens = 16
        c.progress = False
    return c
