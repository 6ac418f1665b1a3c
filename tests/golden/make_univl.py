"""Writes tests/golden/univl/: upstream UniVL (microsoft/UniVL `modules/`) outputs for
tests/models/test_univl.py. Run by hand with torch (never imported by vnr or the tests):

    /work/scratch/torch/bin/python tests/golden/make_univl.py [--upstream DIR_WITH_modules]

Without --upstream the script fetches nothing itself: it copies `modules/*.py` and the
visual / cross / decoder config files out of the mirrored bare git repository
(`git show HEAD:modules/<file>`, default mirror path below) into a temporary directory and
imports them from there, so no upstream code is committed here. `modules/file_utils.py`
(download helpers needing boto3/requests) is replaced by a stub: nothing is downloaded, and
the bert-base-uncased config (an archive upstream downloads) is written out below.

The model is upstream's `UniVL` as pre-training builds it (`do_pretrain` and `stage_two`: text
BERT, visual encoder, cross encoder, decoder, MLM heads, `similarity_dense`,
`normalize_video`), the state dict saved with `torch.save` as `univl.pretrained.bin` is. The
fixture network is tiny (width 16, 2 heads, 2 layers per encoder, 1 decoder layer, a 44-word
WordPiece vocabulary, 12-d video features) with random weights (LayerNorm affine too).
Outputs (eval mode): text and visual hidden states and pooler outputs, the normalised video,
the cross encoder's hidden states and pooled output on matched pairs, the similarity logits
of the cross path (`get_similarity_logits`, stage two) and of the mean-pooling path
(`_pretrain_joint=True`, normalised), and the decoder's caption logits. `full_keys.json` is
the full-size pre-training model's {key: shape} (built on torch's meta device).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import numpy as np
import torch

MIRROR = "/work/.mirror/microsoft+UniVL/repo"  # bare git directory (the `fetch` tool's)
OUT = Path(__file__).resolve().parent / "univl"
FILES = ["__init__.py", "until_config.py", "until_module.py", "module_bert.py",
         "module_visual.py", "module_cross.py", "module_decoder.py", "modeling.py",
         "tokenization.py"]
STUB = "def cached_path(url_or_filename, cache_dir=None):\n    return url_or_filename\n"

# The tiny WordPiece vocabulary: specials, words, sub-words, punctuation.
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "the", "man", "woman", "cuts",
         "cut", "onion", "onions", "into", "small", "pieces", "pan", "in", "oil", "heat",
         "add", "salt", "and", "stir", "##s", "##ing", "##ed", "mix", "bowl", "egg", "then",
         "slice", "tomato", ",", ".", "!", "'", "-", "cook", "water", "boil", "pot", "on", "is"]
SENTENCES = ["The man cuts onions into small pieces.",
             "Heat oil in a pan, then add salt!",
             "a woman is stirring eggs in a bowl and then boils water in a pot on the pan"]
MAX_WORDS, MAX_FRAMES, VIDEO_DIM, WIDTH = 12, 7, 12, 16
VIDEO_LENGTHS = [7, 4, 5]
CAPTION = [[2, 6, 7, 9, 11, 3, 0], [2, 19, 18, 3, 0, 0, 0], [2, 8, 23, 29, 34, 3, 0]]

FULL_BERT = dict(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                 intermediate_size=3072, hidden_act="gelu", hidden_dropout_prob=0.1,
                 attention_probs_dropout_prob=0.1, max_position_embeddings=512,
                 type_vocab_size=2, initializer_range=0.02)


def import_upstream(directory: str | None):
    tmp = Path(tempfile.mkdtemp(prefix="univl_"))
    (tmp / "modules").mkdir()
    for name in FILES:
        if directory:
            src = (Path(directory) / "modules" / name).read_text()
        else:
            src = subprocess.run(["git", f"--git-dir={MIRROR}", "show", f"HEAD:modules/{name}"],
                                 check=True, capture_output=True, text=True).stdout
        (tmp / "modules" / name).write_text(src)
    (tmp / "modules" / "file_utils.py").write_text(STUB)
    configs = {}
    for name in ("visual-base/visual_config.json", "cross-base/cross_config.json",
                 "decoder-base/decoder_config.json"):
        src = (Path(directory) / "modules" / name).read_text() if directory else subprocess.run(
            ["git", f"--git-dir={MIRROR}", "show", f"HEAD:modules/{name}"],
            check=True, capture_output=True, text=True).stdout
        configs[name.split("-")[0]] = json.loads(src)
    sys.path.insert(0, str(tmp))
    from modules import (
        modeling,
        module_bert,
        module_cross,
        module_decoder,
        module_visual,
        tokenization,
    )

    mods = types.SimpleNamespace(modeling=modeling, bert=module_bert, visual=module_visual,
                                 cross=module_cross, decoder=module_decoder,
                                 tokenization=tokenization)
    return mods, configs, tmp


def task_config(layers: dict[str, int], video_dim: int, max_words: int, max_frames: int):
    """The argparse namespace UniVL reads (pre-training, stage two, no MIL)."""
    return types.SimpleNamespace(
        do_pretrain=True, stage_two=True, use_mil=False, local_rank=0, batch_size=1, n_gpu=1,
        n_pair=1, margin=0.1, negative_weighting=1, hard_negative_rate=0.5,
        video_dim=video_dim, max_words=max_words, max_frames=max_frames,
        text_num_hidden_layers=layers["text"], visual_num_hidden_layers=layers["visual"],
        cross_num_hidden_layers=layers["cross"], decoder_num_hidden_layers=layers["decoder"])


def build(mods, bert: dict, visual: dict, cross: dict, decoder: dict, task):
    cfgs = [mods.bert.BertConfig.from_dict(bert), mods.visual.VisualConfig.from_dict(visual),
            mods.cross.CrossConfig.from_dict(cross), mods.decoder.DecoderConfig.from_dict(decoder)]
    for c in cfgs:  # as `PretrainedConfig.get_config(..., type_vocab_size=2)` sets it
        c.type_vocab_size = 2
    return mods.modeling.UniVL(*cfgs, task_config=task)


def tiny_model(mods, configs: dict):
    small = dict(hidden_size=WIDTH, num_attention_heads=2, intermediate_size=32,
                 initializer_range=0.02)
    bert = {**FULL_BERT, **small, "vocab_size": len(VOCAB), "max_position_embeddings": 24}
    visual = {**configs["visual"], **small, "vocab_size": VIDEO_DIM, "max_position_embeddings": 16}
    cross = {**configs["cross"], **small, "max_position_embeddings": 40}
    decoder = {**configs["decoder"], **small, "vocab_size": len(VOCAB),
               "max_target_embeddings": 24}
    layers = {"text": 2, "visual": 2, "cross": 2, "decoder": 1}
    return build(mods, bert, visual, cross, decoder,
                 task_config(layers, VIDEO_DIM, MAX_WORDS, MAX_FRAMES))


def randomise(net: torch.nn.Module, gen: torch.Generator) -> None:
    """Every parameter random (LayerNorm scales near 1), so no zero bias hides a mistake."""
    with torch.no_grad():
        for name, p in net.named_parameters():
            noise = torch.randn(p.shape, generator=gen)
            if "LayerNorm.weight" in name or "norm2d.weight" in name or "layer_norm.weight" in name:
                p.copy_(1 + 0.2 * noise)
            else:
                p.copy_(0.3 * noise)


def tokenize(mods, vocab_file: Path) -> tuple[np.ndarray, np.ndarray]:
    """Upstream's tokenizer with the retrieval loader's layout: [CLS] words [SEP], words cut
    to max_words - 2, zero padding."""
    tok = mods.tokenization.BertTokenizer(str(vocab_file), do_lower_case=True)
    ids = np.zeros((len(SENTENCES), MAX_WORDS), np.int64)
    for i, s in enumerate(SENTENCES):
        words = ["[CLS]", *tok.tokenize(s)[: MAX_WORDS - 2], "[SEP]"]
        ids[i, : len(words)] = tok.convert_tokens_to_ids(words)
    return ids, (ids > 0).astype(np.int64)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--upstream", help="a directory holding upstream's modules/")
    args = ap.parse_args()
    mods, configs, _ = import_upstream(args.upstream)
    torch.manual_seed(0)
    OUT.mkdir(parents=True, exist_ok=True)

    full_layers = {"text": 12, "visual": 6, "cross": 2, "decoder": 3}
    with torch.device("meta"):
        full = build(mods, FULL_BERT, configs["visual"], configs["cross"], configs["decoder"],
                     task_config(full_layers, 1024, 48, 48))
    keys = {k: list(v.shape) for k, v in full.state_dict().items()}
    (OUT / "full_keys.json").write_text(json.dumps(keys, indent=0) + "\n")
    del full

    vocab_file = OUT / "vocab.txt"
    vocab_file.write_text("\n".join(VOCAB) + "\n")
    gen = torch.Generator().manual_seed(0)
    net = tiny_model(mods, configs)
    randomise(net, gen)
    net.eval()
    torch.save(net.state_dict(), OUT / "univl.pretrained.bin")

    ids, mask = tokenize(mods, vocab_file)
    segment = np.zeros_like(ids)
    video = (1.5 * torch.randn(len(VIDEO_LENGTHS), MAX_FRAMES, VIDEO_DIM, generator=gen)
             + 0.5).numpy()
    vmask = (np.arange(MAX_FRAMES)[None] < np.array(VIDEO_LENGTHS)[:, None]).astype(np.int64)
    video[vmask == 0] = 0  # as upstream's loaders pad
    caption = np.array(CAPTION, np.int64)
    t = {k: torch.from_numpy(v) for k, v in dict(ids=ids, mask=mask, segment=segment,
                                                 video=video, vmask=vmask,
                                                 caption=caption).items()}
    out = {}
    with torch.no_grad():
        seq, vis = net.get_sequence_visual_output(t["ids"], t["segment"], t["mask"], t["video"],
                                                  t["vmask"])
        normed = net.normalize_video(t["video"])
        out["video_normalized"] = normed
        out["text_hidden"], out["visual_hidden"] = seq, vis
        out["text_pooled"] = net.bert(t["ids"], t["segment"], t["mask"])[1]
        out["visual_pooled"] = net.visual(normed, t["vmask"])[1]
        cross, pooled, _ = net._get_cross_output(seq, vis, t["mask"], t["vmask"])
        out["cross_hidden"], out["cross_pooled"] = cross, pooled
        out["sim_cross"] = net.get_similarity_logits(seq, vis, t["mask"], t["vmask"])
        out["sim_mean"] = net.get_similarity_logits(seq, vis, t["mask"], t["vmask"],
                                                    _pretrain_joint=True)
        out["decoder_logits"] = net.decoder_caption(
            seq, vis, t["ids"], t["mask"], t["vmask"], t["caption"], (t["caption"] > 0).long(),
            get_logits=True)
    arrays = {"input_ids": ids, "attention_mask": mask, "video": video, "video_mask": vmask,
              "caption_ids": caption}
    stats = {}
    for k, v in out.items():
        arrays[k] = v.numpy()
        stats[k] = [float(v.abs().max()), float(v.std())]
    np.savez_compressed(OUT / "io.npz", **arrays)
    meta = {"sentences": SENTENCES, "max_words": MAX_WORDS, "max_frames": MAX_FRAMES,
            "video_dim": VIDEO_DIM, "width": WIDTH, "heads": 2, "intermediate": 32,
            "layers": {"text": 2, "visual": 2, "cross": 2, "decoder": 1},
            "positions": {"text": 24, "visual": 16, "cross": 40},
            "torch": torch.__version__, "output_abs_max_std": stats}
    (OUT / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    for p in sorted(OUT.iterdir()):
        print(f"{p.name}: {p.stat().st_size} bytes")
    print(json.dumps(stats, indent=1))


if __name__ == "__main__":
    main()
