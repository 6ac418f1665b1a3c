"""Movie identity of SYMON videos and the YMS exclusion: title keys (real YMS titles and
both channels' formats), movies.tsv / yt-dlp metadata in the builder, bad input counted and
named, `movie_keys` command, exclusion log, and the features build naming missing files."""

import collections
import json
import logging
import logging.handlers
import shutil

import pytest

from tfds_builders import common
from tfds_builders import symon as builder
from tfds_builders.symon import synthetic, titles
from tfds_builders.symon.symon import SymonConfig
from vnr.benchmarks.symon import exclusion, tools

# The layout of YMS movie_list.txt: the two channels' title formats, one movie twice.
MOVIE_LIST = """0000\tAnt-Man in 4 minutes - (Marvel Phase Two Recap)
0008\tGuardians of the Galaxy in 4 Minutes
0031\tMovie Spoiler Alerts - Guardians of the Galaxy (2014) Video Summary
0027\tMovie Spoiler Alerts - Ghostbusters (1984) Video Summary
0028\tMovie Spoiler Alerts - Ghostbusters (2016) Video Summary
0047\tMovie Spoiler Alerts - Star Wars Ep 1 - The Phantom Menace (1999) Video Summary
0084\tJurassic Park in 4 Minutes_BK
0025\tMovie Spoiler Alerts - Catching Fire - The Hunger Games (2013) Video Summary
"""

SAME = [  # each row: titles of one movie in the formats of different channels
    ("Avengers  Age of Ultron in 4 minutes - (Marvel Phase Two Recap)",
     "Movie Spoiler Alerts - Avengers 2 - Age of Ultron (2015) Video Summary",
     "Avengers: Age of Ultron (2015) | Movie Recap", "Avengers Age of Ultron Explained"),
    ("Thor  The Dark World in 4 minutes - (Marvel Phase Two Recap)",
     "Movie Spoiler Alerts - Thor 2  Dark World (2013) Video Summary", "Thor: The Dark World"),
    ("Stephen King's  It  (1990) in 4 minutes (Movie Recap)",
     "Movie Spoiler Alerts - It (1990) Video Summary", "It (1990) - Full Movie Recap"),
    ("Movie Spoiler Alerts - Star Wars Ep 4 - A New Hope (1977) Video Summary",
     "Star Wars: Episode IV - A New Hope", "Mystery Recapped: Star Wars: A New Hope"),
    ("Movie Spoiler Alerts - Back to the Future Part 1 (1985) Video Summary",
     "Back to the Future (1985) Movie Recap"),
    ("Ant-Man in 4 minutes - (Marvel Phase Two Recap)", "Ant Man", "ANTMAN (2015)"),
]
# Spellings of one movie that only a non-exact rule joins (`titles.match`): official titles
# a SYMON video would carry against the YMS list's spelling of the same movie.
FUZZY = [
    ("The Hunger Games: Mockingjay – Part 1",
     "Movie Spoiler Alerts - Mockingjay Part 1 (2014) - The Hunger Games Video Summary",
     "reordered"),
    ("The Hunger Games: Catching Fire (2013) | Movie Recap",
     "Movie Spoiler Alerts - Catching Fire - The Hunger Games (2013) Video Summary", "reordered"),
    ("Terminator 2: Judgment Day Explained",
     "Movie Spoiler Alerts - Terminator 2  Judgement Day (1991) Video Summary", "one_edit"),
    ("Harry Potter and the Deathly Hallows – Part 1 (2010)",
     "Movie Spoiler Alerts - Harry Potter and the Dealthly Hallows Part 1 (2010) Video Summary",
     "one_edit"),
    ("Man of Steel (2013) - Full Movie Recap",
     "Movie Spoiler Alerts - Superman - Man of Steel (2013) Video Summary", "contained"),
    ("Man of Steel in 4 minutes - (DC Universe Recap)",
     "Movie Spoiler Alerts - Superman - Man of Steel (2013) Video Summary", "contained"),
    ("Catching Fire (2013) Explained",  # a first segment: only with the same year
     "Movie Spoiler Alerts - Catching Fire - The Hunger Games (2013) Video Summary",
     "contained"),
]
DIFFERENT = [("Ghostbusters (1984)", "Ghostbusters (2016)"), ("Iron Man", "Iron Man 2"),
             ("Iron Man 2", "Iron Man 3"), ("Alien", "Aliens"), ("Predator", "Predators"),
             ("The Terminator (1984)", "Terminator 2  Judgement Day (1991)"),
             ("Harry Potter and the Deathly Hallows Part 1",
              "Harry Potter and the Deathly Hallows  Part 2"),
             ("Harry Potter and the Dealthly Hallows Part 1",
              "Harry Potter and the Deathly Hallows  Part 2"),
             ("The Hunger Games: Mockingjay – Part 1", "The Hunger Games: Mockingjay – Part 2"),
             ("The Hunger Games (2012)", "Catching Fire - The Hunger Games (2013)"),
             ("The Hunger Games", "The Hunger Games - Mockingjay - Part 2 (2015)"),
             ("Star Wars (1977)", "Star Wars Ep 5 - The Empire Strikes Back (1980)"),
             ("Captain America: The Winter Soldier", "Captain America: The First Avenger"),
             ("Captain America (2011)", "Captain America  Civil War (2016)"),
             ("Planet of the Apes", "Rise of the Planet of the Apes"),
             ("Kung Fu Panda 2", "Kung Fu Panda 3"), ("Jurassic Park", "Jurassic Park 3"),
             ("Star Wars Ep 5 - The Empire Strikes Back", "Star Wars Ep 6 - Return of the Jedi"),
             ("X-Men Origins - Wolverine (2009)", "X-Men - The Wolverine (2013)"),
             ("Blade Runner (1982)", "Blade Runner 2049 (2017)")]
