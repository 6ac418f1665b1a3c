"""MoviePuzzle HCMC rows (Tables 1, 2, 3, 10 and Appendix E), one command each:

    python -m vnr.train --config configs/moviepuzzle/hcmc.py[:ARGS] --workdir DIR

Every row runs the paper's method (vnr/benchmarks/moviepuzzle/REPRODUCING.md): Algorithm 3
per-start beam search (width 10) on "directly before" scores (`eval.objective="path"`,
`eval.starts="per_start"`), Eq. 3 as printed (raw dot products, `cl_form="dot"`),
concatenated frame features for shots (`model.shot_pool="concat"`), k-means with random
initial centres and up to 1000 steps, lambda = 1.0 (Tables 1/2 = Table 10's 1.00 row).

ARGS is a comma-separated list of:
  levels      frame_shot (default), frame_scene, frame_shot_scene, frame (no hierarchy)
  ablations   no_shot (drop the shot level; frame pairs across the clip, no shot ids),
              no_cl (lambda = 0: "w/o CL"), no_text, no_vision
  Table 3     euclidean (default), cosine, softdtw: k-means distance at inference
  Table 10    lambda=<v>: lambda of Eq. 4 (default 1.0; 0.75 is Table 10's best)
  Appendix E  separate_mlp, separate_transformer: one frame encoder + pair model per level
              (Tables 8, 9; with `paper`, one block / one hidden layer: "a simple
              transformer block", "a simple MLP"); evaluate a level alone with
              --config.eval.alone=shot (every other level from the ground truth), or fewer
              levels with --config.eval.levels='("frame","shot")'
  encoders    clip: scratch CLIP towers (`vnr.models.encoders`) instead of the small ones;
              clip=<checkpoint>: pretrained CLIP towers (image + text), subtitles through
              CLIP's own tokenizer (32 tokens), 224x224 frames; frozen unless `finetune`
              or `paper` (the paper trains them end to end, §3.2)
  inference   silhouette: estimate cluster counts (default: ground-truth counts, as the
              seed code); exact: exact subset DP instead of beam search (clips <= 20 frames)
  frozen      freeze=image|text|image+text: keep those towers fixed (ours); cached: read the
              frozen towers' outputs from the feature cache built once by
              `python -m vnr.cache_features --config <same>` (no JPEG decode, no tower pass;
              data.augment off)
  presets     paper: Table 7 (2 layers, hidden 512, 8 heads of 64, lr 1e-4, batch 8 clips
              of pairs_per_clip = 64 pairs per level, 5 epochs of the built train split
              (`epochs`), AdamW eps 1e-6 / 0.9 / 0.999, weight decay 0.01, no warmup, constant
              lr, no clipping, k-means 1000 steps Euclidean, towers trained), §3.2's ψ(P) and
              ϕ(P) in R_+ (softmax / softplus outputs) and, with CLIP towers (`clip`,
              `clip=`), frames as token sequences (`model.frame_repr="tokens"`; not
              `separate_mlp`: its MLP reads one pooled vector per frame), and none of
              our additions: no training augmentation (the paper names none); any config
              value that contradicts it is named once in a warning (`hcmc.validate`).
              ours: our training choices instead of the paper's (linear objective, shared
              beam, cosine/tau Eq. 3, mean-pooled shots, k-means++ x 100, lambda 0.75)
  augment     our training augmentation (clip-consistent horizontal flip + colour-channel
              permutation, `data.AugmentClip`), an addition the paper does not make: on by
              default without `paper` (the main job's), off with `paper` unless this flag
              is given (such a run is not a paper row)
  data        clips: the public per-clip release (add --config.data.manual_dir=DIR and its
              split names); movienet: raw MovieNet curated by the builder (add
              --config.data.manual_dir=DIR); smoke: tiny sizes for tests

Without `paper` the sizes and optimizer are the main job's CPU sizes
(configs/moviepuzzle/main.py), so rows compare with its "+fusion" baseline at equal steps.

Real weights (the paper's CLIP ViT-B/32 features). Nothing downloads at run time: fetch the
checkpoint once where there is internet, e.g.

    huggingface-cli download openai/clip-vit-base-patch32 --local-dir $CKPT/clip-vit-base-patch32

(config.json, model.safetensors, vocab.json, merges.txt, tokenizer files), then pass the
directory (or put it under $VNR_ENCODERS_DIR/clip-vit-base-patch32 and pass that name). A
fresh run loads both towers into the sharded state (`vnr/pretrained.py`; a resumed run takes
them from its checkpoint); without `paper`/`finetune` they stay frozen (`config.frozen`).
Table 1 HCMC rows on MovieNet:

    CLIP=$CKPT/clip-vit-base-patch32
    python -m vnr.train --workdir runs/hcmc_fs \
      --config configs/moviepuzzle/hcmc.py:frame_shot,paper,movienet,clip=$CLIP \
      --config.data.manual_dir=$MOVIENET
    # frame+scene / frame+shot+scene: replace frame_shot by frame_scene / frame_shot_scene;
    # Table 2 ablations: add no_shot, no_cl, no_text or no_vision; Table 3: add cosine or
    # softdtw (these override Table 7's Euclidean: warned); Table 10: add lambda=<v>.

The CLI equivalent of clip=DIR is --config.model.image_encoder=DIR
--config.model.text_encoder=DIR --config.data.tokenizer=DIR --config.data.vocab_size=0
--config.data.max_tokens=32 --config.data.image_size=224 --config.data.image_resize=clip
(with `paper`, also --config.model.frame_repr=tokens: frames as token sequences) and
config.frozen set to the towers' paths (`pretrained_clip` below: encoders.<level>.image /
.text). Input speed for towers trained end to end: `paper` sets data.frame_store=True (the
frames preprocessed once into <data_dir>/frame_store/, `vnr/data/frame_store.py`: the same
batches, bit for bit; 224 x 224 x 3 bytes a frame, ~150 KB, so ~30 GB for 200k frames; turn
it off with --config.data.frame_store=False) and data.num_workers=-1 (this host's cores minus
2); `finetune` rows can add both. `python -m bench input` measures the headroom.
"""

