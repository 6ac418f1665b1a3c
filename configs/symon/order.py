"""SYMON segment ordering across a cut (§6.2, Eq. 4).

    python -m vnr.train --config configs/symon/order.py[:ARGS] --workdir DIR

ARGS (comma-separated): text_video (default: segment features + narration) or video_only
(text replaced by zeros); smoke (tiny sizes for tests). Defaults use the generated
`synthetic` SYMON corpus; for real features pass --config.data.config=features
--config.data.manual_dir=DIR.
"""

import importlib.util
import pathlib

import ml_collections


def _common():
    path = pathlib.Path(__file__).with_name("common.py")
    spec = importlib.util.spec_from_file_location("_symon_common", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    common = _common()
    args = common.parse_args(arg, {"text_video", "video_only", "smoke"}, __file__)
    if {"text_video", "video_only"} <= args:
        raise ValueError("pass text_video or video_only, not both")
    c = common.base("symon.order", "smoke" in args)
    c.model.use_text = "video_only" not in args
    c.best_metric = "" if "smoke" in args else "accuracy"
    return c