CHANNEL_WORDS = ("spoiler", "recap", "minute", "summary", "marvel", "youtube", "video", "phase")


def test_title_variants_of_one_movie_share_a_key():
    for row in SAME:
        keys = [titles.movie_key(t) for t in row]
        assert all(titles.same_movie(keys[0], k) for k in keys), (row, keys)
        assert all(titles.movie_key(k) == k for k in keys)  # idempotent
    for a, b in DIFFERENT:  # no rule joins sequels, franchise entries or other years
        assert not titles.same_movie(titles.movie_key(a), titles.movie_key(b)), (a, b)
        assert titles.match(titles.parse(a), titles.parse(b)) == "", (a, b)
        assert len(titles.group([a, b])) == 2, (a, b)  # nor an alias
    for a, b, rule in FUZZY:
        assert titles.match(titles.parse(a), titles.parse(b)) == rule, (a, b)
        assert titles.match(titles.parse(b), titles.parse(a)) == rule, (b, a)
    assert titles.movie_key("Movie Spoiler Alerts - Video Summary") == ""
    assert titles.movie_key("Movie Recap") == ""
    assert titles.movie_key("八佰 (2020) 电影解说") == "八佰电影解说 (2020)"  # any script's letters
    assert titles.merge(["ghostbusters (1984)", "ghostbusters (2016)", "ghostbusters",
                         "thor", "thor (2011)"]) == {
        "ghostbusters (1984)": "ghostbusters (1984)", "ghostbusters (2016)": "ghostbusters (2016)",
        "ghostbusters": "ghostbusters", "thor": "thor (2011)", "thor (2011)": "thor (2011)"}


def test_movie_keys_command(tmp_path, capsys):
    path = tmp_path / "movie_list.txt"
    path.write_text(MOVIE_LIST, encoding="utf-8")
    assert tools.main(["movie_keys", "--movie_list", str(path)]) == 0
    out, err = capsys.readouterr()
    rows = [line.split("\t") for line in out.splitlines()]
    assert [k for _, k in rows] == ["antman", "guardiansofgalaxy (2014)",
                                    "guardiansofgalaxy (2014)", "ghostbusters (1984)",
                                    "ghostbusters (2016)", "starwarsphantommenace (1999)",
                                    "jurassicpark", "catchingfirehungergames (2013)"]
    assert rows[1][0] == "Guardians of the Galaxy in 4 Minutes"
    assert "8 titles, 7 distinct movies, 0 without a key" in err
    assert tools.main(["movie_keys", "--movie_list", str(tmp_path / "none.txt")]) == 2


