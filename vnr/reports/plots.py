"""PNG reports: learning curves; `save` for the figures benchmarks draw themselves."""

from __future__ import annotations

import pathlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from vnr.reports.writer import read_jsonl  # noqa: E402


def save(fig: plt.Figure, out: str | pathlib.Path, dpi: int) -> pathlib.Path:
    """Lays out, writes (creating the folder) and closes ``fig``; returns the path."""
    fig.tight_layout()
    out = pathlib.Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=dpi)
    plt.close(fig)
    return out


MAX_PANELS = 15


def learning_curves(jsonl: str | pathlib.Path, out: str | pathlib.Path) -> pathlib.Path | None:
    """One panel per logged series (train and periodic evaluators), value against step;
    the first `MAX_PANELS` by name."""
    rows = read_jsonl(jsonl)
    names = sorted({k for r in rows for k in r if "/" in k})
    # Series only (a metric logged at two or more steps): final results are one point each
    # (results.json); evaluation timings are not learning curves.
    steps = {n: {r["step"] for r in rows if n in r} for n in names}
    wanted = [n for n in names if len(steps[n]) > 1 and not n.endswith("eval_seconds")
              and n not in ("train/lr", "train/nonfinite")][:MAX_PANELS]
    if not wanted:
        return None
    cols = min(3, len(wanted))
    nrows = -(-len(wanted) // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(4.2 * cols, 3 * nrows), squeeze=False)
    for ax, name in zip(axes.flat, wanted):
        # After a resume, steps repeat: the later row wins (the run that continued).
        pts = sorted({r["step"]: r[name] for r in rows if name in r}.items())
        ax.plot(*zip(*pts), marker="." if len(pts) < 30 else None)
        ax.set_title(name)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(wanted):]:
        ax.axis("off")
    return save(fig, out, dpi=90)
