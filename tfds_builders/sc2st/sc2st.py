"""TFDS builder for Sc2St storyboards built from LSMDC 2016 (see README.md).

Pipeline (each step in its own pure module): annotation rows (`lsmdc`) -> text
processing into sub-sentences (`text`) -> per-clip keyframes by CLIP text-image
cosine (`keyframes`) -> stories and storyboards of 10 pairs (`story`) -> 80/5/15
split by storyboard -> candidate sets per split (`candidates`). One example per
storyboard; keyframe features are stored, frames are referenced by path.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import pathlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import tensorflow_datasets as tfds

from tfds_builders import arrays, common
from tfds_builders.sc2st import candidates, extras, keyframes, lsmdc, story, text
from tfds_builders.sc2st.examples import Pair, check_dim, make_example
from tfds_builders.sc2st.skips import Skips, record

VERSION = tfds.core.Version("1.1.0")
STATS_FILE = "sc2st_stats.json"
FORMATION_KEYS = ("stories", "breaks", "storyboards", "dropped_pairs", "overflow_pairs",
                  "short_group_pairs", "short_group_tails")
MANUAL_DOWNLOAD_INSTRUCTIONS = """\
Point --manual_dir at a directory holding LSMDC16_annos_{training,val,test}.csv (any subset),
meta.csv (optional: genres) and, per clip, frames/<movie>/<clip_id>/<k>.jpg (5 fps) or
features/<movie>/<clip_id>.npy (float32 [frames, D] CLIP image embeddings)."""


@dataclasses.dataclass(eq=False)
class Sc2StConfig(tfds.core.BuilderConfig):
    """Build options; every number the protocol uses is here.

    encoder: the keyframe image-text model's name, handed to the caller's `embedder`
      (`embedder(encoder, seed)`); feature_dim must be its embedding width.
    """

    source: str = "lsmdc"  # or "synthetic", or "released" (the Google-Drive story files)
    sizes: str = "default"  # synthetic corpus size
    encoder: str = "clip-vit-base-patch32"
    feature_dim: int = 512
    # Optional image model whose cosine ranks similar candidates (§4.1.3: DenseNet-121 in
    # the paper); "" = the keyframe features. Given to the builder's `candidate_embedder`.
    candidate_encoder: str = ""
    # Optional image model whose embeddings of the keyframe JPEGs become the stored `features`
    # column the models read (Appendix A.1: Inception-v3 pooled features); "" = the keyframe
    # embedder's image embeddings. Given to the builder's `feature_embedder`; `feature_dim`
    # is then that model's width, and keyframes are still chosen by the `embedder`.
    feature_encoder: str = ""
    # MoEE experts (§4.3.2): (name, width) each; their features come from the builder's
    # `experts[name]` (e.g. scene, object, character) and are stored as `expert_<name>`.
    experts: tuple[tuple[str, int], ...] = ()
    # Per expert, the name its `experts[name]` is called with instead of `encoder` (the
    # paper's networks: their architecture, e.g. ("scene", "densenet161_places365")).
    expert_encoders: tuple[tuple[str, str], ...] = ()
    # Isolated keyframes (in no storyboard) join the candidate pool (§4.1.3).
    isolated: bool = True
    seed: int = 0
    length: int = 10
    max_gap: float = 10.0
    fractions: tuple[float, float, float] = (0.8, 0.05, 0.15)
    num_candidates: int = 100
    similar_frac: float = 0.7
    same_movie_frac: float = 0.3
    conjunctions: tuple[tuple[str, bool], ...] = text.CONJUNCTIONS
    min_words: int = 2
    names: bool = True  # character names as the release attaches them (False: SOMEONE)
    # Upstream's preparation drops these LSMDC movies as repeats of others.
    exclude_movies: tuple[str, ...] = ("1001_", "1010_")


def check_manual_dir(manual_dir: os.PathLike | str | None) -> pathlib.Path:
    """The manual_dir, or a one-line ManualDirError saying what it must hold."""
    what = "LSMDC16_annos_{training,val,test}.csv plus frames/ or features/"
    if not manual_dir:
        raise common.ManualDirError(f"sc2st/lsmdc needs --manual_dir: a directory holding {what}")
    path = pathlib.Path(manual_dir)
    if not path.is_dir():
        raise common.ManualDirError(f"manual_dir {path} does not exist; it must hold {what}")
    if not any((path / f).is_file() for f in lsmdc.ANNOTATION_FILES.values()):
        raise common.ManualDirError(f"manual_dir {path} has none of "
                                    f"{', '.join(lsmdc.ANNOTATION_FILES.values())}")
    if not (path / "frames").is_dir() and not (path / "features").is_dir():
        raise common.ManualDirError(f"manual_dir {path} has neither frames/ nor features/")
    return path


def _clip_frames(root: pathlib.Path, clip: lsmdc.Clip, scorer: keyframes.Embedder,
                 dim: int) -> tuple[np.ndarray | None, list[str], tuple]:
    """(per-frame features [F, D], frame ids, ()) or (None, [], (reason, path, detail))."""
    frame_dir = root / "frames" / clip.movie / clip.clip_id
    paths = lsmdc.list_frames(frame_dir)
    if paths:
        feats, bad = keyframes.encode_frames(scorer, paths)
        if bad is not None:  # a frame that does not decode makes the clip unusable
            return None, [], ("bad_frame", bad[0], bad[1])
        return feats, [str(p.relative_to(root)) for p in paths], ()
    npy = root / "features" / clip.movie / f"{clip.clip_id}.npy"
    if npy.is_file():
        try:
            feats = arrays.load(npy, (None, dim)).astype(np.float32)
        except arrays.ArrayError as e:  # not an array, not real, not finite: bad_frame
            return None, [], ("feature_dim_mismatch" if e.kind == "shape" else "bad_frame",
                              npy, e.detail)
        rel = str(npy.relative_to(root))
        return keyframes.normalise(feats), [f"{rel}#{k}" for k in range(len(feats))], ()
    return None, [], ("no_frames", frame_dir, f"no <k>.jpg there and no {npy.name}")


def clip_pairs(root: pathlib.Path, clips: list[lsmdc.Clip], cfg: Sc2StConfig,
               scorer: keyframes.Embedder, skips: collections.Counter,
               stats: collections.Counter) -> dict[str, list[Pair]]:
    """Keyframe-sentence pairs of every usable clip (clip id -> pairs in order)."""
    texts: dict[str, list[str]] = {}
    for clip in clips:
        subs = text.process_description(clip.sentence, cfg.conjunctions, cfg.min_words,
                                         cfg.names)
        if subs:
            texts[clip.clip_id] = subs
        else:
            record(skips, "empty_sentence", clip.source.rpartition(":")[0], clip.source)
    flat = [s for subs in texts.values() for s in subs]
    emb = iter(scorer.encode_texts(flat))  # one batched pass over every sub-sentence
    text_emb = {cid: np.stack([next(emb) for _ in subs]) for cid, subs in texts.items()}
    out: dict[str, list[Pair]] = {}
    for clip in clips:
        if clip.clip_id not in texts:
            continue
        subs, temb = texts[clip.clip_id], text_emb[clip.clip_id]
        feats, ids, problem = _clip_frames(root, clip, scorer, scorer.dim)
        if feats is None:
            reason, where, detail = problem
            record(skips, reason, where, "", f"{clip.clip_id}: {detail}")
            continue
        if len(subs) > len(ids):  # more sub-sentences than frames: merge the tail
            stats["subsentences_merged"] += len(subs) - len(ids)
            subs = subs[:len(ids) - 1] + [" ".join(subs[len(ids) - 1:])]
            temb = scorer.encode_texts(subs)
        ks = keyframes.align_monotone(temb @ feats.T)
        stats["subsentences"] += len(subs)
        out[clip.clip_id] = [Pair(clip, s, ids[k], feats[k]) for s, k in zip(subs, ks,
                                                                             strict=True)]
    return out


def keyframe_image_features(root: pathlib.Path, boards: list[list[Pair]],
                        embedder: keyframes.Embedder | None,
                        role: str = "candidate_embedder") -> np.ndarray:
    """[sum of len(b), D'] features of the pairs of `boards` in order: the keyframe
    embedder's (`p.feature`), or `embedder`'s image embeddings of the keyframe JPEGs
    (frames/ input needed). Used for the features that rank similar candidates (§4.1.3,
    `candidate_embedder`: DenseNet-121 in the paper) and for the stored features
    (`feature_embedder`: Inception-v3, A.1); `role` names the embedder in errors."""
    if embedder is None:
        return np.array([p.feature for b in boards for p in b], np.float32)
    out = []
    for b in boards:
        if not b:
            continue
        paths = [root / p.frame_id for p in b]
        bad = next((p for p in paths if p.suffix.lower() not in (".jpg", ".jpeg")), None)
        if bad is not None:
            raise ValueError(f"{role} needs keyframe images; {bad} is a feature array (use "
                             f"frames/ input or no {role})")
        out.append(embedder.encode_images([p.read_bytes() for p in paths]))
    return np.concatenate(out).astype(np.float32)


def build_storyboards(root: pathlib.Path, cfg: Sc2StConfig, skips: collections.Counter,
                      stats: collections.Counter, scorer: keyframes.Embedder,
                      candidate_scorer: keyframes.Embedder | None = None,
                      experts: dict[str, keyframes.Expert] | None = None,
                      isolated_out: dict | None = None,
                      feature_scorer: keyframes.Embedder | None = None) -> dict[str, list[dict]]:
    """Everything but TFDS: split name -> list of example dicts (in pool order); `scorer`
    embeds sentences and frames for keyframe selection, `candidate_scorer` (optional)
    the keyframes whose cosine picks similar candidates (default: `scorer`'s features),
    `experts` the config's MoEE expert columns, `feature_scorer` (optional, with the
    config's `feature_encoder`) the stored `features` (default: `scorer`'s). `isolated_out`
    (optional) gets, per split, (columns, frame ids, movies) of its isolated keyframes."""
    rows = []
    for name in lsmdc.ANNOTATION_FILES.values():
        if (root / name).is_file():
            rows += lsmdc.read_annotations(root / name, skips)
    kept = [c for c in rows if not c.movie.startswith(tuple(cfg.exclude_movies))]
    for c in rows:
        if c.movie.startswith(tuple(cfg.exclude_movies)):  # named: file:line (movie)
            common.count(skips, "excluded_movie", f"{c.source} ({c.movie})")
    if len(kept) < len(rows):
        common.log.warning("skipped %d rows of excluded movies %s", len(rows) - len(kept),
                           cfg.exclude_movies)
    clips = lsmdc.merge_duplicates(kept, skips)
    meta = {}
    if (root / "meta.csv").is_file():
        meta = lsmdc.read_meta(root / "meta.csv", skips)
    else:
        common.log.warning("%s has no meta.csv: genres are left empty", root)
    if bool(cfg.feature_encoder) != (feature_scorer is not None):
        raise ValueError(f"sc2st/{cfg.name}: feature_encoder={cfg.feature_encoder!r} needs a "
                         "feature embedder exactly when it is set")
    check_dim(feature_scorer or scorer, cfg, cfg.feature_encoder or None)
    pairs = clip_pairs(root, clips, cfg, scorer, skips, stats)
    stories = story.group_stories([c for c in clips if c.clip_id in pairs], cfg.max_gap)
    dropped: list[Pair] = []
    boards = story.form_storyboards([[pairs[c.clip_id] for c in s] for s in stories],
                                    cfg.length, stats, dropped)
    stats["stories"], stats["storyboards"] = len(stories), len(boards)
    stats["breaks"] = story.count_breaks(stories)
    stats["dropped_pairs"] = stats["overflow_pairs"] + stats["short_group_pairs"]
    if not boards:
        raise common.ManualDirError(f"{root}: no storyboard of {cfg.length} pairs could be "
                                    "formed (see the skipped counts above)")
    missing = sorted({b[0].clip.movie for b in boards
                      if lsmdc.normalise_movie(b[0].clip.movie) not in meta})
    stats["movies_not_in_meta"] = len(missing)
    movie_ids = {m: i for i, m in enumerate(sorted({p.clip.movie for b in boards for p in b}
                                                   | {p.clip.movie for p in dropped}))}
    splits = story.split_storyboards(len(boards), cfg.seed, cfg.fractions)
    story.check_no_overlap({s: [[p.frame_id for p in boards[i]] for i in idx]
                            for s, idx in splits.items()})
    isolated = (extras.assign_isolated(dropped, boards, splits, cfg.seed, cfg.fractions)
                if cfg.isolated else {s: [] for s in splits})
    cols = {}
    if cfg.experts:
        cols = extras.expert_columns([p for b in boards for p in b] + dropped, root,
                                     experts or {}, dict(cfg.experts), stats)
    stored = {}  # id(pair) -> its stored feature, when not the keyframe embedder's
    if feature_scorer is not None:
        every = [p for b in boards for p in b] + (dropped if cfg.isolated else [])
        rows = keyframe_image_features(root, [every], feature_scorer, "feature_embedder")
        stored = {id(p): r for p, r in zip(every, rows, strict=True)}

    def feature(p: Pair) -> np.ndarray:
        return stored.get(id(p), p.feature)

    out = {}
    for code, (split, idx) in enumerate(splits.items()):
        chosen, iso = [boards[i] for i in idx], isolated[split]
        if not chosen:
            continue
        feats = np.stack([[feature(p) for p in b] for b in chosen]).astype(np.float32)
        movies = np.array([movie_ids[b[0].clip.movie] for b in chosen])
        sim = keyframe_image_features(root, chosen + [iso], candidate_scorer)
        d = sim.shape[-1]
        cands, answer = candidates.sample_candidates(
            sim[:len(chosen) * cfg.length].reshape(len(chosen), cfg.length, d), movies,
            seed=cfg.seed, split_code=code, positions=tuple(range(1, cfg.length)),
            num_candidates=cfg.num_candidates, similar_frac=cfg.similar_frac,
            same_movie_frac=cfg.same_movie_frac, stats=stats,
            extra_features=sim[len(chosen) * cfg.length:],
            extra_movies=np.array([movie_ids[p.clip.movie] for p in iso], np.int64))
        out[split] = [make_example(i, b, f, c, a, meta, cols) for i, (b, f, c, a) in
                      enumerate(zip(chosen, feats, cands, answer, strict=True))]
        stats[f"isolated_{split}"] = len(iso)
        if isolated_out is not None:
            isolated_out[split] = (
                {"features": np.array([feature(p) for p in iso], np.float32).reshape(
                    len(iso), -1),
                 **{f"expert_{n}": np.array([cols[id(p)][f"expert_{n}"] for p in iso],
                                            np.float32).reshape(len(iso), dim)
                    for n, dim in cfg.experts}},
                [p.frame_id for p in iso], [p.clip.movie for p in iso])
    return out


# The default experts' widths with CLIP ViT-B/32 (`vnr.benchmarks.sc2st.embedders`).
EXPERTS_CLIP = (("scene", 512), ("object", 512), ("character", 100))
# The paper's (§4.3.2): DenseNet-161 Places365 and SENet-154 pooled, top-100 characters
# (`vnr.benchmarks.sc2st.experts`); the tiny networks of smoke runs and tests.
EXPERTS_PAPER = (("scene", 2208), ("object", 2048), ("character", 100))
ENCODERS_PAPER = (("scene", "densenet161_places365"), ("object", "senet154"))
EXPERTS_TINY = (("scene", 23), ("object", 64), ("character", 100))


class Sc2St(common.SummaryBuilder, tfds.core.GeneratorBasedBuilder):
    """Sc2St storyboards: 10 keyframe-sentence pairs, 9 candidate sets of 100 each."""

    name = "sc2st"
    VERSION = VERSION
    MANUAL_DOWNLOAD_INSTRUCTIONS = MANUAL_DOWNLOAD_INSTRUCTIONS
    RELEASE_NOTES = {"1.0.0": "Storyboards from LSMDC 2016 and a generated corpus.",
                     "1.1.0": "Isolated keyframes in the candidate pools; MoEE expert columns."}
    BUILDER_CONFIGS = [
        Sc2StConfig(name="lsmdc", description="LSMDC 2016 in manual_dir, CLIP ViT-B/32 "
                    "keyframes (local checkpoint: $VNR_ENCODERS_DIR/clip-vit-base-patch32)."),
        Sc2StConfig(name="lsmdc_scratch", encoder="scratch:tiny", feature_dim=32,
                    description="LSMDC layout in manual_dir with a random tiny CLIP "
                    "(plumbing only: keyframes are arbitrary)."),
        Sc2StConfig(name="released", source="released",
                    description="The released story10_all_<split>_no.json storyboards, frames "
                    "resolved through lsmdc.json; CLIP ViT-B/32 features, our candidate sets."),
        Sc2StConfig(name="lsmdc_paper", candidate_encoder="densenet121",
                    feature_encoder="inception_v3", feature_dim=2048,
                    description="As lsmdc (CLIP ViT-B/32 keyframes), with similar candidates "
                    "ranked by DenseNet-121 (§4.1.3) and Inception-v3 pooled features stored "
                    "for the models (Appendix A.1); their torchvision weights under "
                    "$VNR_ENCODERS_DIR/{densenet121,inception_v3}."),
        Sc2StConfig(name="lsmdc_paper_densenet", candidate_encoder="densenet121",
                    feature_encoder="densenet121", feature_dim=1024,
                    description="As lsmdc_paper (the same storyboards and candidates), with "
                    "DenseNet-121's 1024-d pooled features stored (§4.1.3's similarity)."),
        Sc2StConfig(name="lsmdc_paper_experts", candidate_encoder="densenet121",
                    experts=EXPERTS_PAPER, expert_encoders=ENCODERS_PAPER,
                    description="As lsmdc_paper's storyboards and candidates, plus the "
                    "paper's MoEE experts: DenseNet-161 Places365 scene, SENet-154 object, "
                    "top-100 characters (vnr.benchmarks.sc2st.experts)."),
        Sc2StConfig(name="lsmdc_scratch_experts", encoder="scratch:tiny", feature_dim=32,
                    candidate_encoder="scratch:tiny", num_candidates=20,
                    experts=EXPERTS_TINY, expert_encoders=(("scene", "tiny"), ("object", "tiny")),
                    description="lsmdc_paper_experts' plumbing with tiny networks (random "
                    "CLIP and DenseNet, the expert checkpoints given): smoke runs and tests."),
        Sc2StConfig(name="lsmdc_experts", experts=EXPERTS_CLIP,
                    description="As lsmdc, plus the MoEE expert columns scene / object / "
                    "character (vnr.benchmarks.sc2st.embedders.DEFAULT_EXPERTS)."),
        Sc2StConfig(name="synthetic", source="synthetic", encoder="scratch:tiny",
                    feature_dim=32, description="Generated corpus (no manual_dir)."),
        Sc2StConfig(name="synthetic_experts", source="synthetic", encoder="scratch:tiny",
                    feature_dim=32, experts=(("scene", 32), ("object", 32), ("character", 100)),
                    description="Generated corpus plus the MoEE expert columns."),
        Sc2StConfig(name="synthetic_tiny", source="synthetic", sizes="tiny",
                    encoder="scratch:tiny", feature_dim=32, num_candidates=20,
                    description="Tiny generated corpus for tests (20 candidates)."),
    ]
    DEFAULT_CONFIG_NAME = "synthetic"

    # The CLI's default --embedder: none. The builder names no model code; the caller passes
    # the keyframe embedder (README: "Keyframe embedder").
    DEFAULT_EMBEDDER = None

    def __init__(self, *, embedder: keyframes.MakeEmbedder | None = None,
                 candidate_embedder: keyframes.MakeEmbedder | None = None,
                 experts: dict[str, keyframes.MakeExpert] | None = None,
                 feature_embedder: keyframes.MakeEmbedder | None = None, **kwargs: Any):
        """`embedder(config.encoder, config.seed)` gives the keyframe `Embedder` a build
        needs (reading a built dataset needs none); `experts[name](config.encoder,
        config.seed)` each expert the config names; `feature_embedder(config.feature_encoder,
        config.seed)` the stored features' image model, for a config naming one."""
        super().__init__(**kwargs)
        self.embedder = embedder
        self.candidate_embedder = candidate_embedder
        self.feature_embedder = feature_embedder
        self.experts = experts or {}
        self.isolated: dict[str, tuple] = {}
        self.stats: collections.Counter = collections.Counter()

    def model_functions(self) -> dict[str, Any]:
        """The model functions this build uses, by role (recorded in and checked against the
        dataset's source, `tfds_builders/fingerprint.py`): none without a keyframe `embedder`
        (a reader), else the embedder, the candidate and feature embedders when given, and the
        experts the config stores."""
        if self.embedder is None:
            return {}
        out: dict[str, Any] = {"embedder": self.embedder}
        if self.candidate_embedder is not None:
            out["candidate_embedder"] = self.candidate_embedder
        if self.feature_embedder is not None:
            out["feature_embedder"] = self.feature_embedder
        out.update({f"expert:{n}": self.experts[n] for n, _ in self.builder_config.experts
                    if n in self.experts})
        return out

    @classmethod
    def check_inputs(cls, config: str, manual_dir: os.PathLike | str | None) -> None:
        source = next((c.source for c in cls.BUILDER_CONFIGS if c.name == config), None)
        if source == "lsmdc":
            check_manual_dir(manual_dir)
        elif source == "released" and (not manual_dir or not pathlib.Path(manual_dir).is_dir()):
            raise common.ManualDirError(f"sc2st/{config} needs --manual_dir holding "
                                        "story10_all_*_no.json, lsmdc.json and frames/")

    def _info(self) -> tfds.core.DatasetInfo:
        c: Sc2StConfig = self.builder_config
        texts = tfds.features.Sequence(tfds.features.Text())
        return self.dataset_info_from_configs(
            features=tfds.features.FeaturesDict({
                "storyboard_id": tfds.features.Text(),
                "index": tfds.features.Scalar(np.int32),
                "movie": tfds.features.Text(),
                "genres": texts,
                "clip_ids": texts,
                "sentences": texts,
                "frame_ids": texts,
                "start": tfds.features.Tensor(shape=(c.length,), dtype=np.float32),
                "end": tfds.features.Tensor(shape=(c.length,), dtype=np.float32),
                "features": tfds.features.Tensor(shape=(c.length, c.feature_dim),
                                                 dtype=np.float32),
                "candidates": tfds.features.Tensor(shape=(c.length - 1, c.num_candidates),
                                                   dtype=np.int32),
                "answer": tfds.features.Tensor(shape=(c.length - 1,), dtype=np.int32),
                **{f"expert_{n}": tfds.features.Tensor(shape=(c.length, d), dtype=np.float32)
                   for n, d in c.experts},
            }),
            homepage="https://github.com/hopeisme/Sc2St",
        )

    def _split_generators(self, dl_manager: tfds.download.DownloadManager) -> dict:
        c: Sc2StConfig = self.builder_config
        if c.source == "synthetic":
            from tfds_builders.sc2st import synthetic

            root = common.synthetic_corpus(dl_manager, "sc2st", synthetic, c.sizes,
                                           seed=c.seed, sizes=c.sizes)
        elif c.source == "released":
            root = common.manual_dir(dl_manager)
            if root is None:
                raise common.ManualDirError(f"sc2st/{c.name} needs --manual_dir holding "
                                            "story10_all_*_no.json, lsmdc.json and frames/")
        else:
            root = check_manual_dir(common.manual_dir(dl_manager))
        self.skips, self.stats = Skips(), collections.Counter()
        try:
            if self.embedder is None:
                raise ValueError(
                    f"sc2st/{c.name} embeds keyframes: pass embedder= (a function (encoder, "
                    "seed) -> Embedder, see tfds_builders/sc2st/keyframes.py) to the builder, "
                    "or --embedder module:function to python -m tfds_builders")
            if c.candidate_encoder and self.candidate_embedder is None:
                raise ValueError(f"sc2st/{c.name} ranks candidates by {c.candidate_encoder!r}: "
                                 "pass candidate_embedder= to the builder")
            if self.candidate_embedder is not None and c.source != "lsmdc":
                raise ValueError(f"sc2st/{c.name}: candidate_embedder needs keyframe images "
                                 "(the lsmdc source with frames/)")
            if c.feature_encoder and self.feature_embedder is None:
                raise ValueError(f"sc2st/{c.name} stores {c.feature_encoder!r} features: pass "
                                 "feature_embedder= to the builder (or --feature_embedder "
                                 "module:function)")
            if self.feature_embedder is not None and not c.feature_encoder:
                raise ValueError(f"sc2st/{c.name} stores the keyframe embedder's features (no "
                                 "feature_encoder): build a config that names one to use "
                                 "feature_embedder")
            if self.feature_embedder is not None and c.source != "lsmdc":
                raise ValueError(f"sc2st/{c.name}: feature_embedder needs keyframe images "
                                 "(the lsmdc source with frames/)")
            lacking = [n for n, _ in c.experts if n not in self.experts]
            if lacking:
                raise ValueError(f"sc2st/{c.name} stores the MoEE experts {lacking}: pass "
                                 "experts={name: function} to the builder (or --expert "
                                 "name=module:function)")
            made = keyframes.made
            both, images = ("encode_texts", "encode_images"), ("encode_images",)
            scorer = made(self.embedder, "embedder", c.encoder, c.seed, both)
            self.isolated = {}
            if c.source == "released":
                from tfds_builders.sc2st.released import build_released

                examples = build_released(root, c, self.skips, self.stats, scorer)
            else:
                cand = (made(self.candidate_embedder, "candidate_embedder",
                             c.candidate_encoder, c.seed, images)
                        if self.candidate_embedder is not None else None)
                examples = build_storyboards(
                    root, c, self.skips, self.stats, scorer, cand,
                    {n: made(self.experts[n], f"expert {n}", dict(c.expert_encoders).get(
                        n, c.encoder), c.seed, ("encode_keyframes",)) for n, _ in c.experts},
                    self.isolated,
                    made(self.feature_embedder, "feature_embedder", c.feature_encoder,
                         c.seed, images) if c.feature_encoder else None)
        except ValueError as e:
            raise common.ManualDirError(str(e)) from None
        return {split: self._generate_examples(ex) for split, ex in examples.items()}

    def _generate_examples(self, examples: list[dict]) -> Iterator[tuple[str, dict]]:
        for ex in examples:
            yield f"{ex['index']:07d}", ex

    def download_and_prepare(self, *args: Any, **kwargs: Any) -> None:
        """Builds the dataset if needed; stores build_summary.json and sc2st_stats.json."""
        super().download_and_prepare(*args, **kwargs)
        if self.skips is not None:
            stats = dict(sorted(self.stats.items()))
            path = os.path.join(os.fspath(self.data_dir), STATS_FILE)
            with open(path, "w") as f:
                json.dump(stats, f, indent=2)
            for split, (columns, frame_ids, movies) in self.isolated.items():
                extras.write_isolated(self.data_dir, split, columns, frame_ids, movies)
            # Storyboard formation counts (storyboards, dropped pairs, breaks) and the
            # per-file bad-input counts go into the build summary too.
            summary = common.write_summary(self, self.skips)
            summary["formation"] = {k: stats[k] for k in FORMATION_KEYS if k in stats}
            summary["skipped_by_file"] = {f: dict(sorted(c.items())) for f, c in
                                          sorted(getattr(self.skips, "by_file", {}).items())}
            with open(os.path.join(os.fspath(self.data_dir), common.SUMMARY_FILE), "w") as f:
                json.dump(summary, f, indent=2)


Builder = Sc2St
