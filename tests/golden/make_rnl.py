"""Writes tests/golden/rnl/: Movie101's RNL grounding model (yuezih/Movie101,
`Movie101v1/baseline/CNCLIP+RNL/RNL/`: `models_/gcn_final.py`'s `Model`, the targets of
`dataloaders/clip_loader.py`'s `ClipDataset1`) on tiny random weights, for
tests/models/test_rnl.py. Run by hand with torch (never imported by vnr or the tests):

    /work/scratch/torch/bin/python tests/golden/make_rnl.py [--upstream DIR_WITH_RNL]

Without --upstream the script copies upstream's files out of the mirrored bare git repository
(`git show HEAD:<file>`, default mirror path below) into a temporary directory and imports them
from there, so no upstream code is committed here. Stand-ins, all applied at run time:

* `torch.Tensor.cuda` returns the tensor itself (upstream builds its local attention mask on
  the GPU); `fairseq.utils.softmax` (the one fairseq helper the attention imports) is a
  float32 softmax; `nltk`, `gensim` and `h5py` (imported by `utils.py` / the dataset, used by
  nothing run here) are empty modules.
* `gcn_final.py` hard-codes the full-size widths (S3D 1024 + frame faces 1536 -> 512, portrait
  512) and the proposal count 800 (= 200 clips x 4 anchors). For the tiny model the copied
  source reads them from the argument namespace (`frame_dim`, `face_dim`, `d_model`,
  `portrait_dim`, `max_num_frames * num_anchors`); every replaced literal is asserted to be
  found. The full-size key set is built from the unpatched source.
* The dataset's file reads are replaced: `ActivityNetGCN.__getitem__` returns the synthetic
  sample (clip features, word features, [start, end] in clips, portrait faces); the rest of
  `ClipDataset1.__getitem__` (padding, masks, proposal IoU scores, `adj_mat`) is upstream's,
  run in evaluation mode (no augmentation).

Contents:
* `rnl.pth`: the tiny model's state dict as upstream's runner saves it (`torch.save` of the
  `DataParallel` wrapper: keys start with `module.`). Sizes: 72 clips (so the 64-clip anchor
  has legal positions), clip features 8 + frame faces 6, words 12-d (10 slots), width 16,
  2 heads in the clip self-attention (4 in the co-/self-attention, upstream's constant), 3
  portrait slots of width 16, 2 self-attention layers, dropout 0.2 (eval mode: off).
  Every parameter random.
* `io.npz`: three samples as the loader builds them (inputs, `label`, `label_mask`, `gt`,
  `adj_mat`, `node_mask`, faces and masks); upstream's eval-mode outputs `boxes` (refined
  proposals [B, T*A, 2]), `scores` (masked sigmoid scores [B, T*A]) and `loss_eval`; the
  intermediate `video` / `query` (encoder outputs), `attended` (clip-to-query attention) and
  `fused` (last BiGRU); and `loss_train`: the training-mode loss (regression on the
  `adj_mat > 0` proposals) with every dropout rate set to 0. Sample 0: 5 words, 2 portraits;
  sample 1: 10 words (all slots), 4 portraits (cut to 3); sample 2: 3 words, no portrait
  (upstream's empty-face case) and only 64 of its 72 clips valid (GRU packing).
* `full_keys.json`: {key: shape} of the full-size model of `train.sh` (d_model 512, 4 heads,
  2 attention layers, 200 clips, 768-d words), as its runner saves it, on torch's meta device.
"""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import numpy as np

# torch is no vnr dependency (see make_torch_checkpoint.py): imported by name.
torch = importlib.import_module("torch")

