"""PNG reports: learning curves; `report`, the one way every figure is written.

A figure is a report, never the point of a run: `report` draws and writes it (`written`
writes a report's text file) so that an unwritable `reports/` folder, a font without some
characters of the text (Chinese narrations on a machine without a CJK font) or a drawing
that fails is one warning line on stderr, and the run goes on. A folder and the missing
font are each named once per run (`new_run`, called by the trainer, forgets them), not
once per figure. CJK fonts that are installed are used for the characters DejaVu Sans
lacks.
"""

from __future__ import annotations

import pathlib
import re
import warnings
from collections.abc import Callable
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib import font_manager  # noqa: E402

from vnr import progress  # noqa: E402
from vnr.reports.writer import read_jsonl  # noqa: E402

# Fonts with Chinese characters, used (when installed) after DejaVu Sans for what it lacks.
CJK_FONTS = ("Noto Sans CJK SC", "Noto Sans SC", "Source Han Sans SC", "WenQuanYi Zen Hei",
             "WenQuanYi Micro Hei", "SimHei", "Microsoft YaHei", "PingFang SC",
             "Arial Unicode MS")
_GLYPH = re.compile(r"Glyph (\d+) .*missing from font")


def fonts() -> list[str]:
    """DejaVu Sans, then the installed fonts of `CJK_FONTS` (no warning for absent ones)."""
    have = {f.name for f in font_manager.fontManager.ttflist}
    return ["DejaVu Sans", *(f for f in CJK_FONTS if f in have)]


def save(fig: plt.Figure, out: str | pathlib.Path, dpi: int) -> pathlib.Path:
    """Lays out (tight, unless `fig` has its own layout engine), writes (creating the
    folder) and closes ``fig``; returns the path."""
    try:
        if fig.get_layout_engine() is None:
            fig.tight_layout()
        out = pathlib.Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(out, dpi=dpi)
    finally:
        plt.close(fig)
    return out


_UNWRITABLE: set[pathlib.Path] = set()  # report folders already warned about
_FONT_WARNED: list[str] = []  # the report whose missing characters were warned about


def new_run() -> None:
    """Forgets the folders and the missing font warned about: a new run names each once."""
    _UNWRITABLE.clear()
    _FONT_WARNED.clear()


def _not_written(out: str | pathlib.Path, e: Exception) -> None:
    """One warning line naming `out`; an unwritable folder (OSError) is named once, its
    later reports skipped without a line."""
    folder = pathlib.Path(out).parent
    if isinstance(e, OSError):
        if folder in _UNWRITABLE:
            return
        _UNWRITABLE.add(folder)
    more = f" (nothing more is written to {folder})" if isinstance(e, OSError) else ""
    progress.say(f"warning: report {out} not written: {type(e).__name__}: "
                 f"{' '.join(str(e).split())}{more}")


def written(out: str | pathlib.Path, text: str) -> pathlib.Path | None:
    """`text` written to `out` (its folder made); None, after a warning (`_not_written`),
    when it cannot be: a report's text file never ends the run either."""
    out = pathlib.Path(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
    except OSError as e:
        _not_written(out, e)
        return None
    return out


def report(out: str | pathlib.Path, draw: Callable[..., plt.Figure], *args: Any,
           dpi: int = 100, **kwargs: Any) -> pathlib.Path | None:
    """`draw(*args, **kwargs)` written to `out`; None, after a warning (`_not_written`),
    when it cannot be (an unwritable folder, a drawing that fails). Characters no installed
    font has are one warning per run too (they show as boxes); the figure is still
    written."""
    missing: list[str] = []
    try:
        with warnings.catch_warnings(record=True) as caught, \
                plt.rc_context({"font.family": fonts()}):
            warnings.simplefilter("always")
            path = save(draw(*args, **kwargs), out, dpi)
    except Exception as e:  # noqa: BLE001 (a report never ends the run)
        _not_written(out, e)
        return None
    for w in caught:
        if m := _GLYPH.match(str(w.message)):
            missing.append(chr(int(m.group(1))))
        else:  # not ours to drop: passed on
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if missing and not _FONT_WARNED:  # once per run: every later figure lacks them too
        _FONT_WARNED.append(str(out))
        progress.say(f"warning: report {out}: no installed font has {len(set(missing))} of "
                     f"its characters (e.g. {missing[0]!r}); they show as boxes, here and in "
                     f"the run's other reports (install a CJK font, e.g. Noto Sans CJK, for "
                     f"Chinese text)")
    return path


MAX_PANELS = 15


def learning_curves(jsonl: str | pathlib.Path, out: str | pathlib.Path) -> pathlib.Path | None:
    """`out`: one panel per logged series (train and periodic evaluators), value against
    step, the first `MAX_PANELS` by name; None when nothing was logged twice (or after a
    warning, `report`)."""
    rows = read_jsonl(jsonl)
    return report(out, _curves, rows, dpi=90) if _series(rows) else None


def _series(rows: list[dict]) -> list[str]:
    """The names worth a curve: series (logged at two or more steps), not timings."""
    names = sorted({k for r in rows for k in r if "/" in k})
    # Series only (a metric logged at two or more steps): final results are one point each
    # (results.json); evaluation timings are not learning curves.
    steps = {n: {r["step"] for r in rows if n in r} for n in names}
    return [n for n in names if len(steps[n]) > 1 and not n.endswith("eval_seconds")
            and n not in ("train/lr", "train/nonfinite")][:MAX_PANELS]


def _curves(rows: list[dict]) -> plt.Figure:
    wanted = _series(rows)
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
    return fig