import math

import ml_collections

from configs import common
from configs.moviepuzzle import main

LEVELS = {"frame_shot": ("frame", "shot"), "frame_scene": ("frame", "scene"),
          "frame_shot_scene": ("frame", "shot", "scene"), "frame": ("frame",)}
FLAGS = (*LEVELS, "no_shot", "no_cl", "no_text", "no_vision", "euclidean", "cosine", "softdtw",
         "separate_mlp", "separate_transformer", "clip", "finetune", "silhouette", "exact",
         "paper", "ours", "augment", "clips", "movienet", "smoke", "cached")
VALUES = {"lambda": float, "clip": str, "freeze": ("image", "text", "image+text")}
# The paper's train split (§2.3: 7,048 clips; App. A.3's 70 % of 10,031 would be 7,022):
# only the placeholder step count until the run's own train split is built.
PAPER_TRAIN_CLIPS = 7048
# Table 7 keys that `smoke` sets to test sizes: a smoke run does not check them (paper_preset).
SMOKE_SIZES = ("model.width", "model.heads", "batch_size", "epochs")


def paper_preset() -> dict[str, object]:
    """Table 7 (App. D) and §4.1 as config values {dotted key: value}. "5 epochs" is
    `epochs=5`: the task turns it into total_steps = ceil(5 x clips of the built train split
    / 8) once the dataset is built (`vnr/benchmarks/moviepuzzle/data.py:resolve_epochs`,
    called by `validate`), so it is 5 epochs on any corpus."""
    return {
        "model.pair_layers": 2, "model.width": 512, "model.heads": 8,  # 8 heads of 64
        "lr": 1e-4, "batch_size": 8, "epochs": 5,  # batch 8 = 8 clips (pairs_per_clip each)
        "optimizer": "adamw", "eps": 1e-6, "b1": 0.9, "b2": 0.999, "weight_decay": 0.01,
        # the paper names no warmup, decay schedule or gradient clipping: none of them
        "schedule": "constant", "warmup_steps": 0, "grad_clip": 0.0,
        "eval.kmeans_iters": 1000, "eval.distance": "euclidean",  # Max Cluster Steps, Distance
        "cl_lambda": 1.0,  # Tables 1/2 equal the lambda = 1.00 row of Table 10
        # ψ is "a multi-class classifier" with ψ(P) in R_+ (§3.2): its class probabilities
        "model.cluster_out": "softmax",
        "model.phi_out": "softplus",  # ϕ(P) in R_+ too: positive outputs, read by Eq. 2 and 5
        "frozen": (),  # CLIP towers trained end to end (§3.2)
        # the paper names no augmentation: ours (flip + colour permutation) is off
        "data.augment": False,
    }


