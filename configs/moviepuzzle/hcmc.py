"""MoviePuzzle HCMC rows (Tables 1, 2, 3, 10 and Appendix E), one command each:

    python -m vnr.train --config configs/moviepuzzle/hcmc.py[:ARGS] --workdir DIR

ARGS is a comma-separated list of:
  levels      frame_shot (default), frame_scene, frame_shot_scene, frame (no hierarchy)
  ablations   no_shot (drop the shot level), no_cl (λ = 0: "w/o CL"), no_text, no_vision
  Table 3     euclidean (default), cosine, softdtw: k-means distance at inference
  Table 10    lambda=<v>: λ of Eq. 4 (default 0.75)
  Appendix E  separate_mlp, separate_transformer: one frame encoder + pair model per level
  encoders    clip: scratch CLIP towers (`vnr.models.encoders`) instead of the small ones;
              clip=<checkpoint>: pretrained CLIP towers (image + text) as frozen feature
              extractors, subtitles through CLIP's own tokenizer (32 tokens), 224x224
              frames; add `finetune` to train the towers too (see "Real weights" below)
  inference   silhouette: estimate cluster counts (default: ground-truth counts, as the
              seed code); exact: exact subset DP instead of beam search (width 10)
  sizes       paper: Table 7 sizes (transformer 2 layers, hidden 512, 8 heads; for GPU/TPU)
  data        clips: the public per-clip release (add --config.data.manual_dir=DIR and its
              split names); movienet: raw MovieNet curated by the builder (add
              --config.data.manual_dir=DIR); smoke: tiny sizes for tests

Defaults are CPU sizes matching the main job (configs/moviepuzzle/main.py) so the rows are
comparable to its "+fusion" baseline at equal steps and batch.

Real weights (the paper's CLIP ViT-B/32 features). Nothing downloads at run time: fetch the
checkpoint once where there is internet, e.g.

    huggingface-cli download openai/clip-vit-base-patch32 --local-dir $CKPT/clip-vit-base-patch32

(config.json, model.safetensors, vocab.json, merges.txt, tokenizer files), then pass the
directory (or put it under $VNR_ENCODERS_DIR/clip-vit-base-patch32 and pass that name). A
fresh run loads both towers into the sharded state (`vnr/pretrained.py`; a resumed run takes
them from its checkpoint) and freezes them (`config.frozen`). Table 1 HCMC rows on MovieNet:

    CLIP=$CKPT/clip-vit-base-patch32
    python -m vnr.train --workdir runs/hcmc_fs \
      --config configs/moviepuzzle/hcmc.py:frame_shot,paper,movienet,clip=$CLIP \
      --config.data.manual_dir=$MOVIENET
    # frame+scene / frame+shot+scene: replace frame_shot by frame_scene / frame_shot_scene;
    # Table 2 ablations: add no_shot, no_cl, no_text or no_vision; Table 3: add cosine or
    # softdtw; Table 10: add lambda=<v>; same clip=... in every row.

The CLI equivalent of clip=DIR is --config.model.image_encoder=DIR
--config.model.text_encoder=DIR --config.data.tokenizer=DIR --config.data.vocab_size=0
--config.data.max_tokens=32 --config.data.image_size=224 and config.frozen set to the
towers' paths (`pretrained_clip` below: encoders.<level>.image / .text).
"""

import ml_collections

FLAGS = {"frame_shot", "frame_scene", "frame_shot_scene", "frame", "no_shot", "no_cl",
         "no_text", "no_vision", "euclidean", "cosine", "softdtw", "separate_mlp",
         "separate_transformer", "clip", "finetune", "silhouette", "exact", "paper", "clips",
         "movienet", "smoke"}
VALUES = {"lambda", "clip"}


def parse(arg: str | None, allowed: set[str], path: str) -> tuple[set[str], dict[str, str]]:
    """Comma-separated flags and key=value pairs; unknown ones raise ValueError."""
    flags, values = set(), {}
    for a in (arg or "").split(","):
        a = a.strip()
        if not a:
            continue
        if "=" in a:
            k, v = a.split("=", 1)
            values[k.strip()] = v.strip()
        else:
            flags.add(a)
    unknown = flags - allowed
    if unknown:
        raise ValueError(f"unknown config arg(s) {sorted(unknown)} for {path}")
    return flags, values