MIRROR = "/work/.mirror/yuezih+Movie101/repo"  # bare git directory (the `fetch` tool's)
ROOT = "Movie101v1/baseline/CNCLIP+RNL/RNL"
OUT = Path(__file__).resolve().parent / "rnl"
FILES = ["utils.py", "criteria.py", "models_/gcn_final.py", "dataloaders/clip_loader.py",
         "dataset/ActivityNet.py", "dataset/TACOS.py", "dataset/Charades.py",
         *(f"modules_/{m}.py" for m in (
             "graph_convolution", "tanh_attention", "dynamic_rnn", "cross_gate", "ConvGRU",
             "Coattention", "message", "multihead_attention", "position", "coa", "sea"))]
# literal in gcn_final.py -> what the tiny model reads instead
WIDTHS = {"nn.Linear(1536, 512)": "nn.Linear(args.face_dim, args.d_model)",
          "x[:,:,1024:]": "x[:,:,self.args.frame_dim:]",
          "x[:,:,:1024]": "x[:,:,:self.args.frame_dim]",
          "nn.Linear(512, args.d_model)": "nn.Linear(args.portrait_dim, args.d_model)",
          "800": "(self.max_num_frames * self.num_anchors)"}
FAIRSEQ = ("import torch.nn.functional as F\n"
           "def softmax(x, dim, onnx_trace=False):\n"
           "    return F.softmax(x.float(), dim=dim)\n")

T, FRAME, FACE, WORD, D, WORDS, FACES = 72, 8, 6, 12, 16, 10, 3
WORD_LENGTHS, PORTRAITS, GT = (5, 10, 3), (2, 4, 0), ((10, 23), (40, 71), (0, 6))
CLIPS_VALID = (72, 72, 64)
# train.sh (with main.py's defaults for what it leaves out)
FULL = dict(dataset="ActivityNet", max_num_words=80, max_num_nodes=80, max_num_frames=200,
            frame_dim=1024, d_model=512, dropout=0.2, num_heads=4, num_gcn_layers=2,
            num_attn_layers=2, word_dim=768)
TINY = dict(FULL, max_num_words=WORDS, max_num_nodes=WORDS, max_num_frames=T, frame_dim=FRAME,
            d_model=D, num_heads=2, word_dim=WORD, face_dim=FACE, portrait_dim=D)


def source(directory: str | None, name: str) -> str:
    if directory:
        return (Path(directory) / name).read_text()
    return subprocess.run(["git", f"--git-dir={MIRROR}", "show", f"HEAD:{ROOT}/{name}"],
                          check=True, capture_output=True, text=True).stdout


def import_upstream(directory: str | None, tiny: bool):
    """Upstream's modules from a fresh temporary copy (`tiny`: widths read from args)."""
    for name in [m for m in sys.modules if m.split(".")[0] in (
            "utils", "criteria", "models_", "modules_", "dataloaders", "dataset")]:
        del sys.modules[name]
    tmp = Path(tempfile.mkdtemp(prefix="rnl_"))
    for name in FILES:
        src = source(directory, name)
        if tiny and name == "models_/gcn_final.py":
            for old, new in WIDTHS.items():
                assert old in src, f"gcn_final.py no longer has {old!r}"
                src = src.replace(old, new)
        (tmp / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp / name).write_text(src)
    (tmp / "fairseq").mkdir()
    (tmp / "fairseq" / "__init__.py").write_text("")
    (tmp / "fairseq" / "utils.py").write_text(FAIRSEQ)
    sys.path.insert(0, str(tmp))
    try:
        gcn = importlib.import_module("models_.gcn_final")
        loader = importlib.import_module("dataloaders.clip_loader")
    finally:
        sys.path.remove(str(tmp))
    return gcn, loader


def stub_imports() -> None:
    torch.Tensor.cuda = lambda self, *a, **k: self  # upstream's `.cuda()`: stay on the CPU
    for name in ("nltk", "gensim", "gensim.models", "h5py"):
        sys.modules[name] = types.ModuleType(name)
    sys.modules["gensim.models"].KeyedVectors = None
    sys.modules["h5py"].File = lambda *a, **k: {}


