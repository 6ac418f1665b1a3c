"""M-SyMoN clip/sentence alignment (§5.1 Eq. 2 InfoNCE, Drop-DTW inference).

    python -m vnr.train --config configs/msymon/main.py[:ARGS] --workdir DIR \
        --config.data.manual_dir=RELEASE [--config.data.dim=512 ...]

ARGS is a comma-separated list of:
  multilingual     (default) train on every language's annotated train split together
  individual:<l>   train and validate on one language l in en, ch, es, fr, pt, hi, ru
  two_stage:<l>    stage 2 of the two-stage strategy: fine-tune on language l starting from
                   a multilingual run: add --config.init_from=<multilingual workdir>
  weak             also train on the `<lang>_weak` splits (subtitle timestamps, §4.4)
  window           the timestamp-window constraint of §6.5 at inference (eval.window_seconds)
  synthetic        the generated corpus with known alignment (no manual_dir; dim 32)
  smoke            tiny sizes for tests (implies synthetic unless a manual_dir is given)

Val/test splits are every language's `<lang>_val` / `<lang>_test`. The public release
withholds every test.json and only ru has a non-empty val.json: with it pass e.g.
`--config.data.val_split=ru_val --config.data.test_splits='("ru_val",)'` (a configured
split that does not exist is one error line before training). The
transcript-only baseline is reported next to the model (`transcript_*`) and runs alone,
without video, as
`python -m vnr.benchmarks.msymon.alignment baseline --data_dir D --manual_dir RELEASE`.
"""

import ml_collections

from configs import common

LANGUAGES = ("en", "ch", "es", "fr", "pt", "hi", "ru")


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    args = common.parse_arg(arg, __file__, ("multilingual", "weak", "window", "synthetic",
                                            "smoke"), ("individual", "two_stage"), sep=":")
    picked = {args.values[k] for k in ("individual", "two_stage") if k in args.values}
    lang = picked.pop() if len(picked) == 1 else None
    if picked or (args.values and lang not in LANGUAGES):
        raise args.error(f"individual:/two_stage: need one language in {LANGUAGES}, got "
                         f"{sorted(args.values.values())}")
    two_stage = "two_stage" in args.values
    synthetic = "synthetic" in args or "smoke" in args
    langs = (lang,) if lang else LANGUAGES

    c = common.base("msymon.alignment", batch_size=16, eval_batch_size=8, total_steps=3000,
                    warmup_steps=200, lr=3e-4)
    c.init_from = ""  # a workdir whose latest checkpoint initialises the model (two-stage)
    c.require_init_from = two_stage  # stage 2 without stage 1 is an error
    train = [f"{x}_train" for x in langs] + ([f"{x}_weak" for x in langs] if "weak" in args
                                             else [])
    c.data = dict(
        builder="msymon",
        config="synthetic" if synthetic else "features",
        data_dir="data/tfds",
        manual_dir="",
        features=True,
        dim=32 if synthetic else 512,  # feature width of features/<id>.npy
        fps=1.0,  # feature rows per second
        clip_seconds=3.0 if not synthetic else 2.0,
        train_split="+".join(train),
        val_split=f"{langs[0]}_val" if lang else "+".join(f"{x}_val" for x in LANGUAGES),
        test_splits=tuple(f"{x}_test" for x in langs),
        max_clips=128,  # training crop
        max_sentences=48,
        max_tokens=32,
        vocab_size=8192,
        num_workers=2,
    )
    c.model = dict(width=256, embed=256, text_layers=2, clip_layers=2, sentence_layers=1,
                   heads=4, dropout=0.1,
                   text_encoder="hash")  # or "scratch:bert-small", "scratch:xlm-roberta-tiny"
    c.loss = dict(temperature=0.07, num_negatives=16)
    c.eval.update(  # eval.max_*_clips count videos
        method="drop_dtw",  # or "argmax" (threshold tuned on val unless eval.threshold)
        drop="percentile",  # or a number: the drop cost of a clip / sentence
        keep_percentile=0.3,
        drop_sentences=True,  # two-sided Drop-DTW: unmatched sentences can be dropped
        window_seconds=10.0 if "window" in args else 0.0,
        threshold=None,
    )
    if two_stage:
        c.lr, c.total_steps, c.warmup_steps = 1e-4, 1000, 50
    if synthetic:
        c.data.val_split = "+".join(f"{x}_val" for x in langs)
        c.model.update(width=64, embed=64, text_layers=0, clip_layers=1, sentence_layers=0,
                       heads=2)
        c.data.update(max_clips=32, max_sentences=16, max_tokens=8, vocab_size=1024)
        c.loss.num_negatives = 8
        c.batch_size, c.total_steps, c.warmup_steps, c.lr = 16, 300, 20, 2e-3
        c.eval_every = c.ckpt_every = 150
    if "smoke" in args:
        c.data.num_workers = 0
        c.model.update(width=32, embed=32, clip_layers=1, heads=2)
        common.smoke(c, steps=(4, 1), every=2)
        c.eval.update(max_val_clips=6, max_test_clips=6)
        c.progress = False
    return c
