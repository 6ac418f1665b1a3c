"""Sc2St's MoEE rows with MoEE's own components (#43 item 5): the paper's experts
(DenseNet-161 Places365, SENet-154) read from their published file formats, word vectors +
NetVLAD text, MoEE's gated units, the max-margin loss; and the DenseNet-121 corpus of the
similarity baseline."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from tests import ROOT
from vnr import config as config_lib
from vnr.benchmarks.sc2st import baselines, embedders, experts, smoke_inputs, task, words
from vnr.data.word_vectors import WordVectorsError
from vnr.models.encoders.loading import CheckpointError
from vnr.models.netvlad import GatedEmbeddingUnit, NetVLAD
from vnr.ops import ranking


def get_config(arg):
    return config_lib.load(f"{ROOT / 'configs/sc2st/main.py'}:{arg}")


def test_paper_experts_config_is_moee():
    """moee,paper_experts,lsmdc: the paper's experts on lsmdc_paper's candidates, MoEE's
    text, units, loss and optimiser (Miech et al.'s train.py defaults)."""
    cfg = get_config("moee,paper_experts,lsmdc")
    b = task.builder_config(cfg)
    paper = task.builder_config(get_config("paper,lf,lsmdc"))
    assert cfg.data.config == "lsmdc_paper_experts"
    assert dict(b.experts) == {"scene": 2208, "object": 2048, "character": 100}
    assert dict(b.expert_encoders) == {"scene": "densenet161_places365", "object": "senet154"}
    assert experts.width("scene", "densenet161_places365") == 2208
    assert experts.width("object", "senet154") == 2048
    same = ("encoder", "candidate_encoder", "seed", "num_candidates", "similar_frac",
            "same_movie_frac", "fractions", "length", "isolated", "max_gap")
    assert all(getattr(b, k) == getattr(paper, k) for k in same)  # the same candidates
    assert (cfg.optimizer, cfg.lr, cfg.schedule, cfg.batch_size) == ("adam", 1e-4,
                                                                     "step_decay", 128)
    assert (cfg.lr_decay, cfg.decay_steps, cfg.total_steps) == (0.95, 128, 50 * 128)
    m = cfg.model
    assert (m.moee_text, m.word_dim, m.netvlad_clusters, m.moee_width, m.moee_gate_norm,
            m.loss, m.margin) == ("netvlad", 300, 32, 0, True, "max_margin", 0.2)
    assert cfg.select.metric == "val/mean_rank"
    assert (cfg.data.scene_checkpoint, cfg.data.object_checkpoint) == (
        "densenet161_places365.pth.tar", "senet154-c7b49a05.pth")
    assert get_config("cmoee,paper_experts,lsmdc").data.config == "lsmdc_paper_experts"
    for bad in ("sa,paper_experts,lsmdc", "moee,paper_experts",
                "moee,experts,paper_experts,lsmdc"):
        with pytest.raises(ValueError, match="paper_experts"):
            get_config(bad)
    cfg.data.manual_dir = "/x"
    with pytest.raises(ValueError, match="data.word_vectors"):
        task.validate(cfg)
    cfg.data.word_vectors = "/nowhere/glove.txt"
    with pytest.raises(FileNotFoundError, match="/nowhere/glove.txt"):
        task.validate(cfg)


def test_moee_units_are_gated_embedding_units_with_batch_norm():
    """The paper rows' model: NetVLAD (32 clusters) over the word vectors, a
    GatedEmbeddingUnit with batch norm per expert and side, each expert's own width; the
    scores against a NumPy reading of the parts at evaluation."""
    cfg = get_config("moee,paper_experts,lsmdc")
    model = nnx.eval_shape(lambda: task.make_model(cfg, nnx.Rngs(0)))
    assert isinstance(model.text, NetVLAD) and model.text.cluster_size == 32
    assert model.text.out_dim == 300 * 32
    for unit, dim in zip(model.image_units, (2208, 2048, 100), strict=True):
        assert isinstance(unit, GatedEmbeddingUnit) and unit.cg.batch_norm is not None
        assert unit.fc.kernel.shape == (dim, dim)  # joint width = the expert's (MoEE)
    rng = np.random.default_rng(0)
    small = baselines.MoEE(context=False, feature_dim=8, width=0, rngs=nnx.Rngs(1),
                           experts={"scene": 6, "object": 5}, text="netvlad", word_dim=4,
                           clusters=3)
    batch = {"words": rng.normal(size=(2, 10, 7, 4)).astype(np.float32)}
    for n, d in (("scene", 6), ("object", 5)):
        batch[f"c_{n}"] = rng.normal(size=(2, 9, 11, d)).astype(np.float32)
    batch["c_object"][:, :, :4] = 0.0  # object missing for candidates 0..3

    @nnx.jit
    def run(small, batch):
        small(batch, train=True)  # moves the batch statistics away from their init
        sent = small.text(batch["words"][:, 1:].reshape(18, 7, 4), train=False).reshape(
            2, 9, -1)
        units = [(small.text_units[e](sent, train=False),
                  small.image_units[e](batch[f"c_{n}"], train=False))
                 for e, n in enumerate(("scene", "object"))]
        return small(batch, train=False), sent, units

    got, sent, units = jax.device_get(run(small, batch))
    sims = [np.einsum("brw,brcw->brc", t, c) for t, c in units]
    logits = sent @ np.asarray(small.weights.kernel.value) + np.asarray(small.weights.bias.value)
    w = np.exp(logits - logits.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    wt = w[:, :, None, :] * np.stack([np.ones((2, 9, 11)), batch["c_object"].any(-1)], -1)
    wt /= wt.sum(-1, keepdims=True)
    np.testing.assert_allclose(got, wt[..., 0] * sims[0] + wt[..., 1] * sims[1], rtol=1e-4,
                               atol=1e-5)
    np.testing.assert_allclose(got[:, :, :4], sims[0][:, :, :4], rtol=1e-4, atol=1e-5)
    assert not np.allclose(np.asarray(small.text.batch_norm.mean.value), 0.0)


def test_max_margin_loss_over_the_candidates():
    """model.loss=max_margin: MoEE's hinge (margin 0.2) of the right candidate against each
    other one, over the real storyboards' rounds."""
    cfg = get_config("moee,paper_experts,smoke")
    rng = np.random.default_rng(1)
    scores = rng.normal(size=(3, 9, 20)).astype(np.float32)
    batch = {"answer": rng.integers(0, 20, (3, 9)).astype(np.int32),
             "mask": np.array([True, True, False])}
    loss, aux = task.loss_fn(cfg, lambda b, train, rngs: jnp.asarray(scores), batch, None)
    pos = np.take_along_axis(scores, batch["answer"][..., None], -1)
    hinge = np.maximum(0.0, 0.2 - pos + scores)
    hinge[np.arange(20)[None, None] == batch["answer"][..., None]] = 0.0
    want = (hinge.sum(-1) / 19)[:2].mean()
    assert float(loss) == pytest.approx(want, rel=1e-5)
    assert float(loss) == pytest.approx(float(ranking.candidate_max_margin_loss(
        scores, batch["answer"], 0.2, np.broadcast_to(batch["mask"][:, None], (3, 9)))))
    assert "r1" in aux


def test_smoke_checkpoints_are_the_published_formats(tmp_path):
    """The generated checkpoints go through the published files' readers: CSAIL's layout
    (`state_dict` of `module.`-prefixed legacy names) and Cadene's plain state dict; a
    Places365 file of another class count stops with one line naming it."""
    from vnr.models.encoders.torch_checkpoint import read_torch_checkpoint

    places = smoke_inputs.tiny_places365(tmp_path / "p")
    assert places == tmp_path / "p"
    raw = read_torch_checkpoint(places / "densenet161_places365.pth.tar")
    assert all(k.startswith("module.") for k in raw)
    assert "module.features.denseblock1.denselayer1.norm.1.weight" in raw
    assert raw["module.classifier.weight"].shape == (365, 23)
    scene = experts.places365_expert("tiny", checkpoint=str(places))
    senet = experts.senet_expert("tiny", checkpoint=str(smoke_inputs.tiny_senet154(
        tmp_path / "s")))
    assert (scene.dim, senet.dim) == (23, 64)
    from vnr.models.encoders import densenet

    other = dataclasses.replace(experts.arch("scene", "tiny"), num_classes=10)
    sd = smoke_inputs.random_state_dict(lambda r: densenet.DenseNet(other, r), 0)
    bad = smoke_inputs.save_torch({"state_dict": {f"module.{k}": v for k, v in sd.items()}},
                                  tmp_path / "bad" / "densenet161_places365.pth.tar")
    with pytest.raises(CheckpointError, match="10 classes") as e:
        experts.places365_expert("tiny", checkpoint=str(bad))
    assert str(bad) in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(ValueError, match="architecture 'resnet'"):
        experts.arch("scene", "resnet")


def test_experts_need_jpegs_and_bind_their_checkpoints(tmp_path):
    from tfds_builders.sc2st import Keyframe

    frames = smoke_inputs.frames_corpus(tmp_path / "f")
    jpgs = sorted((frames / "frames").rglob("*.jpg"))[:3]
    expert = experts.senet_expert("tiny", checkpoint=str(smoke_inputs.tiny_senet154(
        tmp_path / "s")))
    keys = [Keyframe(str(j), "m", "s", (), np.zeros(32, np.float32), j) for j in jpgs]
    out = expert.encode_keyframes(keys)
    assert out.shape == (3, 64) and np.isfinite(out).all() and not np.allclose(out[0], out[1])
    with pytest.raises(ValueError, match="need keyframe images"):
        expert.encode_keyframes([dataclasses.replace(keys[0], path=None)])
    b = task.builder_config(get_config("moee,paper_experts,lsmdc"))
    data = get_config("moee,paper_experts,lsmdc").data
    data.scene_checkpoint = "/ckpt/p.pth.tar"
    models = embedders.builder_models(b, data)
    assert models["experts"]["scene"].keywords == {"checkpoint": "/ckpt/p.pth.tar"}
    assert models["experts"]["object"].keywords == {"checkpoint": "senet154-c7b49a05.pth"}
    assert models["candidate_embedder"] is embedders.image_embedder
    assert embedders.builder_models(task.builder_config(get_config("moee,experts,lsmdc")))[
        "experts"] is embedders.DEFAULT_EXPERTS  # the CLIP stand-ins stay an option


def test_word_vectors_text(tmp_path):
    """Tokens as written else lower-cased, at most 30, zero padded; a malformed file stops
    with one line naming it."""
    path = tmp_path / "glove.txt"
    path.write_text("the 1 0\nDoor 0 1\nopens 1 1\n")
    sentences = ["The Door opens now.", "the " * 40]
    table = words.load(str(path), frozenset(words.vocabulary(sentences)))
    assert set(table.words) == {"the", "Door", "opens"}
    out = words.embed(table, sentences, max_words=30)
    assert out.shape == (2, 30, 2)
    np.testing.assert_array_equal(out[0, :3], [[1, 0], [0, 1], [1, 1]])
    assert not out[0, 3:].any() and out[1].any(-1).sum() == 30
    for text, what in (("a 1 2\nb 1\n", "1 values"), ("a 1 2\na 3 4\n", "word 'a'")):
        bad = tmp_path / f"bad{len(text)}.txt"
        bad.write_text(text)
        with pytest.raises(WordVectorsError, match=what) as e:
            words.load(str(bad), frozenset({"a"}))
        assert str(bad) in str(e.value) and "\n" not in str(e.value)


def test_similarity_reads_densenet121_features():
    """t3-similarity's corpus stores DenseNet-121's pooled features and has lsmdc_paper's
    storyboards and candidates (every field that picks them is the same)."""
    cfg = get_config("similarity,lsmdc")
    cfg.data.config = "lsmdc_paper_densenet"
    b = task.builder_config(cfg)
    paper = task.builder_config(get_config("paper,lf,lsmdc"))
    assert (b.feature_encoder, b.feature_dim, b.candidate_encoder) == ("densenet121", 1024,
                                                                       "densenet121")
    differ = {f.name for f in dataclasses.fields(b) if getattr(b, f.name) != getattr(paper,
                                                                                   f.name)}
    assert differ == {"name", "description", "feature_encoder", "feature_dim"}
    models = embedders.builder_models(b)
    assert models["feature_embedder"] is models["candidate_embedder"] is embedders.image_embedder
    assert isinstance(embedders.image_embedder("scratch:tiny"), embedders.DenseNetScorer)


# The smoke inputs' V-MoEE training (expert columns built from the loaded networks, then two
# steps), and a bad word-vector file stopping it in one line, are checked on the smoke
# reproduction's run: tests/reproduce/test_smoke_sc2st.py::test_paper_experts_build_and_train_smoke
# and ::test_a_bad_word_vector_file_stops_before_training.