def select_by_validation(c: ml_collections.ConfigDict) -> None:
    """The paper rows' model selection. The paper does not say how a model is selected;
    ours: the step of best validation OS2 (vnr/benchmarks/moviepuzzle/REPRODUCING.md)."""
    c.select = dict(metric="val/os2", mode="max")


def _set(c: ml_collections.ConfigDict, key: str, value: object) -> None:
    *path, last = key.split(".")
    node = c
    for part in path:
        node = node[part]
    node[last] = value


def base_config(args: common.Args) -> ml_collections.ConfigDict:
    """The main job's data, model, optimizer, loop and eval settings for every paper row,
    with the paper's search (Algorithm 3 on "directly before" scores, §3.3 / App. C.2)."""
    c = main.get_config()
    c.task = "moviepuzzle.hcmc"
    c.data.update(config=args.pick(("clips", "movienet"), "data source", "synthetic"),
                  tokenizer="hash")  # or a checkpoint directory: its tokenizer (vnr.data.text)
    c.model.update(kind="hcmc", pair_layers=2)
    c.frozen = ()  # regexes of parameter paths kept fixed (vnr/pretrained.py)
    c.epochs = 0  # > 0: total_steps from the built train split (the `paper` preset's 5)
    c.eval.search = "exact" if "exact" in args else "beam"
    ours = "ours" in args
    c.eval.update(objective="linear" if ours else "path",
                  starts="shared" if ours else "per_start")
    return c


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    args = common.parse_arg(arg, __file__, FLAGS, VALUES)
    if "clip" in args and "clip" in args.values:
        raise args.error("pass clip (scratch CLIP towers) or clip=<checkpoint>, not both")
    if "finetune" in args and "clip" not in args.values:
        raise args.error("finetune goes with clip=<checkpoint>")
    if "paper" in args and "ours" in args:
        raise args.error("paper (Table 7) and ours (our training choices) exclude each other")
    ours = "ours" in args
    c = base_config(args)
    levels = LEVELS[args.pick(LEVELS, "level set", "frame_shot")]
    frame_parent = ""  # default: frames are paired inside their ground-truth shots
    if "no_shot" in args:  # Table 2 "w/o shot": no shot level, no ground-truth shot ids
        levels = tuple(lv for lv in levels if lv != "shot")
        frame_parent = "scene" if "scene" in levels else "clip"
    no_modality = args.pick(("no_text", "no_vision"), "ablated modality")
    modalities = {"no_text": ("vision",), "no_vision": ("text",)}.get(no_modality,
                                                                        ("vision", "text"))
    distance = args.pick(("euclidean", "cosine", "softdtw"), "distance", "euclidean")
    separate = args.pick(("separate_mlp", "separate_transformer"), "separate model")
    encoder = "scratch:clip-tiny" if "clip" in args else "small"
    c.model.update(levels=levels, modalities=modalities, image_encoder=encoder,
                   text_encoder=encoder, cluster_dim=64,
                   pair_arch="mlp" if separate == "separate_mlp" else "transformer",
                   separate=separate is not None, frame_parent=frame_parent,
                   shot_pool="mean" if ours else "concat",  # App. C: concatenated frames
                   cluster_out="real",  # the `paper` preset: "softmax" (ψ(P) in R_+, §3.2)
                   frame_repr="pooled",  # `paper` with CLIP towers: "tokens" (§3.2)
                   phi_out="real")  # the `paper` preset: "softplus" (ϕ(P) in R_+, §3.2)
    c.within_frac = 0.5
    c.use_cl = "no_cl" not in args
    c.cl_lambda = args.values.get("lambda", 0.75 if ours else 1.0)
    c.cl_form = "cosine" if ours else "dot"  # Eq. 3 as printed: e^{psi . psi}, no temperature
    c.cl_tau = 0.1  # "cosine" only
    c.cl_negatives = 8  # n of Eq. 3: the paper gives no value
    c.eval.update(cluster_count="silhouette" if "silhouette" in args else "gt",
                  distance=distance, max_clusters=8, min_silhouette=0.5, dtw_segments=4,
                  dtw_gamma=0.1, max_pairs=16384, levels=(), alone="",
                  kmeans_init="kmeans++" if ours else "random",  # Algorithm 2: "randomly"
                  kmeans_iters=100 if ours else 1000)  # Table 7: max cluster steps 1000
    if "clip" in args.values:
        pretrained_clip(c, args.values["clip"], finetune="finetune" in args or "paper" in args)
    c.paper_preset = ()  # (dotted key, Table 7 value) pairs; validate warns on overrides
    if "paper" in args:
        preset = paper_preset()
        for key, value in preset.items():
            _set(c, key, value)
        c.total_steps = math.ceil(5 * PAPER_TRAIN_CLIPS / 8)  # until the data is built
        select_by_validation(c)
        c.model.mlp = 4 * c.model.width  # Table 7 gives no MLP size: 4 x hidden, our choice
        if "lambda" in args.values:  # a Table 10 row: its lambda is deliberate
            preset.pop("cl_lambda")
            c.cl_lambda = args.values["lambda"]
        if ("clip" in args or "clip" in args.values) and separate != "separate_mlp":
            # §3.2: a frame is its image and utterance token sequences, a pair of frames both
            # sequences through the transformer (an MLP reads one vector per frame: pooled)
            preset["model.frame_repr"] = c.model.frame_repr = "tokens"
        if separate:  # App. E: "a simple MLP" / "a simple transformer block", not Table 7's 2
            preset.pop("model.pair_layers")
            c.model.pair_layers = 1
        if "augment" in args:  # our addition, asked for by name: not warned, not a paper row
            preset.pop("data.augment")
            c.data.augment = True
        # distance flags of Table 3 contradict Table 7's Euclidean: validate warns (key named)
        c.eval.distance = distance
        c.paper_preset = tuple((k, v) for k, v in preset.items()
                               if "smoke" not in args or k not in SMOKE_SIZES)
        # Input speed (ours; the same batches, bit for bit): the towers train end to end, so
        # every step reads pixels. Frames preprocessed once into <data_dir>/frame_store/
        # and one worker per spare core feed an H100 (`python -m bench input`).
        c.data.frame_store = "cached" not in args  # cached features need no pixels
        c.data.num_workers = -1
    if "smoke" in args:
        main.smoke(c)
        c.model.cluster_dim = 16
        if "paper" in args:  # test sizes (SMOKE_SIZES), not contradictions of Table 7
            c.model.update(width=32, heads=2, mlp=64)
            c.warmup_steps = 0  # Table 7: no warmup (common.smoke sets 2)
            c.epochs = 0  # the smoke step count
        if "clip" in args.values:  # tiny test checkpoints have 16 text positions
            c.data.max_tokens = 16
    _frozen_towers(c, args)
    return c


