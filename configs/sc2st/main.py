"""Sc2St contextual retrieval (paper §4.4): script + two LSTM streams + fusion.

    python -m vnr.train --config configs/sc2st/main.py[:ARGS] --workdir DIR

ARGS is a comma-separated list of at most one model and any options:
  sa | gf | lf     the paper's fusion (default sa): SA Eq. 2-3 (attention across the N
                   channels of u), GF Eq. 1 (element-wise cross gates, summed), late fusion
  gf_prose         ours: the GF prose (gated streams concatenated, then an MLP)
  sa_time          ours: attention over the time steps of both streams
  lf_t | lf_v      Table 5 ablations: text context only / visual context only (late fusion)
  moee | cmoee     Table 3 V-MoEE / C-CMoEE (mixture of embedding experts; baselines.py),
                   best checkpoint by validation mean rank (A.1: "for all models")
  experts          the builder config with MoEE expert columns (<source>_experts: scene,
                   object, character; stand-ins in vnr/benchmarks/sc2st/embedders.py);
                   without it MoEE has one expert, the stored keyframe embedding
  paper_experts    with moee|cmoee and lsmdc: MoEE as its code (Miech et al.'s train.py):
                   the paper's experts (builder config lsmdc_paper_experts: DenseNet-161
                   Places365 scene from data.scene_checkpoint, SENet-154 object from
                   data.object_checkpoint, top-100 characters; candidates as lsmdc_paper),
                   word vectors (data.word_vectors, 300-d) + NetVLAD (32 clusters), at most
                   30 words, max-margin ranking loss (margin 0.2) over the candidates, Adam
                   lr 1e-4 decayed by 0.95 each epoch (schedule step_decay), batch 128,
                   50 epochs, each expert's own width as its joint space; with
                   smoke the tiny networks of lsmdc_scratch_experts (data.manual_dir: JPEGs)
  similarity       baseline: cosine of each candidate to keyframe t-1 (nothing trained)
  prior            baseline: random scores (nothing trained)
  paper            the Appendix A.1 setup: Adam, lr 3e-4 with cosine annealing (no
                   warmup), batch 128, a pretrained uncased BERT text encoder
                   (text_encoder=NAME|DIR, default bert-base-uncased from
                   $VNR_ENCODERS_DIR, loaded through the `pretrained` hook), best
                   checkpoint by validation mean rank; with lsmdc, the `lsmdc_paper`
                   corpus: Inception-v3 image features and DenseNet-121 candidate
                   similarity (their weights under $VNR_ENCODERS_DIR; see
                   tfds_builders/sc2st/README.md; --config.data.config=lsmdc keeps CLIP)
  text_encoder=X   the sentence encoder (checkpoint name or directory; scratch:<arch>-<size>)
  steps=N          total training steps
  smoke            tiny sizes for tests (synthetic_tiny corpus, a few steps)
  lsmdc            real data: add --config.data.manual_dir=DIR (LSMDC16 CSVs, meta.csv,
                   frames/ or features/; keyframes by the CLIP of $VNR_ENCODERS_DIR)
  released         the released story10_all_*_no.json storyboards: add
                   --config.data.manual_dir=DIR (story files, lsmdc.json, frames/)

Defaults (not the paper's: ours, sized for a CPU) train on the generated `synthetic`
corpus (built on first use into data.data_dir) with a scratch bert-tiny, AdamW lr 2e-3,
batch 32, the last checkpoint (the MoEE models: the best by validation mean rank). A
300-step run took 12-15 min on a shared 2-core CPU (load average ~30); the benchmark
measured ~0.24 s/step at load ~10.
"""

import ml_collections

from configs import common

MODELS = ("sa", "gf", "lf", "gf_prose", "sa_time", "lf_t", "lf_v", "moee", "cmoee",
          "similarity", "prior")
