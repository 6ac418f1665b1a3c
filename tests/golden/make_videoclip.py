"""Writes tests/golden/videoclip/: upstream VideoCLIP (fairseq `examples/MMPT`, the
`MMFusionSeparate` retrieval model) outputs for tests/models/test_videoclip.py. Run by hand
with torch and transformers (never imported by vnr or the tests):

    /work/scratch/torch/bin/python tests/golden/make_videoclip.py [--upstream DIR_WITH_mmpt]

Without --upstream the script copies MMPT's model files (`mmpt/models/mmfusion.py`,
`transformermodel.py`, `mmpt/modules/mm.py`) and its aligner (`mmpt/processors/processor.py`)
out of the mirrored bare fairseq repository (`git show HEAD:examples/MMPT/<file>`) into a
temporary package and imports them from there, so no upstream code is committed here. The
package `__init__`s are empty stand-ins (upstream's register fairseq plugins); fairseq is not
needed. MMPT was written for transformers 3.4; with 4.46.3 three small stand-ins adapt it:

* `transformers.modeling_bert` (3.x's module path) is an alias of
  `transformers.models.bert.modeling_bert`, whose `BertEncoder` is replaced by a subclass
  whose layers take 3.x's positional arguments (`MultiLayerAttentionMaskBertEncoder` passes
  `output_attentions` sixth, where 4.x's `BertLayer` expects `past_key_value`); the
  parameters and the computation are unchanged.
* `PreTrainedModel.from_pretrained` builds from the config instead of downloading
  bert-base-uncased (every weight is overwritten by random values below anyway), with eager
  attention as 3.4 had; the tiny "bert-base-uncased" directory holds a config and a
  WordPiece vocabulary laid out like bert-base-uncased's ([PAD] 0, [UNK] 100, [CLS] 101,
  [SEP] 102, [MASK] 103).
* The checkpoint is written as fairseq's trainer writes `checkpoint_best.pt`: top-level
  `args` (None, legacy), `cfg` (a plain dict), `model` (the state dict under the
  `FairseqMMModel` wrapper's `mmmodel.` prefix, float16 as `--fp16` training saves it, plus
  the `embeddings.position_ids` buffers transformers 3.x kept in state dicts), `criterion`,
  `optimizer_history`, `task_state`, `extra_state` (meters holding NumPy scalars, which a
  restricted unpickler must skip) and `last_optimizer_state`.

Fixture: width 32, 2 heads, FFN 64, 2 video layers, 3 text layers (different, so a swapped
tower cannot pass), vocab 146, 512-d S3D features (upstream's `VideoTokenMLP` input),
`max_video_len` 8, `max_len` 24 (16 caption slots, at most 13 word pieces). Inputs are built
by upstream's `Aligner._build_text_seq` / `_build_video_seq` (videos of 11, 3 and 5 seconds
of L2-normalised features: the first is cut to 8), outputs (eval mode, float32 after
loading the float16 weights, as MMPT's `load_checkpoint` does): `MMFusionSeparate.forward`'s
`pooled_video` / `pooled_text`, the hidden states of `forward_video` / `forward_text`,
`VideoTokenMLP`'s tokens, the retrieval scores of `RetrievalPredictor._aggregate_scores`
(`text @ video.T`), and `pooled_video_short` (only the first 5 slots fed: fewer than
`max_video_len`, so the video [SEP] position is not adjacent). `full_keys.json` is the
full-size model's `{key: shape}` under `mmmodel.` (bert-base-uncased, 6 video layers,
`max_video_len` 32), built on the meta device, with 3.x's `position_ids` buffers added.
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import numpy as np
import torch
import transformers
from transformers.models.bert import modeling_bert

MIRROR = "/work/.mirror/facebookresearch+fairseq/repo"  # bare git directory
OUT = Path(__file__).resolve().parent / "videoclip"
FILES = ["mmpt/models/mmfusion.py", "mmpt/models/transformermodel.py", "mmpt/modules/__init__.py",
         "mmpt/modules/mm.py", "mmpt/processors/processor.py"]
SPECIALS = ["[PAD]", *[f"[unused{i}]" for i in range(99)], "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = ["a", "the", "man", "woman", "cuts", "cut", "onion", "onions", "into", "small",
         "pieces", "pan", "in", "oil", "heat", "add", "salt", "and", "stir", "##s", "##ing",
         "##ed", "mix", "bowl", "egg", "then", "slice", "tomato", ",", ".", "!", "'", "-",
         "cook", "water", "boil", "pot", "on", "is", "with", "knife", "board"]
VOCAB = SPECIALS + WORDS
SENTENCES = ["The man cuts onions into small pieces.",
             "Heat oil in a pan, then add salt!",
             "a woman is stirring eggs in a bowl and then boils water in a pot on the pan"]
WIDTH, HEADS, FFN, VIDEO_LAYERS, TEXT_LAYERS, POSITIONS = 32, 2, 64, 2, 3, 40
VIDEO_DIM, MAX_VIDEO_LEN, MAX_LEN, SHORT = 512, 8, 24, 5
VIDEO_SECONDS = [11, 3, 5]
FULL_BERT = dict(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                 intermediate_size=3072, hidden_act="gelu", hidden_dropout_prob=0.1,
                 attention_probs_dropout_prob=0.1, max_position_embeddings=512,
                 type_vocab_size=2, initializer_range=0.02, layer_norm_eps=1e-12,
                 pad_token_id=0)
POSITION_BUFFERS = ["video_encoder.bert.embeddings.position_ids",
                    "text_encoder.embeddings.position_ids"]


class BertLayer3x(modeling_bert.BertLayer):
    """transformers 3.x's positional call `(h, mask, head_mask, enc, enc_mask,
    output_attentions)` on 4.x's layer (no past key values in an encoder)."""

    def forward(self, hidden_states, attention_mask=None, head_mask=None,
                encoder_hidden_states=None, encoder_attention_mask=None,
                output_attentions=False):
        return super().forward(hidden_states, attention_mask, head_mask, encoder_hidden_states,
                               encoder_attention_mask, past_key_value=None,
                               output_attentions=bool(output_attentions))


class BertEncoder3x(modeling_bert.BertEncoder):
    def __init__(self, config):
        super().__init__(config)
        self.layer = torch.nn.ModuleList(
            [BertLayer3x(config) for _ in range(config.num_hidden_layers)])


def _from_config(cls, name, config=None, **_):
    """Stands in for `from_pretrained`: the architecture of `name`'s config, no download;
    eager attention (3.4's only kind; a config file's `attn_implementation` is not read)."""
    config = config if config is not None else transformers.AutoConfig.from_pretrained(name)
    config._attn_implementation = "eager"
    return cls(config)


def git_show(path: str) -> str:
    return subprocess.run(["git", f"--git-dir={MIRROR}", "show", f"HEAD:examples/MMPT/{path}"],
                          check=True, capture_output=True, text=True).stdout


def import_upstream(directory: str | None) -> types.SimpleNamespace:
    tmp = Path(tempfile.mkdtemp(prefix="videoclip_"))
    for d in ("mmpt", "mmpt/models", "mmpt/modules", "mmpt/processors"):
        (tmp / d).mkdir(parents=True, exist_ok=True)
        (tmp / d / "__init__.py").write_text("")  # stand-ins; modules/__init__ is upstream's
    for name in FILES:
        src = (Path(directory) / name).read_text() if directory else git_show(name)
        (tmp / name).write_text(src)
    alias = types.ModuleType("transformers.modeling_bert")
    alias.__dict__.update(vars(modeling_bert))
    alias.BertEncoder = BertEncoder3x
    sys.modules["transformers.modeling_bert"] = alias
    transformers.PreTrainedModel.from_pretrained = classmethod(_from_config)
    sys.path.insert(0, str(tmp))
    from mmpt.models import mmfusion, transformermodel
    from mmpt.modules import mm
    from mmpt.processors import processor

    return types.SimpleNamespace(mmfusion=mmfusion, transformermodel=transformermodel, mm=mm,
                                 processor=processor, tmp=tmp)


def bert_dir(root: Path, bert: dict) -> Path:
    """A local "bert-base-uncased": config and WordPiece vocabulary."""
    d = root / "bert-base-uncased"
    d.mkdir(exist_ok=True)
    cfg = {**bert, "model_type": "bert", "architectures": ["BertForMaskedLM"]}
    (d / "config.json").write_text(json.dumps(cfg))
    (d / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    (d / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "BertTokenizer", "do_lower_case": True, "model_max_length": 512}))
    return d


def mmpt_config(bert_name: Path, video_layers: int, max_video_len: int, max_len: int):
    """The slice of `projects/retri/videoclip/test_*_zs.yaml` MMFusionSeparate and the
    aligner read."""
    dataset = types.SimpleNamespace(
        bert_name=str(bert_name), train_path=None, num_iso_layer=12, split="test",
        max_video_len=max_video_len, max_len=max_len, use_fast=None)
    model = types.SimpleNamespace(
        model_cls="MMFusionSeparate", mm_encoder_cls=None, video_encoder_cls="MMBertForEncoder",
        text_encoder_cls="BertModel", num_hidden_video_layers=video_layers, use_seg_emb=None)
    return types.SimpleNamespace(dataset=dataset, model=model)


def randomise(net: torch.nn.Module, gen: torch.Generator) -> None:
    """Every parameter random (LayerNorm scales near 1), rounded to float16 as the released
    file stores them, so no zero bias hides a mistake."""
    with torch.no_grad():
        for name, p in net.named_parameters():
            noise = torch.randn(p.shape, generator=gen)
            p.copy_((1 + 0.2 * noise) if "LayerNorm.weight" in name else 0.3 * noise)
            p.copy_(p.half().float())


def fairseq_file(state: dict, positions: int) -> dict:
    """`checkpoint_best.pt` as fairseq's `Trainer.state_dict` lays it out."""
    model = collections.OrderedDict((f"mmmodel.{k}", v.half()) for k, v in state.items())
    for key in POSITION_BUFFERS:
        model[f"mmmodel.{key}"] = torch.arange(positions).expand((1, -1)).clone()
    meters = collections.OrderedDict(
        train=[(10, "loss", "AverageMeter", {"val": np.float64(2.5), "sum": np.float64(25.0),
                                              "count": 10, "round": 3})])
    return {
        "args": None,
        "cfg": {"common": {"fp16": True, "log_interval": 1000}, "task": {"_name": "mmtask"},
                "model": {"_name": "mmmodel", "arch": "mmarch"},
                "optimization": {"lr": [5e-05], "clip_norm": 2.0}},
        "model": model,
        "criterion": None,
        "optimizer_history": [{"criterion_name": "MMCriterion", "optimizer_name": "FP16Optimizer",
                               "lr_scheduler_state": {"best": np.float32(1.25)},
                               "num_updates": 1024}],
        "task_state": {},
        "extra_state": {"metrics": meters, "previous_training_time": 3600.0,
                        "train_iterator": {"epoch": 3, "iterations_in_epoch": 0,
                                           "shuffle": True},
                        "val_loss": np.float64(1.25), "best": np.float64(1.25)},
        "last_optimizer_state": {"state": {0: {"step": 1024, "exp_avg": torch.zeros(16),
                                               "exp_avg_sq": torch.zeros(16)}},
                                 "param_groups": [{"lr": 5e-05, "betas": (0.9, 0.98),
                                                   "params": [0]}],
                                 "loss_scale": 128.0},
    }


def build(up, bert: dict, root: Path, video_layers: int, max_video_len: int, max_len: int):
    cfg = mmpt_config(bert_dir(root, bert), video_layers, max_video_len, max_len)
    return up.mmfusion.MMFusionSeparate(cfg), cfg


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--upstream", help="a directory holding MMPT's mmpt/ package")
    args = ap.parse_args()
    up = import_upstream(args.upstream)
    torch.manual_seed(0)
    OUT.mkdir(parents=True, exist_ok=True)

    with torch.device("meta"):
        full, _ = build(up, FULL_BERT, Path(tempfile.mkdtemp()), 6, 32, 96)
    keys = {f"mmmodel.{k}": list(v.shape) for k, v in full.state_dict().items()}
    keys.update({f"mmmodel.{k}": [1, FULL_BERT["max_position_embeddings"]]
                 for k in POSITION_BUFFERS})
    (OUT / "full_keys.json").write_text(json.dumps(keys, indent=0) + "\n")
    del full

    tiny = {**FULL_BERT, "vocab_size": len(VOCAB), "hidden_size": WIDTH,
            "num_hidden_layers": TEXT_LAYERS, "num_attention_heads": HEADS,
            "intermediate_size": FFN, "max_position_embeddings": POSITIONS}
    net, cfg = build(up, tiny, up.tmp, VIDEO_LAYERS, MAX_VIDEO_LEN, MAX_LEN)
    for tower in (net.text_encoder, net.video_encoder.bert):
        attn = type(tower.encoder.layer[0].attention.self).__name__
        assert attn == "BertSelfAttention", attn  # eager, as transformers 3.4 computed
    gen = torch.Generator().manual_seed(0)
    randomise(net, gen)
    net.eval()
    torch.save(fairseq_file(net.state_dict(), POSITIONS), OUT / "checkpoint_best.pt")
    (OUT / "vocab.txt").write_text("\n".join(VOCAB) + "\n")

    aligner = up.processor.Aligner(cfg.dataset)
    tok = transformers.AutoTokenizer.from_pretrained(cfg.dataset.bert_name, use_fast=False)
    caps, cmasks, vfeats, vmasks = [], [], [], []
    for s, seconds in zip(SENTENCES, VIDEO_SECONDS):
        c, m = aligner._build_text_seq(tok(s, add_special_tokens=False)["input_ids"])
        feat = torch.randn(seconds, VIDEO_DIM, generator=gen)
        feat = torch.nn.functional.normalize(feat, dim=1).half().numpy()  # as extract.py
        v, vm = aligner._build_video_seq(feat)
        caps.append(c), cmasks.append(m), vfeats.append(v), vmasks.append(vm)
    t = {k: torch.stack(v) for k, v in
         dict(caps=caps, cmasks=cmasks, vfeats=vfeats, vmasks=vmasks).items()}
    out = {}
    with torch.no_grad():
        pooled = net(t["caps"], t["cmasks"], t["vfeats"], t["vmasks"])
        out["pooled_video"], out["pooled_text"] = pooled["pooled_video"], pooled["pooled_text"]
        out["video_hidden"] = net.forward_video(t["vfeats"], t["vmasks"], t["caps"], t["cmasks"],
                                                output_hidden_states=True)
        out["text_hidden"] = net.forward_text(t["caps"], t["cmasks"], output_hidden_states=True)
        out["video_tokens"] = net.video_encoder.videomlp(t["vfeats"])
        out["pooled_video_short"] = net.forward_video(
            t["vfeats"][:, :SHORT], t["vmasks"][:, :SHORT], t["caps"], t["cmasks"])
    arrays = {"caps": t["caps"].numpy(), "cmasks": t["cmasks"].numpy().astype(np.int64),
              "vfeats": t["vfeats"].numpy(), "vmasks": t["vmasks"].numpy().astype(np.int64)}
    stats = {}
    for k, v in out.items():
        arrays[k] = v.numpy()
        stats[k] = [float(v.abs().max()), float(v.std())]
    # RetrievalPredictor._aggregate_scores: np.matmul(text_hidden, video_hidden.T)
    arrays["scores"] = np.matmul(arrays["pooled_text"], arrays["pooled_video"].T)
    stats["scores"] = [float(np.abs(arrays["scores"]).max()), float(arrays["scores"].std())]
    np.savez_compressed(OUT / "io.npz", **arrays)
    meta = {"sentences": SENTENCES, "video_seconds": VIDEO_SECONDS, "width": WIDTH,
            "heads": HEADS, "intermediate": FFN,
            "layers": {"video": VIDEO_LAYERS, "text": TEXT_LAYERS}, "positions": POSITIONS,
            "vocab_size": len(VOCAB), "video_dim": VIDEO_DIM, "max_video_len": MAX_VIDEO_LEN,
            "max_len": MAX_LEN, "short": SHORT, "torch": torch.__version__,
            "transformers": transformers.__version__, "output_abs_max_std": stats}
    (OUT / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    for p in sorted(OUT.iterdir()):
        print(f"{p.name}: {p.stat().st_size} bytes")
    print(json.dumps(stats, indent=1))


if __name__ == "__main__":
    main()
