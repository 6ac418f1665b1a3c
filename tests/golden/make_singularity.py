"""Writes tests/golden/singularity/: Singularity (jayleicn/singularity, `models/
model_retrieval_base.py`, `models/xbert.py`, Hugging Face's `BeitModel`) outputs for
tests/models/test_singularity.py. Run by hand with torch (never imported by vnr or the tests):

    /work/scratch/torch/bin/python tests/golden/make_singularity.py [--upstream CHECKOUT]

Without --upstream the script copies upstream's `models/` files out of the mirrored git
repository (`git show HEAD:<path>`, default mirror below) into a temporary directory and
imports them from there, so no upstream code is committed here. Needs `transformers` (4.46.3
works: BeitModel and xbert's imports) and scipy (upstream's `models/utils.py`); timm is not
imported by these files. Three stand-ins, all outside the computation:

* `SingularityRetrievalBase.build_huggingface_vit_with_image_size` downloads BEiT weights
  from the hub; it is replaced by `BeitModel(BeitConfig(..., image_size), add_pooling_layer
  =True)` from the config values (what it builds once the weights are loaded);
* xbert's `BertModel.from_pretrained` / `BertForMaskedLM.from_pretrained` (downloads) build
  the model from the given config instead;
* upstream hard-codes `self.vision_width = 768` / `self.text_width = 768`; the copied source
  reads `config.vision_width` (default 768) so a tiny model can be built.

transformers 4.46 computes BEiT's `relative_position_index` on the fly; the 4.15 the
authors used (environment.yaml) registered it as a persistent buffer, so the released
checkpoints carry `...relative_position_bias.relative_position_index` [N+1, N+1] per layer:
the pre-training fixture and `full_keys.json` get them added (values from transformers'
own `generate_relative_position_index`).

Fixtures (random weights at a useful scale, eval mode):
* `singularity_tiny_pt.pth`: upstream's pre-training model (`models/model_pretrain.py`:
  `text_encoder` is xbert's `BertForMaskedLM`, keys `text_encoder.bert.*` and the MLM head
  `text_encoder.cls.*`), BEiT 2 layers (16px images, patch 4, width 32, 2 heads), xbert
  2 text + 1 fusion layers (width 32), embed_dim 16, single-frame (no temporal encoder);
  run on 2 videos of 2 frames and 2 padded texts.
* `singularity_temporal_tiny_ft.pth`: the retrieval model (`models/model_retrieval.py`:
  `text_encoder` is xbert's `BertModel`, keys `text_encoder.*`) with the temporal variant
  (`add_temporal_embed`, `temporal_vision_encoder` of 2 layers, 2 temporal embeddings), run
  on 2 and 3 frames (3 > 2: upstream interpolates the temporal embeddings).
* `io.npz`: inputs and outputs; `meta.json`: the tiny sizes; `full_keys.json`: {key: shape}
  of the full-size released pre-training checkpoints `singularity_17m.pth` and
  `singularity_temporal_17m.pth` (upstream's configs: BERT-base, fusion_layer 9, BEiT-base
  224, embed_dim 256; 1 / 4 temporal embeddings), built on torch's meta device.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch
from torch import nn

MIRROR = "/work/.mirror/jayleicn+singularity/repo"
OUT = Path(__file__).resolve().parent / "singularity"
FILES = ("models/__init__.py", "models/model_retrieval_base.py", "models/model_retrieval.py",
         "models/model_pretrain.py", "models/xbert.py", "models/utils.py",
         "configs/config_bert.json", "configs/beit-base-patch16-224-pt22k-ft22k.json")
BEIT = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
            patch_size=4, image_size=16, layer_norm_eps=1e-12, layer_scale_init_value=0.1,
            use_mean_pooling=True, use_relative_position_bias=True,
            use_shared_relative_position_bias=False, use_absolute_position_embeddings=False,
            use_mask_token=False, hidden_act="gelu", drop_path_rate=0.1,
            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
TEXT = dict(vocab_size=50, hidden_size=32, num_hidden_layers=3, num_attention_heads=2,
            intermediate_size=64, max_position_embeddings=24, type_vocab_size=2,
            pad_token_id=0, layer_norm_eps=1e-12, hidden_act="gelu", fusion_layer=2,
            encoder_width=32, hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
            initializer_range=0.02)
EMBED_DIM, FRAMES = 16, 2
IDS = np.array([[2, 11, 23, 7, 3, 0, 0], [2, 40, 5, 9, 17, 31, 3]], np.int64)
WIDTH_LINES = ("self.vision_width = 768", "self.text_width = 768")


class Cfg(dict):
    """The attribute access upstream uses on its OmegaConf config."""

    def __getattr__(self, name: str):
        try:
            return self[name]
        except KeyError as e:
            raise AttributeError(name) from e


def cfg_of(tree: dict) -> Cfg:
    return Cfg({k: cfg_of(v) if isinstance(v, dict) else v for k, v in tree.items()})


def read(directory: str | None, path: str) -> str:
    if directory:
        return (Path(directory) / path).read_text()
    return subprocess.run(["git", f"--git-dir={MIRROR}", "show", f"HEAD:{path}"],
                          check=True, capture_output=True, text=True).stdout


def import_upstream(directory: str | None) -> tuple[SimpleNamespace, Path]:
    tmp = Path(tempfile.mkdtemp(prefix="singularity_"))
    for path in FILES:
        src = read(directory, path)
        if path.endswith("model_retrieval_base.py"):
            for line in WIDTH_LINES:
                assert src.count(line) == 1, line
                attr = line.split(".")[1].split(" ")[0]
                src = src.replace(line, line.replace("768", f"config.get({attr!r}, 768)"))
        (tmp / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp / path).write_text(src)
    sys.path.insert(0, str(tmp))
    from models import model_pretrain, model_retrieval, model_retrieval_base, xbert
    from transformers import BeitConfig, BeitModel

    def build_vit(cls, model_card: str, image_size: int) -> nn.Module:
        beit = json.loads(read(directory, FILES[-1])) if model_card == "full" else BEIT
        drop = ("note", "architectures", "url", "model_type", "torch_dtype",
                "transformers_version")
        keep = {k: v for k, v in beit.items() if k not in drop}
        keep.update(image_size=image_size, attn_implementation="eager")
        return BeitModel(BeitConfig(**keep), add_pooling_layer=True)

    def from_config(cls, name, config, output_loading_info=False, **kw):
        return cls(config, **kw), {}

    model_retrieval_base.SingularityRetrievalBase.build_huggingface_vit_with_image_size = (
        classmethod(build_vit))
    xbert.BertModel.from_pretrained = classmethod(from_config)
    xbert.BertForMaskedLM.from_pretrained = classmethod(from_config)
    mods = SimpleNamespace(pretrain=model_pretrain, retrieval=model_retrieval, xbert=xbert,
                           beit=BeitModel)
    return mods, tmp


def config(bert_json: Path, *, vit: str, image_res: int, embed_dim: int, width: int,
           frames: int, temporal: int) -> Cfg:
    """Upstream's yaml fields the model reads (`configs/pretrain.yaml`, `ret_*.yaml`)."""
    return cfg_of(dict(
        text_encoder="bert-base-uncased", bert_config=str(bert_json), vit_type="beit",
        vit_name_or_pretrained_path=vit, image_res=image_res, embed_dim=embed_dim, temp=0.07,
        vision_width=width, text_width=width, debug=False, mlm_prob=0.5,
        video_input=dict(num_frames=frames), add_temporal_embed=temporal > 0,
        temporal_vision_encoder=dict(enable=temporal > 0, num_layers=temporal or 2,
                                     update_pooler_embed=False),
        loss_weight=dict(itc=1.0, itm=1.0, mlm=1.0), itm_hard_neg=True))