def test_real_yms_movie_list(shared_data):
    path = str(shared_data / "yms" / "movie_list.txt")
    rows, counts, joins = tools.movie_keys(path)
    assert counts == {"titles": 94, "movies": 82, "without_key": 0}
    for title, key in rows:
        assert key and not any(w in key for w in CHANNEL_WORDS), (title, key)
    by_key = collections.defaultdict(list)
    for title, key in rows:
        by_key[key].append(title)
    merged = {k: len(v) for k, v in by_key.items() if len(v) > 1}
    assert merged == {"guardiansofgalaxy (2014)": 3, "avengersageofultron (2015)": 2,
                      "bladerunner (1982)": 2, "captainamericawintersoldier (2014)": 2,
                      "harrypotteranddealthlyhallows (2010)": 2, "jurassicpark (1993)": 2,
                      "avengers (2012)": 2, "thordarkworld (2013)": 2, "it (1990)": 2,
                      "captainamericafirstavenger (2011)": 2, "manofsteel (2013)": 2}
    assert sorted(by_key["manofsteel (2013)"]) == [
        "Man of Steel in 4 minutes - (DC Universe Recap)",
        "Movie Spoiler Alerts - Superman - Man of Steel (2013) Video Summary"]
    assert sorted(by_key["captainamericafirstavenger (2011)"]) == [
        "Captain America  The First Avenger in 4 minutes (Marvel Phase One Recap)",
        "Movie Spoiler Alerts - Captain America (2011) - Video Summary"]
    assert [j.rsplit(" (", 1)[1] for j in joins] == ["alias)", "contained)"]
    # Sequels and franchise entries stay apart: distinct movies among the titles naming each.
    entries = {"Iron Man": 3, "Captain America": 3, "Kung Fu Panda": 3, "Back to the Future": 3,
               "Terminator": 5, "X-Men": 8, "X2": 1, "Star Wars": 7, "Hunger Games": 4,
               "Harry Potter": 2, "Ghostbusters": 3, "Jurassic Park": 2, "Mission Impossible": 3,
               "Thor": 2, "Avengers": 2, "Alien": 2, "Dark Knight": 2, "Guardians": 1}
    assert {e: len({k for t, k in rows if e in t}) for e in entries} == entries
    # Official titles a SYMON video would carry find their YMS movie, each by its rule.
    movies = exclusion.listed_movies(exclusion.read_movie_list(path))
    official = {"The Hunger Games: Mockingjay – Part 1": ("mockingjayhungergames (2014)",
                                                          "reordered"),
                "The Hunger Games: Catching Fire": ("catchingfirehungergames (2013)",
                                                    "reordered"),
                "Terminator 2: Judgment Day": ("terminatorjudgementday (1991)", "one_edit"),
                "Harry Potter and the Deathly Hallows: Part 1 (2010)": (
                    "harrypotteranddealthlyhallows (2010)", "one_edit"),
                "X2: X-Men United": ("x2xmen2 (2003)", "alias"),
                "Captain America: The First Avenger (2011)": (
                    "captainamericafirstavenger (2011)", "exact"),
                "Superman: Man of Steel": ("manofsteel (2013)", "exact"),
                "Rogue One: A Star Wars Story": ("rogueone (2016)", "alias"),
                "Iron Man 2 (2010)": ("ironman2", "exact")}
    for title, want in official.items():
        got = [(m.key, rule) for m, rule, _ in builder.movies_of(titles.parse(title), movies)]
        assert got == [want], (title, got)


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    """The generated release with every way (and every bad way) to name a video's movie."""
    root = tmp_path_factory.mktemp("symon_movies")
    truth = synthetic.write_corpus(root, "tiny", seed=4)
    ids = sorted(truth)
    info = root / "info"
    info.mkdir()
    (root / "movies.tsv").write_text(
        f"{ids[0]}\tGhostbusters (1984)\n{ids[1]}\tSome Movie\nnot-a-video\tAlien\n"
        f"a line without a tab\n{ids[10]}\tMovie Recap!\n", encoding="utf-8")
    meta = {  # yt-dlp info.json of other videos (SYMON channels' title formats)
        ids[2]: {"title": "Movie Spoiler Alerts - Ghostbusters (1984) Video Summary"},
        ids[3]: {"title": "Ghostbusters Explained", "description": "Enjoy!\nMovie name: "
                 "Ghostbusters (2016)\n#recap"},
        ids[4]: {"title": "Mystery Recapped: Jurassic Park (1993) Explained"},
        ids[5]: {"description": "no title here"},
        ids[6]: {"title": "Movie Recap"},
        ids[9]: {"title": "The Hunger Games: Catching Fire | Movie Recap"},
    }
    for vid, m in meta.items():
        (info / f"{vid}.info.json").write_text(json.dumps(m), encoding="utf-8")
    (info / f"{ids[7]}.info.json").write_text("{not json", encoding="utf-8")
    (info / f"{ids[8]}.description").write_text("🎬 Film: Blade Runner\nsubscribe!",
                                                encoding="utf-8")
    return root, ids


