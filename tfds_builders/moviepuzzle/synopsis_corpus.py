"""The synthetic synopsis corpus (MoviePuzzle Table 4's task on generated clips).

The synthetic corpus's clips (same clips as `synthetic*` for the same seed and sizes;
`synthetic.make_clip` is pure) each with a paragraph written from the clip's latent story by
`describe_clip`. Nothing is written to disk. The builder (`moviepuzzle.py`) imports this
module; the reader lives in `synopsis.py`.
"""

from __future__ import annotations

from PIL import Image

from tfds_builders.moviepuzzle import story, synthetic

TOPIC_PHRASE = {
    "meal": "dinner",
    "repair": "a repair",
    "plan": "a plan",
    "friend": "an old friend",
    "call": "a phone call",
    "letter": "a letter",
    "quarrel": "a quarrel",
}


def _names(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def describe_clip(movie: dict, clip: dict) -> str:
    """A synopsis paragraph of a synthetic clip from its latent layout and story tags
    (`synthetic.make_clip` output): per scene who is there and where, what they do (walk to
    the door / talk about a script topic), which items the hero finds."""
    frames, sentences = clip["frames"], []
    cast = movie["cast"]
    found = dict(clip["pickups"])
    for s, loc in enumerate(clip["locs"]):
        idx = [i for i, f in enumerate(frames) if f["scene"] == s]
        present = sorted({c for i in idx for c, _ in frames[i]["chars"]})
        place = movie["locations"][loc]["name"]
        who = _names([cast[c]["name"] for c in present])
        if s == 0:
            sentences.append(f"{who} {'is' if len(present) == 1 else 'are'} in the {place}.")
        else:
            sentences.append(f"Then {who} {'goes' if len(present) == 1 else 'go'} to the "
                             f"{place}.")
        topics = [t[1] for i in idx for t in clip.get("tags", [[]] * len(frames))[i]
                  if t[1] in story.SCRIPTS]
        if frames[idx[0]]["action"]:
            sentences.append(f"{cast[0]['name']} walks to the door.")
        elif topics:
            sentences.append(f"They talk about {TOPIC_PHRASE.get(topics[0], topics[0])}.")
        for i in idx:
            if i in found:
                sentences.append(f"{cast[0]['name']} finds the {found[i]}.")
    return " ".join(sentences)


def synthetic_pairs(seed: int, sizes: str | dict[str, int]) -> dict[str, list[dict]]:
    """{split: [example dict]} for the synthetic synopsis configs, in the plan's order.

    The clips, frames and subtitles are those `synthetic.write_corpus(seed, sizes)` writes
    (`clip_id`s too); `synopsis` is `describe_clip`.
    """
    sizes = synthetic._preset(sizes)  # noqa: SLF001 - the same presets as the clip corpus
    movies: dict[int, dict] = {}
    backgrounds: dict[int, dict[int, Image.Image]] = {}
    out: dict[str, list[dict]] = {s: [] for s in synthetic.SPLITS}
    for split, i, clip_id, m in synthetic.corpus_plan(seed, sizes):
        if m not in movies:
            movies[m] = synthetic.make_movie(seed, m)
            backgrounds[m] = {j: synthetic.render_location(loc)
                              for j, loc in enumerate(movies[m]["locations"])}
        clip, subtitles = synthetic.make_clip(seed, split, i, movies[m])
        n = clip["n"]
        out[split].append({
            "clip_id": str(clip_id),
            "movie_id": movies[m]["tt_id"],
            "frames": [synthetic.render_frame(movies[m], backgrounds[m], f)
                       for f in clip["frames"]],
            "subtitles": [" ".join(s.strip() for s in ls if s.strip()) for ls in subtitles],
            "img_id": list(range(n)),
            "shot_id": [f["shot"] for f in clip["frames"]],
            "scene_id": [f["scene"] for f in clip["frames"]],
            "position": list(range(n)),
            "synopsis": describe_clip(movies[m], clip),
        })
    return out