def _frozen_towers(c: ml_collections.ConfigDict, args: common.Args) -> None:
    """`freeze=image[+text]`: keep those towers fixed (ours; with `paper` it is warned as
    an override of Table 7's end-to-end training). `cached`: read the frozen towers' outputs
    from the feature cache (`python -m vnr.cache_features`, vnr/feature_cache.py) instead of
    running them; augmentation, which changes frames, is turned off."""
    modality = {"image": "vision", "text": "text"}
    if "freeze" in args.values:
        names = args.values["freeze"].split("+")
        c.frozen = tuple(rf"encoders\.\w+\.{n}\." for n in names)
    if "cached" in args:
        names = [n for n, m in modality.items() if m in c.model.modalities
                 and any(rf"\.{n}\." in p for p in c.frozen)]
        if not names:
            raise args.error("cached needs a frozen tower: freeze=image[+text] or "
                             "clip=<checkpoint> without finetune/paper")
        c.data.update(feature_cache=",".join(names), augment=False)


def pretrained_clip(c: ml_collections.ConfigDict, checkpoint: str, finetune: bool) -> None:
    """Both towers and the tokenizer from a CLIP checkpoint; towers frozen unless finetune."""
    c.model.update(image_encoder=checkpoint, text_encoder=checkpoint)
    c.data.update(tokenizer=checkpoint, vocab_size=0, max_tokens=32, image_size=224,
                  image_resize="clip")  # CLIP's image processor (vnr/data/images.py)
    towers = {"vision": "image", "text": "text"}
    if not finetune:
        c.frozen = tuple(rf"encoders\.\w+\.{towers[m]}\." for m in c.model.modalities)