def base_config(args: set[str]) -> ml_collections.ConfigDict:
    """Data, optimizer, loop and eval settings shared by every MoviePuzzle row."""
    c = ml_collections.ConfigDict()
    c.task = "moviepuzzle.hcmc"
    c.seed = 0
    if {"clips", "movienet"} <= args:
        raise ValueError("pick clips or movienet, not both")
    source = "clips" if "clips" in args else "movienet" if "movienet" in args else "synthetic"
    c.data = dict(builder="moviepuzzle", config=source,
                  data_dir="data/tfds", manual_dir="", train_split="train", val_split="val",
                  test_splits=("test_in_domain", "test_out_domain"), max_frames=20,
                  image_size=64, max_tokens=16, vocab_size=4096, num_workers=2, augment=True,
                  tokenizer="hash")  # or a checkpoint directory: its tokenizer (vnr.data.text)
    c.model = dict(kind="hcmc", modalities=("vision", "text"), stem=4, conv="patch",
                   channels=(32, 64, 64), width=128, text_layers=0, pair_layers=2, heads=4,
                   mlp=256, dropout=0.1)
    c.pairs_per_clip = 64
    c.frozen = ()  # regexes of parameter paths kept fixed (vnr/pretrained.py)
    c.batch_size = c.eval_batch_size = 32
    c.total_steps, c.warmup_steps = 1000, 50
    c.lr, c.weight_decay, c.b1, c.b2, c.grad_clip = 1e-3, 0.05, 0.9, 0.999, 1.0
    c.mesh = dict(shape=(-1, 1), axes=("data", "model"))
    c.sharding_rules = (("mlp", "model"), ("heads", "model"), ("vocab", "model"))
    c.log_every, c.eval_every, c.ckpt_every, c.keep_ckpts = 25, 500, 500, 2
    c.best_metric, c.best_mode, c.progress = "", "max", True
    c.eval = dict(max_val_clips=200, max_test_clips=0, search="exact" if "exact" in args
                  else "beam", beam_size=10, objective="linear", report_clips=4)
    return c


def smoke(c: ml_collections.ConfigDict) -> None:
    c.data.config = "synthetic_tiny" if c.data.config == "synthetic" else c.data.config
    c.data.num_workers = 0
    c.data.image_size = 16
    c.model.update(stem=1, channels=(8, 16), width=32, mlp=64, heads=2)
    c.pairs_per_clip = 8
    c.batch_size = c.eval_batch_size = 8
    c.total_steps, c.warmup_steps = 6, 2
    c.log_every = c.eval_every = c.ckpt_every = 3
    c.eval.update(max_val_clips=8, max_test_clips=10, report_clips=2)


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    args, values = parse(arg, FLAGS, "configs/moviepuzzle/hcmc.py")
    if set(values) - VALUES:
        raise ValueError(f"unknown config value(s) {sorted(set(values) - VALUES)} for "
                         "configs/moviepuzzle/hcmc.py (only lambda=<v>, clip=<checkpoint>)")
    if "clip" in args and "clip" in values:
        raise ValueError("pass clip (scratch CLIP towers) or clip=<checkpoint>, not both")
    if "finetune" in args and "clip" not in values:
        raise ValueError("finetune goes with clip=<checkpoint>")
    c = base_config(args)
    picked = args & {"frame_shot", "frame_scene", "frame_shot_scene", "frame"}
    if len(picked) > 1:
        raise ValueError(f"pick one level set, got {sorted(picked)}")
    levels = {"frame_shot": ("frame", "shot"), "frame_scene": ("frame", "scene"),
              "frame_shot_scene": ("frame", "shot", "scene"), "frame": ("frame",)}[
        picked.pop() if picked else "frame_shot"]
    if "no_shot" in args:
        levels = tuple(lv for lv in levels if lv != "shot")
    if {"no_text", "no_vision"} <= args:
        raise ValueError("pass 'no_text' or 'no_vision', not both")
    modalities = ("vision",) if "no_text" in args else ("text",) if "no_vision" in args \
        else ("vision", "text")
    distances = args & {"euclidean", "cosine", "softdtw"}
    if len(distances) > 1:
        raise ValueError(f"pick one distance, got {sorted(distances)}")
    if {"separate_mlp", "separate_transformer"} <= args:
        raise ValueError("pick separate_mlp or separate_transformer, not both")
    encoder = "scratch:clip-tiny" if "clip" in args else "small"
    c.model.update(levels=levels, modalities=modalities, image_encoder=encoder,
                   text_encoder=encoder, cluster_dim=64,
                   pair_arch="mlp" if "separate_mlp" in args else "transformer",
                   separate=bool(args & {"separate_mlp", "separate_transformer"}))
    if "paper" in args:
        c.model.update(width=512, heads=8, pair_layers=2, mlp=2048)
    c.within_frac = 0.5
    c.use_cl = "no_cl" not in args
    try:
        c.cl_lambda = float(values.get("lambda", 0.75))
    except ValueError as e:
        raise ValueError(f"lambda={values['lambda']!r} is not a number") from e
    c.cl_tau = 0.1
    c.cl_negatives = 8
    c.eval.update(cluster_count="silhouette" if "silhouette" in args else "gt",
                  distance=distances.pop() if distances else "euclidean", max_clusters=8,
                  min_silhouette=0.5, dtw_segments=4, dtw_gamma=0.1, max_pairs=16384)
    if "clip" in values:
        pretrained_clip(c, values["clip"], finetune="finetune" in args)
    if "smoke" in args:
        smoke(c)
        c.model.cluster_dim = 16
        if "clip" in values:  # tiny test checkpoints have 16 text positions
            c.data.max_tokens = 16
    return c


def pretrained_clip(c: ml_collections.ConfigDict, checkpoint: str, finetune: bool) -> None:
    """Both towers and the tokenizer from a CLIP checkpoint; towers frozen unless finetune."""
    c.model.update(image_encoder=checkpoint, text_encoder=checkpoint)
    c.data.update(tokenizer=checkpoint, vocab_size=0, max_tokens=32, image_size=224)
    towers = {"vision": "image", "text": "text"}
    if not finetune:
        c.frozen = tuple(rf"encoders\.\w+\.{towers[m]}\." for m in c.model.modalities)