def randomise(net, gen) -> None:
    """Every parameter random (biases too), scaled by its fan-in."""
    with torch.no_grad():
        for p in net.parameters():
            noise = torch.randn(p.shape, generator=gen)
            p.copy_(noise * (p[0].numel() ** -0.5 if p.ndim > 1 else 0.3))


def samples(loader, gen) -> list[tuple]:
    """Three samples through upstream's `ClipDataset1.__getitem__` (evaluation mode)."""
    raw = []
    for n_words, n_faces, gt in zip(WORD_LENGTHS, PORTRAITS, GT):
        video = torch.randn(T, FRAME + FACE, generator=gen).numpy()
        words = torch.randn(n_words, WORD, generator=gen).numpy()
        faces = (torch.randn(n_faces, D, generator=gen).numpy() if n_faces
                 else np.zeros((1, D), np.float32))
        raw.append((video, words, np.asarray(gt, np.int32), np.asarray([], np.int64),
                    np.asarray([]).astype(np.int32), faces, int(n_faces == 0)))
    base = loader.ClipDataset1.__mro__[1]
    base.__getitem__ = lambda self, i: tuple(np.copy(x) if isinstance(x, np.ndarray) else x
                                             for x in raw[i])
    loader.load_json = lambda path: [None] * len(raw)
    ds = loader.ClipDataset1("", "", "", None, T, WORDS, WORDS, is_training=False)
    return [ds[i] for i in range(len(raw))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--upstream", help="a directory holding upstream's RNL/ tree")
    args = ap.parse_args()
    stub_imports()
    OUT.mkdir(parents=True, exist_ok=True)

    gcn, _ = import_upstream(args.upstream, tiny=False)
    with torch.device("meta"):
        full = torch.nn.DataParallel(gcn.Model(types.SimpleNamespace(**FULL)))
    keys = {k: list(v.shape) for k, v in full.state_dict().items()}
    (OUT / "full_keys.json").write_text(json.dumps(keys, indent=0) + "\n")

    gcn, loader = import_upstream(args.upstream, tiny=True)
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    model = gcn.Model(types.SimpleNamespace(**TINY))
    randomise(model, gen)
    items = samples(loader, gen)
    names = ("frames", "frame_mask", "words", "word_mask", "gt", "label", "label_mask",
             "node_pos", "node_mask", "adj_mat", "face_feats", "face_mask")
    batch = {n: torch.from_numpy(np.stack([it[i] for it in items])) for i, n in enumerate(names)}
    for b, n in enumerate(CLIPS_VALID):
        batch["frame_mask"][b, n:] = 0
    arrays = {n: v.numpy() for n, v in batch.items()}

    seen = {}
    for name, mod in (("video", model.video_encoder), ("query", model.sentence_encoder),
                      ("attended", model.v2s), ("fused", model.rnn)):
        mod.register_forward_hook(lambda m, i, o, name=name: seen.__setitem__(name, o))
    model.eval()
    with torch.no_grad():
        boxes, loss, scores, _, _ = model(**batch)
    arrays |= {"boxes": boxes.numpy(), "scores": scores.numpy(), "loss_eval": loss.numpy()}
    arrays |= {k: v.numpy() for k, v in seen.items()}

    model.train()
    for mod in (model, model.video_encoder, model.sentence_encoder):
        mod.dropout = 0.0
    with torch.no_grad():
        arrays["loss_train"] = model(**batch)[1].numpy()

    torch.save(torch.nn.DataParallel(model).state_dict(), OUT / "rnl.pth")
    np.savez_compressed(OUT / "io.npz", **arrays)
    meta = {"tiny": TINY, "full": FULL, "clips_valid": CLIPS_VALID, "torch": torch.__version__}
    (OUT / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    for p in sorted(OUT.iterdir()):
        print(f"{p.name}: {p.stat().st_size} bytes")
    print({k: (v.shape, v.dtype.name) for k, v in arrays.items()})


if __name__ == "__main__":
    main()
