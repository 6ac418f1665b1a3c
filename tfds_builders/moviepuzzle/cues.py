"""How much order signal each modality of the synthetic corpus carries: rule-based oracles.

The oracles read the generator's latent layout (not the pixels) but only what a frame shows:
- vision: the hero's visible item count (more items = later), and, inside an action scene, the
  mean on-screen distance of the visible characters to the door (closer = later);
- text: two lines of the same event instance (earlier stage = earlier), else the mean relative
  stage of the frames' event lines as a weak vote; filler and empty frames say nothing.
Pairs with no vote count 0.5. Each clip is then ordered by its pairwise votes (Copeland) and
scored with OS2. Run `python -m tfds_builders.moviepuzzle.cues` to print the table.
"""

from __future__ import annotations

import itertools

import numpy as np

from tfds_builders.moviepuzzle import synthetic as syn


def to_screen(p: np.ndarray, camera: tuple[int, int, int, bool]) -> np.ndarray:
    """World point -> pixel coordinates in a frame shot by `camera` (x, y, size, mirrored)."""
    x, y, size, mirror = camera
    q = np.array([(p[0] - x), (p[1] - y)]) * (syn.FRAME / size)
    return np.array([syn.FRAME - q[0], q[1]]) if mirror else q


def frame_views(movie: dict, clip: dict) -> list[dict]:
    """Per frame, what the camera shows: door distance (pixels), hero's item count or None."""
    views = []
    for f in clip["frames"]:
        screen = lambda p, cam=f["camera"]: to_screen(p, cam)  # noqa: E731
        door = screen(syn.door_point(movie["locations"][f["loc"]]))
        shown = {c: screen(p) for c, p in f["chars"]}
        shown = {c: q for c, q in shown.items() if np.all((q > -2) & (q < syn.FRAME + 2))}
        dist = float(np.mean([np.linalg.norm(q - door) for q in shown.values()])) if shown else None
        views.append(
            {
                "scene": f["scene"],
                "action": f["action"],
                "door_distance": dist,
                "items": len(f["items"]) if 0 in shown else None,
            }
        )
    return views


def _vision_vote(a: dict, b: dict) -> float:
    if a["items"] is not None and b["items"] is not None and a["items"] != b["items"]:
        return float(np.sign(b["items"] - a["items"]))
    da, db = a["door_distance"], b["door_distance"]
    if a["scene"] == b["scene"] and a["action"] and da is not None and db is not None:
        if abs(da - db) > 1:
            return float(np.sign(da - db))
    return 0.0


def _text_vote(ta: list, tb: list) -> float:
    if not ta or not tb:
        return 0.0
    for x, y in itertools.product(ta, tb):
        if x[0] == y[0] and x[2] != y[2]:
            return float(np.sign(y[2] - x[2]))
    sa = np.mean([t[2] / (t[3] - 1) for t in ta])
    sb = np.mean([t[2] / (t[3] - 1) for t in tb])
    return 0.5 * float(np.sign(sb - sa))


def vote_matrix(movie: dict, clip: dict, vision: bool, text: bool) -> np.ndarray:
    """W[i, j] > 0: the oracle puts true frame i before frame j."""
    views, tags, n = frame_views(movie, clip), clip["tags"], clip["n"]
    w = np.zeros((n, n))
    for i, j in itertools.combinations(range(n), 2):
        v = (_vision_vote(views[i], views[j]) if vision else 0.0) + (
            _text_vote(tags[i], tags[j]) if text else 0.0
        )
        w[i, j], w[j, i] = v, -v
    return w


def oracle_scores(
    seed: int = 0, sizes: str | dict = "small", split: str = "test_out_domain", clips: int = 150
) -> dict[str, dict[str, float]]:
    """Pairwise accuracy and Copeland-order OS2 of the vision / text / both oracles."""
    sizes = syn._preset(sizes)
    plan = [p for p in syn.corpus_plan(seed, sizes) if p[0] == split][:clips]
    rng = np.random.default_rng(0)
    out: dict[str, dict[str, list]] = {
        k: {"pairwise": [], "os2": []} for k in ("vision", "text", "both")
    }
    movies: dict[int, dict] = {}
    for _, index, _, m in plan:
        movie = movies.setdefault(m, syn.make_movie(seed, m))
        clip, _ = syn.make_clip(seed, split, index, movie)
        iu = np.triu_indices(clip["n"], 1)
        for name, (vis, txt) in {"vision": (1, 0), "text": (0, 1), "both": (1, 1)}.items():
            w = vote_matrix(movie, clip, bool(vis), bool(txt))
            out[name]["pairwise"].append(
                np.where(w[iu] > 0, 1.0, np.where(w[iu] < 0, 0.0, 0.5)).mean()
            )
            pos = np.argsort(np.argsort(-(w.sum(1) + rng.uniform(0, 1e-3, clip["n"]))))
            out[name]["os2"].append(np.mean(pos[iu[0]] < pos[iu[1]]))
    return {k: {m: round(float(np.mean(v)), 3) for m, v in d.items()} for k, d in out.items()}


if __name__ == "__main__":
    for split in ("test_in_domain", "test_out_domain"):
        for name, scores in oracle_scores(split=split).items():
            print(
                f"{split:16s} {name:7s} pairwise={scores['pairwise']:.3f} os2={scores['os2']:.3f}"
            )