def rel_index(window: int) -> torch.Tensor:
    from transformers.models.beit.modeling_beit import BeitRelativePositionBias

    return BeitRelativePositionBias.generate_relative_position_index(None, (window, window))


def with_index_buffers(sd: dict, layers: int, value) -> dict:
    """`sd` with the persistent `relative_position_index` buffers transformers 4.15 saved
    after each layer's table (`value()`: the buffer, or its shape for `full_keys.json`)."""
    out = {}
    for k, v in sd.items():
        out[k] = v
        if k.endswith("relative_position_bias.relative_position_bias_table"):
            out[k.rsplit(".", 1)[0] + ".relative_position_index"] = value()
    assert sum(k.endswith("relative_position_index") for k in out) == layers
    return out


def meta_keys(ctor) -> dict[str, list[int]]:
    """{key: shape} of a full-size model, its parameters moved to meta as they are
    registered (BEiT's drop-path schedule calls `.item()`, which the meta device refuses)."""
    register = nn.Module.register_parameter

    def to_meta(self: nn.Module, name: str, p: nn.Parameter | None) -> None:
        register(self, name, None if p is None else nn.Parameter(p.to("meta")))

    nn.Module.register_parameter = to_meta
    try:
        model = ctor()
    finally:
        nn.Module.register_parameter = register
    return {k: list(v.shape) for k, v in model.state_dict().items()}