PAPER_TEXT_ENCODER = "bert-base-uncased"  # §4.4.1: "a pre-trained uncased BERT model"


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    args = common.parse_arg(arg, __file__, (*MODELS, "smoke", "lsmdc", "released", "paper",
                                                   "experts", "paper_experts"),
                            {"text_encoder": str, "steps": int})
    fusion = args.pick(MODELS, "model", "sa")
    baseline = fusion in ("similarity", "prior")  # evaluation only
    source = args.pick(("lsmdc", "released"), "real data source")
    real = source is not None
    c = common.base("sc2st.task", total_steps=0 if baseline else 300,
                    warmup_steps=0 if baseline else 100, lr=2e-3, eval_every=150,
                    ckpt_every=150, keep_ckpts=1)
    c.data = dict(
        config=source or "synthetic",
        data_dir="data/tfds",
        manual_dir="",
        train_split="train",
        val_split="val",
        test_splits=("test",),
        max_tokens=40 if real else 16,
        vocab_size=30522 if real else 1024,
        num_workers=0,  # records are small arrays: the main process keeps up
        word_vectors="",  # MoEE's text (paper_experts): a GloVe text / word2vec binary file
        scene_checkpoint="densenet161_places365.pth.tar",  # paper_experts: CSAIL's Places365
        object_checkpoint="senet154-c7b49a05.pth",  # paper_experts: Cadene's SENet-154
    )
    common.evals(c)  # the test evaluator draws <split>_storyboard.png
    c.model = dict(
        fusion=fusion,
        text_encoder="scratch:bert-tiny",  # or a local pretrained BERT, e.g. bert-base-uncased
        text_overrides=dict(hidden_size=64, intermediate_size=128),
        width=64,
        mlp=128,
        heads=2,
        dropout=0.1,
        sa_channels=8,  # SA: N channels of width U (the paper gives neither)
        sa_unit=32,
        sa_normalise="printed",  # Eq. 3 as printed, or "query" (the usual non-local softmax)
    )
    if fusion in ("moee", "cmoee"):  # A.1's selection rule, read as for every Table 3 model
        c.select = dict(metric="val/mean_rank", mode="min")
    if "paper" in args:  # Appendix A.1
        # Cosine annealing to 0 (PyTorch's CosineAnnealingLR default; the paper names no floor).
        c.update(optimizer="adam", lr=3e-4, schedule="cosine", warmup_steps=0, end_lr_factor=0.0,
                 batch_size=128, eval_batch_size=128)
        c.select = dict(metric="val/mean_rank", mode="min")  # A.1: best validation mean rank
        c.model.text_encoder = PAPER_TEXT_ENCODER
        c.data.update(max_tokens=40, vocab_size=30522)
        if source == "lsmdc":  # A.1's image features, §4.1.3's candidate similarity
            c.data.config = "lsmdc_paper"
    if "experts" in args:
        if source == "released":
            raise ValueError("experts: the released storyboards have no expert columns")
        if c.data.config == "lsmdc_paper":
            raise ValueError("experts with paper,lsmdc: the expert columns are built on the "
                             "CLIP corpus (lsmdc_experts); drop paper or experts")
        c.data.config = f"{c.data.config}_experts"
    if "paper_experts" in args:
        _paper_experts(c, fusion, source, "smoke" in args, "experts" in args or "paper" in args)
    if "text_encoder" in args.values:
        c.model.text_encoder = args.values["text_encoder"]
    if "smoke" in args:
        c.data.config = "synthetic_tiny" if c.data.config == "synthetic" else c.data.config
        if "paper_experts" in args:
            c.model.update(word_dim=16, moee_width=0)
        c.model.update(width=16, mlp=32, heads=2, sa_channels=4, sa_unit=8,
                       text_overrides=dict(hidden_size=32, intermediate_size=64))
        constant = "paper" in args or "paper_experts" in args  # no warmup
        common.smoke(c, steps=(0, 0) if baseline else (4, 0 if constant else 1), every=2)
        c.evals.val.max_examples, c.evals.test.max_examples = 8, 6  # 6 = a short batch
    if "steps" in args.values:
        c.total_steps = 0 if baseline else args.values["steps"]
    return c


def _paper_experts(c: ml_collections.ConfigDict, fusion: str, source: str | None, smoke: bool,
                   other: bool) -> None:
    """MoEE as its code, on the paper's experts (the `paper_experts` option)."""
    if fusion not in ("moee", "cmoee") or other:
        raise ValueError("paper_experts goes with moee or cmoee, without experts or paper")
    if source != "lsmdc" and not smoke:
        raise ValueError("paper_experts needs lsmdc: the experts read the keyframe JPEGs")
    c.data.config = "lsmdc_scratch_experts" if smoke else "lsmdc_paper_experts"
    # MoEE's train.py: Adam, lr 1e-4 decayed by 0.95 each epoch, batch 128, 50 epochs (16330
    # training storyboards / 128 = 128 steps each), margin 0.2; its model: NetVLAD text (32
    # clusters) over 300-d word vectors, joint width per expert.
    c.update(optimizer="adam", lr=1e-4, schedule="step_decay", lr_decay=0.95,
             decay_steps=128, warmup_steps=0, batch_size=128, eval_batch_size=128,
             total_steps=50 * 128, eval_every=5 * 128, ckpt_every=5 * 128)
    c.model.update(moee_text="netvlad", word_dim=300, netvlad_clusters=32, moee_width=0,
                   moee_gate_norm=True, loss="max_margin", margin=0.2)
