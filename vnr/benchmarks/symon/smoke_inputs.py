"""Generated inputs of the SYMON analysis rows (Table 2 SBERT coverage, Table 3 mental-state
words) at `python -m vnr.reproduce run --scale smoke`: nothing is downloaded.

`analysis_inputs(path)` (rows.toml `[smoke.vars] SYMON_ANALYSIS`) builds the generated
`synthetic_tiny` SYMON corpus under `path/tfds` and writes beside it what the user brings at
paper scale, made from that corpus: `wikiplots/` (`titles`, `plots`: one plot per movie, the
narration of its first video with every third sentence left out, plus one plot of a movie no
video has), `encoder/` (a random tiny BERT with a WordPiece vocabulary of the corpus's words,
standing in for all-MiniLM-L6-v2: the numbers are plumbing, not semantics) and `lexicons/`
(`emotion.txt`, `motivation.txt`, `intention.txt`: corpus words, one multi-word entry).

`univl_inputs` / `videoclip_inputs` (`UNIVL_SMOKE` / `VIDEOCLIP_SMOKE`): the generated
releases in the width each model reads and the golden tiny checkpoints of the UniVL and
VideoCLIP rows.
"""

from __future__ import annotations

import pathlib
import string

from vnr.benchmarks.symon import analysis

CONFIG = "synthetic_tiny"
SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def analysis_inputs(path: str | pathlib.Path) -> pathlib.Path:
    """Writes the inputs under `path` (see the module docstring); returns `path`."""
    root = pathlib.Path(path)
    videos = analysis.videos(CONFIG, str(root / "tfds"))
    first: dict[str, list[str]] = {}
    for v in sorted(videos, key=lambda v: v["video_id"]):
        first.setdefault(v["movie_id"], list(v["sentences"]))
    (root / "wikiplots").mkdir(parents=True, exist_ok=True)
    titles = [*(m.title() for m in first), "Nobody Filmed This"]
    plots = [[s for i, s in enumerate(sents) if i % 3 != 2] for sents in first.values()]
    plots.append(["A story no summary video tells."])
    (root / "wikiplots" / "titles").write_text("\n".join(titles) + "\n", encoding="utf-8")
    (root / "wikiplots" / "plots").write_text(
        "".join("\n".join(p) + f"\n{analysis.EOS}\n" for p in plots), encoding="utf-8")
    words = sorted({w for v in videos for s in v["sentences"]
                    for w in analysis.words(s)})
    lexicons = {"emotion": words[:12], "motivation": words[12:16],
                "intention": [*words[16:24], "feel blue"]}
    (root / "lexicons").mkdir(exist_ok=True)
    for name, entries in lexicons.items():
        (root / "lexicons" / f"{name}.txt").write_text("\n".join(entries) + "\n")
    _encoder(root / "encoder", words)
    return root


def _encoder(directory: pathlib.Path, words: list[str]) -> None:
    """A random tiny BERT whose WordPiece vocabulary holds `words`, the letters and their
    `##` continuations (any word tokenizes), with positions for 128 tokens (the analysis
    encodes sentences at 128)."""
    from transformers import BertTokenizerFast

    from vnr.models.encoders.testing import write_tiny_checkpoint

    letters = list(string.ascii_lowercase + string.digits + string.punctuation)
    vocab = list(dict.fromkeys([*SPECIALS, *letters, *(f"##{c}" for c in letters), *words]))
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    BertTokenizerFast(str(directory / "vocab.txt")).save_pretrained(str(directory))
    write_tiny_checkpoint("bert", directory, "flax-safetensors", config_overrides={
        "vocab_size": len(vocab), "max_position_embeddings": 128})


def univl_inputs(path: str | pathlib.Path) -> pathlib.Path:
    """The inputs of the UniVL rows at smoke scale, under `path`: `release/` (the generated
    SYMON corpus in the release layout, its features cut to 12 columns and stored as
    float16, as UniVL's extractor stores them) and `univl/` (the golden UniVL of
    tests/golden/univl: upstream's model at width 16 with random weights, saved by
    `torch.save` as `univl.pretrained.bin` is, with its WordPiece vocab.txt; 2 heads)."""
    import shutil

    import numpy as np

    from tfds_builders import symon

    root = pathlib.Path(path)
    symon.write_generated_release(root / "release", "tiny", seed=3)
    for f in (root / "release" / "features").glob("*.npy"):
        np.save(f, np.load(f)[:, :UNIVL_SMOKE_DIM].astype(np.float16))
    golden = pathlib.Path(__file__).resolve().parents[3] / "tests" / "golden" / "univl"
    (root / "univl").mkdir(parents=True, exist_ok=True)
    for name in ("univl.pretrained.bin", "vocab.txt"):
        shutil.copyfile(golden / name, root / "univl" / name)
    return root


UNIVL_SMOKE_DIM = 12  # the golden UniVL's video_dim


def videoclip_inputs(path: str | pathlib.Path) -> pathlib.Path:
    """The inputs of the VideoCLIP rows at smoke scale, under `path`: `release/` (the
    generated SYMON corpus in the release layout, its 32-d features carried into 512 columns by
    a fixed orthonormal map and L2-normalised, stored as float16: the shape VideoCLIP's S3D
    writes), `yms/` (the generated YMS release with 512-d features) and `videoclip/` (the
    golden VideoCLIP of tests/golden/videoclip: upstream's MMFusionSeparate at width 32 with
    random weights, saved as fairseq saves `checkpoint_best.pt`, its WordPiece vocab.txt; 2
    heads, max_video_len 8, max_len 24)."""
    import shutil

    import numpy as np

    from tfds_builders import symon
    from tfds_builders.msymon import yms

    root = pathlib.Path(path)
    symon.write_generated_release(root / "release", "tiny", seed=3)
    rot = None
    for f in sorted((root / "release" / "features").glob("*.npy")):
        x = np.load(f).astype(np.float64)
        if rot is None:
            rot = np.linalg.qr(np.random.default_rng(5).normal(
                size=(VIDEOCLIP_SMOKE_DIM, x.shape[1])))[0]
        y = x @ rot.T
        y /= np.maximum(np.linalg.norm(y, axis=1, keepdims=True), 1e-12)
        np.save(f, y.astype(np.float16))
    yms.synthetic.write_corpus(root / "yms", seed=1, dim=VIDEOCLIP_SMOKE_DIM)
    golden = pathlib.Path(__file__).resolve().parents[3] / "tests" / "golden" / "videoclip"
    (root / "videoclip").mkdir(parents=True, exist_ok=True)
    for name in ("checkpoint_best.pt", "vocab.txt"):
        shutil.copyfile(golden / name, root / "videoclip" / name)
    return root


VIDEOCLIP_SMOKE_DIM = 512  # the golden VideoCLIP's video_dim (S3D's video_embedding)
