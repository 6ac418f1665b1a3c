"""Writes tests/golden/cn_clip/: upstream Chinese-CLIP (OFA-Sys/Chinese-CLIP,
`cn_clip.clip.model.CLIP`, the model its training code saves) outputs for
tests/models/test_cn_clip.py. Run by hand with torch (never imported by vnr or the tests):

    /work/scratch/torch/bin/python tests/golden/make_cn_clip.py [--upstream REPO_GIT_DIR]

Movie101 publishes its fine-tuned ChineseCLIP-huge (`cnclip-huge-movie101.pt`) as the
training code writes checkpoints (`cn_clip/training/main.py`: `epoch`, `step`, `name`,
`state_dict` of the DistributedDataParallel-wrapped model, hence `module.` keys, and
`optimizer`), not in the Hugging Face layout. The script copies upstream's `model.py`,
`modeling_bert.py` and `configuration_bert.py` out of the mirrored repository (`git show
HEAD:cn_clip/clip/<file>`) into a temporary package whose `__init__` stands in for the
tokenizer (only its `[PAD]` id is read), builds the CLIP at toy widths (text hidden 32, FFN
64; vision hidden 40 with 4 heads of 10 and upstream's fixed 4 x width MLP, 160; 2 layers
each, 16-px images, patch 4, vocabulary 100, projection 24), randomises it as
make_chinese_clip.py does, and writes `epoch_latest.pt` in the training layout (an Adam
state included). Outputs: `encode_image` and `encode_text` (upstream masks the text by
`ids != [PAD]`) and `logit_scale`. `full_keys.json`: the ViT-H-14 + RoBERTa-wwm-ext-large
model's `{key: shape}` (its model_configs JSONs), built on the meta device, with `module.`.
"""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
OUT = HERE / "cn_clip"
MIRROR = Path("/work/.mirror/OFA-Sys+Chinese-CLIP/repo")
FILES = ("model.py", "modeling_bert.py", "configuration_bert.py")
TINY = dict(embed_dim=24, image_resolution=16, vision_layers=2, vision_width=40,
            vision_patch_size=4, vision_head_width=10, vocab_size=100,
            text_attention_probs_dropout_prob=0.0, text_hidden_act="gelu",
            text_hidden_dropout_prob=0.0, text_hidden_size=32, text_initializer_range=0.02,
            text_intermediate_size=64, text_max_position_embeddings=64,
            text_num_attention_heads=4, text_num_hidden_layers=2, text_type_vocab_size=2)
IMAGES, TEXTS, LENGTH = 2, 3, 7


def upstream(repo: Path, into: Path) -> object:
    """Upstream's CLIP class from the mirrored repository, importable without its tokenizer."""
    pkg = into / "cn_clip" / "clip"
    pkg.mkdir(parents=True)
    (into / "cn_clip" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text(
        "class _Tok:\n    vocab = {'[PAD]': 0}\n\n_tokenizer = _Tok()\n")
    for name in FILES:
        text = subprocess.run(["git", f"--git-dir={repo}", "show", f"HEAD:cn_clip/clip/{name}"],
                              check=True, capture_output=True, text=True).stdout
        (pkg / name).write_text(text)
    sys.path.insert(0, str(into))
    return importlib.import_module("cn_clip.clip.model").CLIP


def randomise(net: torch.nn.Module, gen: torch.Generator) -> None:
    sys.path.insert(0, str(HERE))
    from make_chinese_clip import randomise as hf_randomise

    hf_randomise(net, gen)  # the same scales as the Hugging Face fixture


def huge(clip: type) -> dict[str, list[int]]:
    configs = {}
    for name in ("ViT-H-14.json", "RoBERTa-wwm-ext-large-chinese.json"):
        text = subprocess.run(["git", f"--git-dir={MIRROR}", "show",
                               f"HEAD:cn_clip/clip/model_configs/{name}"],
                              check=True, capture_output=True, text=True).stdout
        configs.update(json.loads(text))
    with torch.device("meta"):
        model = clip(**configs)
    return {f"module.{k}": list(v.shape) for k, v in model.state_dict().items()}


def hf_config() -> object:
    """The Hugging Face `ChineseCLIPConfig` of the tiny model (vnr builds its towers from it;
    OpenAI CLIP's vision MLP is 4 x width wide, its LayerNorms eps 1e-5)."""
    from transformers import ChineseCLIPConfig

    t = TINY
    return ChineseCLIPConfig(
        projection_dim=t["embed_dim"],
        text_config=dict(vocab_size=t["vocab_size"], hidden_size=t["text_hidden_size"],
                         num_hidden_layers=t["text_num_hidden_layers"],
                         num_attention_heads=t["text_num_attention_heads"],
                         intermediate_size=t["text_intermediate_size"], hidden_act="gelu",
                         max_position_embeddings=t["text_max_position_embeddings"],
                         type_vocab_size=t["text_type_vocab_size"], layer_norm_eps=1e-12,
                         pad_token_id=0),
        vision_config=dict(hidden_size=t["vision_width"], num_hidden_layers=t["vision_layers"],
                           num_attention_heads=t["vision_width"] // t["vision_head_width"],
                           intermediate_size=4 * t["vision_width"],
                           patch_size=t["vision_patch_size"], image_size=t["image_resolution"],
                           hidden_act="quick_gelu", layer_norm_eps=1e-5,
                           projection_dim=t["embed_dim"]))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--upstream", type=Path, default=MIRROR)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        clip = upstream(args.upstream, Path(tmp))
        gen = torch.Generator().manual_seed(1)
        net = clip(**TINY)
        randomise(net, gen)
        pixels = torch.randn((IMAGES, 3, 16, 16), generator=gen)
        ids = torch.randint(1, TINY["vocab_size"], (TEXTS, LENGTH), generator=gen)
        ids[0, 0] = ids[1, 0] = ids[2, 0] = 2  # a [CLS]-like first token
        ids[1, 4:] = 0  # a padded row
        with torch.no_grad():
            image = net.encode_image(pixels)
            text = net.encode_text(ids)
        OUT.mkdir(exist_ok=True)
        opt = torch.optim.Adam(net.parameters(), lr=1e-5)
        net(pixels, ids)[0].sum().backward()
        opt.step()  # an optimizer state, as the training checkpoint holds one
        with torch.no_grad():  # the saved weights are the ones the outputs came from
            image = net.encode_image(pixels)
            text = net.encode_text(ids)
        torch.save({"epoch": 3, "step": 30, "name": "tiny",
                    "state_dict": {f"module.{k}": v for k, v in net.state_dict().items()},
                    "optimizer": opt.state_dict()}, OUT / "epoch_latest.pt")
        np.savez_compressed(OUT / "io.npz", pixel_values=pixels.numpy(), input_ids=ids.numpy(),
                            image_features=image.numpy(), text_features=text.numpy(),
                            logit_scale=net.logit_scale.detach().numpy())
        (OUT / "full_keys.json").write_text(json.dumps(huge(clip), indent=0))
        hf_config().save_pretrained(OUT / "hf")  # the same model in transformers' layout
        (OUT / "meta.json").write_text(json.dumps(
            {"torch": torch.__version__, "tiny": TINY, "upstream": subprocess.run(
                ["git", f"--git-dir={args.upstream}", "rev-parse", "HEAD"], check=True,
                capture_output=True, text=True).stdout.strip()}, indent=1))


if __name__ == "__main__":
    main()
