"""Settings shared by the SYMON configs (order.py and retrieval.py)."""

import ml_collections

from configs import common


def base(task: str, smoke: bool) -> ml_collections.ConfigDict:
    """The SYMON data, model and loop settings of `task`; `smoke`: tiny sizes for tests."""
    c = common.base(task, batch_size=64, eval_batch_size=64, total_steps=1500)
    c.data = dict(
        config="synthetic",  # "features" for real SYMON features (add data.manual_dir)
        data_dir="data/tfds",
        manual_dir="",
        train_split="train",
        val_split="val",
        test_splits=("test",),
        segment_seconds=4.0,  # 4-second segments on each side of a cut (items of both)
        max_tokens=64,  # set per task (retrieval 64, ordering 128)
        vocab_size=8192,
        num_workers=0,
    )
    common.evals(c)  # the test evaluator draws <split>_order.png / _retrieval.png
    c.model = dict(width=128, layers=1, heads=4, mlp=256, dropout=0.1)
    if smoke:
        c.data.config = "synthetic_tiny"
        c.data.update(max_tokens=16, vocab_size=1024)
        c.model.update(width=32, heads=2, mlp=64)
        common.smoke(c, batch=16)
        c.evals.val.max_examples, c.evals.test.max_examples = 40, 40
    return c