def _records(root, tmp_path, config="text_only"):
    b = builder.prepare(config, tmp_path, manual_dir=root)
    recs = {r["video_id"]: r for s in b.info.splits
            for r in builder.data_source(config, s, tmp_path, build=False)}
    summary = common.read_summary(b)
    assert not any(k.startswith("movie_source:") for k in summary["skipped"])  # information
    return recs, {**summary["skipped"], **summary["noted"]}


@pytest.fixture(scope="module")
def built(release, tmp_path_factory):
    """The release built (text_only): (records by video id, skip counts, build warnings)."""
    handler = logging.handlers.BufferingHandler(10_000)
    logging.getLogger().addHandler(handler)
    level = logging.getLogger().level
    logging.getLogger().setLevel(logging.WARNING)
    try:
        recs, skipped = _records(release[0], tmp_path_factory.mktemp("symon_movies_tfds"))
    finally:
        logging.getLogger().removeHandler(handler)
        logging.getLogger().setLevel(level)
    return recs, skipped, "\n".join(r.getMessage() for r in handler.buffer)


def test_builder_movie_identity_counted_and_bad_input_named(release, built):
    _, ids = release
    recs, skipped, text = built
    got = {v: (recs[v]["movie_key"], recs[v]["movie_source"]) for v in ids[:11]}
    assert got == {ids[0]: ("ghostbusters (1984)", "movies.tsv"),
                   ids[1]: ("somemovie", "movies.tsv"),
                   ids[2]: ("ghostbusters (1984)", "info.json"),
                   ids[3]: ("ghostbusters (2016)", "info.json"),
                   ids[4]: ("jurassicpark (1993)", "info.json"),
                   ids[5]: ("", ""), ids[6]: ("", ""), ids[7]: ("", ""),
                   ids[8]: ("bladerunner", "description"),
                   ids[9]: ("hungergamescatchingfire", "info.json"),
                   ids[10]: ("", "")}  # its movies.tsv name is only a recap tag
    assert recs[ids[5]]["movie_id"] == ids[5]  # unknown: a movie of its own
    assert recs[ids[0]]["movie_id"] == "Ghostbusters (1984)"  # the user's name, verbatim
    assert recs[ids[0]]["franchise"] == recs[ids[2]]["franchise"]  # one movie, one split
    assert skipped["movie_source:movies.tsv"] == 2 and skipped["movie_source:info.json"] == 4
    assert skipped["movie_source:description"] == 1
    assert skipped["movie_source:unknown"] == len(recs) - 7
    for reason in ("movies_tsv:unknown_video", "movies_tsv:bad_line", "info_json:bad_json",
                   "info_json:no_title"):
        assert skipped[reason] == 1, (reason, skipped)
    assert skipped["movie:title_normalises_to_nothing"] == 2  # an info.json title, a tsv name
    assert "not-a-video" in text and "a line without a tab" in text and "'Movie Recap'" in text
    assert f"movies.tsv {ids[10]} 'Movie Recap!'" in text
    assert f"{ids[7]}.info.json" in text and f"{ids[5]}.info.json" in text