def randomise(net: nn.Module, gen: torch.Generator) -> None:
    """Weights at a scale where every part matters: linears ~ N(0, 1/fan_in), random
    biases, LayerNorm affines, layer scales, position-bias tables and temporal embeddings."""
    with torch.no_grad():
        for name, p in net.named_parameters():
            if name.endswith("relative_position_bias_table") or name == "temporal_embeddings":
                p.copy_(torch.randn(p.shape, generator=gen))
            elif name == "temp":
                p.fill_(0.05)
            elif p.ndim >= 2:
                p.copy_(torch.randn(p.shape, generator=gen) / np.sqrt(p[0].numel()))
            elif "lambda" in name or ("norm" in name.lower() and name.endswith("weight")):
                p.copy_(1 + 0.2 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
    net.eval()


def text_input() -> SimpleNamespace:
    ids = torch.from_numpy(IDS)
    return SimpleNamespace(input_ids=ids, attention_mask=(ids != 0).long())


def fused_cls(model: nn.Module, text_embeds, text_mask, image_embeds) -> torch.Tensor:
    """Upstream's ITM path (`get_itm_loss`, `retrieval_utils.evaluation`): the text encoder
    in `mode="fusion"` over the frames' tokens, [CLS] of the last layer."""
    atts = torch.ones(image_embeds.shape[:-1], dtype=torch.long)
    out = model.get_text_encoder()(encoder_embeds=text_embeds, attention_mask=text_mask,
                                   encoder_hidden_states=image_embeds,
                                   encoder_attention_mask=atts, return_dict=True, mode="fusion")
    return out.last_hidden_state[:, 0]


def run_single(model: nn.Module, video: torch.Tensor, arrays: dict) -> None:
    text = text_input()
    image_embeds, pooled = model.encode_image(video)
    text_embeds, pooled_text = model.encode_text(text)
    sim, _ = model.get_sim(pooled, pooled_text)  # retrieval scoring: t = 1
    sim_temp, _ = model.get_sim(pooled, pooled_text, t=model.temp)
    frame_feats = torch.nn.functional.normalize(model.vision_proj(pooled), dim=-1)
    text_feats = torch.nn.functional.normalize(model.text_proj(pooled_text), dim=-1)
    # every (text i, video j) pair, row-major in (i, j)
    ti = torch.arange(2).repeat_interleave(2)
    vj = torch.arange(2).repeat(2)
    cls = fused_cls(model, text_embeds[ti], text.attention_mask[ti], image_embeds[vj])
    arrays.update(pt_image_embeds=image_embeds, pt_pooled=pooled, pt_text_embeds=text_embeds,
                  pt_frame_feats=frame_feats, pt_text_feats=text_feats, pt_sim=sim,
                  pt_sim_temp=sim_temp, pt_fused_cls=cls, pt_itm_logits=model.itm_head(cls))


def run_temporal(model: nn.Module, video3: torch.Tensor, arrays: dict) -> None:
    text = text_input()
    text_embeds, pooled_text = model.encode_text(text)
    arrays["ft_text_embeds"] = text_embeds
    for n in (2, 3):
        image_embeds, pooled = model.encode_image(video3[:, :n].contiguous())
        cls = fused_cls(model, text_embeds, text.attention_mask, image_embeds)
        sim, _ = model.get_sim(pooled, pooled_text)
        arrays.update({f"ft{n}_image_embeds": image_embeds, f"ft{n}_pooled": pooled,
                       f"ft{n}_sim": sim, f"ft{n}_fused_cls": cls,
                       f"ft{n}_itm_logits": model.itm_head(cls)})
    model.config.temporal_vision_encoder["update_pooler_embed"] = True
    arrays["ft3_pooled_update"] = model.encode_image(video3)[1]
    model.config.temporal_vision_encoder["update_pooler_embed"] = False


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--upstream", help="a jayleicn/singularity checkout")
    args = ap.parse_args()
    up, tmp = import_upstream(args.upstream)
    torch.manual_seed(0)
    OUT.mkdir(parents=True, exist_ok=True)

    full = {}
    for name, frames, temporal in (("singularity_17m.pth", 1, 0),
                                   ("singularity_temporal_17m.pth", 4, 2)):
        cfg = config(tmp / "configs/config_bert.json", vit="full", image_res=224,
                     embed_dim=256, width=768, frames=frames, temporal=temporal)
        keys = meta_keys(lambda cfg=cfg: up.pretrain.Singularity(config=cfg, tokenizer=None))
        full[name] = with_index_buffers(keys, 12, lambda: [14 * 14 + 1] * 2)
    (OUT / "full_keys.json").write_text(json.dumps(full, indent=0) + "\n")

    bert_json = tmp / "tiny_bert.json"
    bert_json.write_text(json.dumps(TEXT))
    gen = torch.Generator().manual_seed(0)
    video3 = torch.randn((2, 3, 3, BEIT["image_size"], BEIT["image_size"]), generator=gen)
    arrays: dict = {"video": video3[:, :FRAMES].contiguous(), "video3": video3, "text_ids": IDS,
                    "text_mask": (IDS != 0).astype(np.int64)}
    cfg = config(bert_json, vit="tiny", image_res=BEIT["image_size"], embed_dim=EMBED_DIM,
                 width=TEXT["hidden_size"], frames=1, temporal=0)
    pt = up.pretrain.Singularity(config=cfg, tokenizer=None)
    randomise(pt, gen)
    cfg = config(bert_json, vit="tiny", image_res=BEIT["image_size"], embed_dim=EMBED_DIM,
                 width=TEXT["hidden_size"], frames=FRAMES, temporal=2)
    ft = up.retrieval.Singularity(config=cfg, tokenizer=None)
    randomise(ft, gen)
    with torch.no_grad():
        run_single(pt, video3[:, :FRAMES].contiguous(), arrays)
        run_temporal(ft, video3, arrays)
    arrays = {k: v.numpy() if isinstance(v, torch.Tensor) else v for k, v in arrays.items()}

    window = BEIT["image_size"] // BEIT["patch_size"]
    extra = {"epoch": 9, "global_step": 1234, "config": {"vit_type": "beit", "temp": 0.07}}
    sd = with_index_buffers(dict(pt.state_dict()), BEIT["num_hidden_layers"],
                            lambda: rel_index(window))
    torch.save({"model": sd, **extra}, OUT / "singularity_tiny_pt.pth")
    torch.save({"model": ft.state_dict(), **extra}, OUT / "singularity_temporal_tiny_ft.pth")
    np.savez_compressed(OUT / "io.npz", **arrays)
    stats = {k: [float(np.abs(v).max()), float(v.std())] for k, v in arrays.items()
             if v.dtype == np.float32}
    meta = {"beit": BEIT, "text": TEXT, "embed_dim": EMBED_DIM, "frames": FRAMES,
            "temporal_layers": 2, "torch": torch.__version__, "output_abs_max_std": stats}
    (OUT / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    for p in sorted(OUT.iterdir()):
        print(f"{p.name}: {p.stat().st_size} bytes")
    print(json.dumps(stats, indent=1))


if __name__ == "__main__":
    main()