def test_yms_exclusion_logs_what_it_removed_and_what_matched_nothing(release, built, tmp_path,
                                                                     caplog):
    _, ids = release
    recs = built[0]
    videos = [recs[v] for v in sorted(recs)]
    listed = tmp_path / "movie_list.txt"
    listed.write_text(MOVIE_LIST, encoding="utf-8")
    with pytest.raises(ValueError, match=r"url_list.txt is missing: the YMS test videos"):
        exclusion.exclude_movies(videos, str(listed), "train")
    # YMS's own videos by id (two of them are videos of this release with no movie name).
    (tmp_path / "url_list.txt").write_text(
        f"0000\thttps://youtu.be/{ids[5]}\n0001\thttps://www.youtube.com/watch?v={ids[6]}\n"
        "0002\thttps://youtu.be/AAAAAAAAAAA\n")
    with caplog.at_level(logging.WARNING):
        keep, info = exclusion.exclude_movies(videos, str(listed), "train")
    assert sorted(info["removed"]) == sorted([ids[0], ids[2], ids[3], ids[4], ids[9], ids[5],
                                              ids[6]])
    assert info["removed_by_id"] == sorted([ids[5], ids[6]], key=[v["video_id"] for v in
                                                                 videos].index)
    assert info["listed_videos"] == 3 and len(keep) == len(videos) - 7
    assert "2 of the removed videos are YMS videos themselves (by id" in caplog.text
    assert info["movies"] == 7 and info["unknown_movie_videos"] == len(recs) - 9  # 8 titles
    assert info["unmatched"] == ["antman", "guardiansofgalaxy (2014)",
                                 "starwarsphantommenace (1999)"]  # movies, by key
    assert info["non_exact"] == [  # the one removal no exact key made, with its YMS title
        f"{ids[9]} 'The Hunger Games: Catching Fire | Movie Recap' ~ 'Movie Spoiler Alerts - "
        "Catching Fire - The Hunger Games (2013) Video Summary' (reordered)"]
    assert "removed 7 of" in caplog.text and "one of the 7 movies" in caplog.text
    assert "3 listed movies matched no video" in caplog.text
    assert "1 removal(s) by a non-exact title match only" in caplog.text


def test_features_build_names_the_missing_files(tmp_path):
    root = tmp_path / "m"
    synthetic.write_corpus(root, "tiny", seed=2)
    n = len(list((root / "features").glob("*.npy")))
    shutil.rmtree(root / "features")
    cfg = SymonConfig(name="features_missing", fps=synthetic.FPS)
    with pytest.raises(common.ManualDirError) as err:
        builder.prepare(cfg, tmp_path / "d", manual_dir=root)
    msg = str(err.value)
    assert "\n" not in msg and f"{n} of {n} videos unusable (video:missing_features {n})" in msg
    assert msg.count("features/syn") == 5 and "features/<id>.npy" in msg


def test_real_symon_sample_movies_and_features(shared_data, tmp_path):
    _, skipped = _records(shared_data / "symon", tmp_path)
    assert skipped["movie_source:narration"] + skipped["movie_source:unknown"] == 40
    assert 5 <= skipped["movie_source:narration"] <= 15  # the narrator names the film
    with pytest.raises(common.ManualDirError, match="40 of 40 videos unusable") as err:
        builder.prepare("features", tmp_path / "f", manual_dir=shared_data / "symon")
    assert "features/-1AcV48-GpU.npy" in str(err.value)
