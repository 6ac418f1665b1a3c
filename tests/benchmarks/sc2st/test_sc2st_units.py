"""Sc2St pure modules without TFDS: text processing, LSMDC parsing, stories, candidates."""

import collections
import dataclasses
import itertools
import pathlib
import types

import numpy as np
import pytest

from tfds_builders.sc2st import candidates, extras, keyframes, lsmdc, story, text
from tfds_builders.sc2st.skips import Skips


# ----------------------------------------------------------------------------- text
@pytest.mark.parametrize("raw, want", [
    # Fig. 2: "(1) ... lays down the receiver (2) then crosses to the window."
    ("In an office, the girl on the phone lays down the receiver then crosses to the window.",
     ["In an office, the girl on the phone lays down the receiver",
      "then crosses to the window."]),
    # Fig. A1 items 3-4: a comma + "who" starts a sub-sentence.
    ("Later that night our view rises to Nick, who glances at his best friend.",
     ["Later that night our view rises to Nick", "who glances at his best friend."]),
    ("SOMEONE opens the door, then walks in.", ["SOMEONE opens the door", "then walks in."]),
    ("He smiles at <PERSON>; she nods.", ["He smiles at SOMEONE", "she nods."]),
    ("He turns -- and runs away. Just then the phone rings.",
     ["He turns", "and runs away.", "Just then the phone rings."]),
    ("Mr. Smith waits until then.", ["Mr. Smith waits until then."]),
    ("Then SOMEONE leaves the room and then closes the door.",
     ["Then SOMEONE leaves the room", "and then closes the door."]),
    ("She looks up - startled, then she runs.",  # a single dash is no delimiter
     ["She looks up - startled", "then she runs."]),
    ("The man who waits sits down.", ["The man who waits sits down."]),  # no comma: whole
    ("  [PERSON]   grins.  ", ["SOMEONE grins."]),
    # Fig. A3 keeps a bare SOMEONE; names attached by the release are kept (Fig. A2).
    ("Onstage, SOMEONE's thrusters fire up.", ["Onstage, SOMEONE's thrusters fire up."]),
    ("<PERSON>Harry Potter</PERSON> looks at SOMEONE<Ron>. He<Harry> pets SOMEONE's<Ron> owl.",
     ["Harry Potter looks at Ron.", "Harry pets Ron's owl."]),
    ("She<Cataleya> rises; his<William> eyes scan her<Cataleya> room.",
     ["Cataleya rises", "William's eyes scan her room."]),
])
def test_process_description(raw, want):
    assert text.process_description(raw) == want


def test_names_can_be_anonymised():
    raw = "<PERSON>Harry</PERSON> looks at SOMEONE<Ron>. He<Harry> pets SOMEONE's<Ron> owl."
    assert text.process_description(raw, names=False) == [
        "SOMEONE looks at SOMEONE.", "SOMEONE pets SOMEONE's owl."]


def test_split_sentences_is_spacy_sentencizer():
    assert text.split_sentences("Dr. No enters. He sits! Why? OK.") == [
        "Dr. No enters.", "He sits!", "Why?", "OK."]
    assert text.split_sentences('He says "hi." She nods.') == ['He says "hi."', "She nods."]


def test_configurable_conjunctions():
    s = "He eats while she reads the paper."
    assert text.split_subsentences(s) == ["He eats while she reads the paper."]
    assert text.split_subsentences(s, conjunctions=(("while", False),)) == [
        "He eats", "while she reads the paper."]


# ----------------------------------------------------------------------------- lsmdc
def test_timestamps_and_clip_ids():
    assert lsmdc.parse_timestamp("01.02.03.450") == pytest.approx(3723.45)
    movie, s, e = lsmdc.parse_clip_id(
        "1054_Harry_Potter_and_the_prisoner_00.00.51.926-00.00.54.129")
    assert movie == "1054_Harry_Potter_and_the_prisoner"
    assert (s, e) == pytest.approx((51.926, 54.129))
    for bad in ("movie_00.00.51-00.00.54.129", "nounderscore", "m_00.61.00.000-00.62.00.000"):
        with pytest.raises(ValueError):
            lsmdc.parse_clip_id(bad)


def test_read_annotations_counts_bad_lines(tmp_path):
    p = tmp_path / "LSMDC16_annos_training.csv"
    good = (b"0001_A_00.00.01.000-00.00.03.000\t00.00.01.000\t00.00.03.000\t"
            b"00.00.01.000\t00.00.03.000\t")
    p.write_bytes(
        good + "SOMEONE caf\u00e9 walks.".encode("iso-8859-1") + b"\n"  # ISO-8859-1: fine
        + good + "SOMEONE na\u00efve.".encode("utf-8") + b"\n"  # UTF-8: fine
        + good + b"He says \x93hi\x94.\n"  # cp1252 quotes: unknown encoding
        + b"0001_A_00.00.01.000-00.00.03.000\tonly three\tfields\n"
        + b"0001_A_00.00.0x.000-00.00.03.000\t00.00.01.000\t00.00.03.000\ta\tb\tBad ts.\n"
        + b"\n")
    skips = Skips()
    clips = lsmdc.read_annotations(p, skips)
    assert [c.sentence for c in clips] == ["SOMEONE caf\u00e9 walks.", "SOMEONE na\u00efve."]
    assert skips == {"unknown_encoding": 1, "missing_fields": 1, "malformed_csv_line": 1}
    assert {k: dict(v) for k, v in skips.by_file.items()} == {
        str(p): {"unknown_encoding": 1, "missing_fields": 1, "malformed_csv_line": 1}}
    merged = lsmdc.merge_duplicates(clips, skips)
    assert len(merged) == 1 and merged[0].sentence.endswith("na\u00efve.")
    assert skips["kept_duplicate_clip_merged"] == 1 and "duplicate_clip_merged" not in skips
    assert skips.named["kept_duplicate_clip_merged"] == [
        f"0001_A_00.00.01.000-00.00.03.000 ({p.name}:2 merged into {p.name}:1)"]


def test_real_meta_csv(shared_data):
    skips = collections.Counter()
    meta = lsmdc.read_meta(shared_data / "sc2st" / "meta.csv", skips)
    assert not skips and len(meta) == 166
    hp = meta[lsmdc.normalise_movie("1054_Harry_Potter_and_the_prisoner_of_azkaban")]
    assert hp["genres"] == ["Adventure", "Family", "Fantasy"]  # the line with spaces, not tabs
    assert hp["imdb"] == "https://www.imdb.com/title/tt0304141/"
    assert meta[lsmdc.normalise_movie("0001_Legion")]["colour"] == "color"
    assert collections.Counter(m["colour"] for m in meta.values()) == {"color": 157, "wb": 9}


# ----------------------------------------------------------------------------- keyframes
def test_align_monotone_is_the_best_increasing_assignment():
    rng = np.random.default_rng(0)
    for _ in range(50):
        s = int(rng.integers(1, 4))
        f = int(rng.integers(s, 7))
        sim = rng.normal(size=(s, f))
        got = keyframes.align_monotone(sim)
        best = max(itertools.combinations(range(f), s),
                   key=lambda c: sum(sim[i, c[i]] for i in range(s)))
        assert np.all(np.diff(got) > 0)
        assert sum(sim[i, got[i]] for i in range(s)) == pytest.approx(
            sum(sim[i, best[i]] for i in range(s)))


# ----------------------------------------------------------------------------- stories
@dataclasses.dataclass
class C:
    movie: str
    start: float
    end: float


def test_group_stories_by_gap():
    clips = [C("a", 0, 2), C("a", 5, 7), C("a", 16.9, 18), C("a", 28, 30), C("b", 29, 31),
             C("a", 40.5, 41)]
    groups = story.group_stories(clips, max_gap=10)
    # 7 -> 16.9 is 9.9 s (< 10: same story); 18 -> 28 is exactly 10 s (new story)
    assert [[(c.movie, c.start) for c in g] for g in groups] == [
        [("a", 0), ("a", 5), ("a", 16.9)], [("a", 28)], [("a", 40.5)], [("b", 29)]]


def test_form_storyboards_restarts_at_the_next_clip():
    """Whole clips fill a storyboard; its overflow is dropped, never carried over."""
    counts = collections.Counter()
    clip = [[(c, k) for k in range(n)] for c, n in enumerate([3, 4, 2, 3, 10, 6, 2])]
    boards = story.form_storyboards([clip[:5], clip[5:]], 10, counts)
    assert boards == [clip[0] + clip[1] + clip[2] + clip[3][:1], clip[4]]
    assert counts == {"overflow_pairs": 2, "short_group_tails": 1, "short_group_pairs": 8}


def test_count_breaks():
    clips = [C("a", 0, 2), C("a", 12, 13), C("a", 23, 24), C("b", 0, 1), C("b", 5, 6)]
    assert story.count_breaks(story.group_stories(clips, 10)) == 2


def test_split_storyboards_is_a_seeded_partition():
    s = story.split_storyboards(200, seed=3)
    assert [len(s[k]) for k in story.SPLITS] == [160, 10, 30]
    assert sorted(np.concatenate(list(s.values())).tolist()) == list(range(200))
    same = story.split_storyboards(200, 3)
    other = story.split_storyboards(200, 4)
    assert all((s[k] == same[k]).all() for k in s)
    assert not all(np.array_equal(s[k], other[k]) for k in s)
    with pytest.raises(ValueError, match="used in split"):
        story.check_no_overlap({"train": [["x", "y"]], "test": [["y"]]})


# ----------------------------------------------------------------------------- candidates
def test_category_counts():
    assert candidates.category_counts() == {"similar_same": 21, "similar_other": 48,
                                            "random_same": 9, "random_other": 21}


def _pool(n_movies=6, per_movie=6, d=16, seed=0):
    rng = np.random.default_rng(seed)
    feats = rng.normal(size=(n_movies * per_movie, 10, d)).astype(np.float32)
    movies = np.repeat(np.arange(n_movies), per_movie)
    return feats, movies


def test_candidate_protocol():
    feats, movies = _pool()
    stats = collections.Counter()
    cands, answer = candidates.sample_candidates(feats, movies, seed=0, split_code=0,
                                                 stats=stats)
    n = len(feats)
    assert cands.shape == (n, 9, 100) and answer.shape == (n, 9)
    pool = feats.reshape(n * 10, -1)
    pool = pool / np.linalg.norm(pool, axis=-1, keepdims=True)
    movie_of, board_of = np.repeat(movies, 10), np.repeat(np.arange(n), 10)
    counts = candidates.category_counts()
    for b in range(n):
        for r in range(9):
            row, gt = cands[b, r], b * 10 + r + 1
            assert len(set(row.tolist())) == 100 and row[answer[b, r]] == gt
            neg = np.delete(row, answer[b, r])
            assert not np.isin(neg, np.arange(b * 10, b * 10 + 10)).any()  # not own storyboard
            same = neg[movie_of[neg] == movie_of[gt]]
            assert len(same) == counts["similar_same"] + counts["random_same"]
            # the 21 nearest same-movie keyframes (outside the storyboard) are all in
            sims = pool @ pool[gt]
            pool_same = np.flatnonzero((movie_of == movie_of[gt]) & (board_of != b))
            top = pool_same[np.argsort(-sims[pool_same])[:counts["similar_same"]]]
            assert np.isin(top, neg).all()
            other = np.flatnonzero(movie_of != movie_of[gt])
            top = other[np.argsort(-sims[other])[:counts["similar_other"]]]
            assert np.isin(top, neg).all()
    # the answer's position is uniform-ish, not fixed
    assert len(np.unique(answer)) > 50
    assert not stats
    again = candidates.sample_candidates(feats, movies, seed=0, split_code=0)
    np.testing.assert_array_equal(again[0], cands)
    other_split = candidates.sample_candidates(feats, movies, seed=0, split_code=1)
    assert not np.array_equal(other_split[0], cands)


def test_isolated_keyframes_join_the_pool_in_their_category():
    """Isolated keyframes (§4.1.3) compete as any other: a near copy of a ground truth from
    its movie is a similar same-movie pick; the counted proportions do not change."""
    feats, movies = _pool()
    rng = np.random.default_rng(1)
    extra = np.stack([feats[0, 1] + 0.01 * rng.normal(size=16),  # movie 0, next to (0, 1)
                      feats[0, 1] + 0.01 * rng.normal(size=16),  # same look, movie 3
                      *rng.normal(size=(6, 16))]).astype(np.float32)
    extra_movies = np.array([0, 3, 0, 1, 2, 3, 4, 5])
    stats = collections.Counter()
    cands, answer = candidates.sample_candidates(feats, movies, seed=0, split_code=0,
                                                 stats=stats, extra_features=extra,
                                                 extra_movies=extra_movies)
    n = len(feats) * 10
    movie_of = np.concatenate([np.repeat(movies, 10), extra_movies])
    counts = candidates.category_counts()
    row = cands[0, 0]
    assert n in row and n + 1 in row  # the two near copies of keyframe (0, 1)
    for b in range(len(feats)):
        for r in range(9):
            neg = np.delete(cands[b, r], answer[b, r])
            gt = b * 10 + r + 1
            assert (movie_of[neg] == movie_of[gt]).sum() == counts["similar_same"] + counts[
                "random_same"]
    assert stats["isolated_candidates"] == int((cands >= n).sum()) > 2
    with pytest.raises(ValueError, match="extra_movies"):
        candidates.sample_candidates(feats, movies, seed=0, split_code=0, extra_features=extra)


def test_candidates_same_movie_shortfall_and_too_small_pool():
    feats, movies = _pool(n_movies=12, per_movie=1)  # no other storyboard of the same movie
    stats = collections.Counter()
    cands, answer = candidates.sample_candidates(feats, movies, seed=0, split_code=0,
                                                 stats=stats)
    assert stats["same_movie_shortfall"] == 12 * 9 * 30
    assert all(len(set(r.tolist())) == 100 for r in cands.reshape(-1, 100))
    with pytest.raises(ValueError, match="incorrect candidates"):
        candidates.sample_candidates(feats[:10], movies[:10], seed=0, split_code=0)


def test_character_expert_is_top_names_multi_hot():
    """The paper's character expert: the most named characters (top `dim`), multi-hot;
    a keyframe naming none of them has the expert missing (all zero)."""
    from vnr.benchmarks.sc2st.embedders import CharacterExpert

    def kf(*names):
        return keyframes.Keyframe("f", "m", "s", names, np.zeros(2, np.float32))

    frames = [kf("Ann", "Bob"), kf("Bob"), kf("Cid"), kf("Bob", "Ann"), kf(), kf("Dee")]
    expert = CharacterExpert(dim=2)
    got = expert.encode_keyframes(frames)
    assert expert.vocabulary == ["Bob", "Ann"]  # 3 and 2 mentions; Cid, Dee: 1 each
    np.testing.assert_array_equal(got, [[1, 1], [1, 0], [0, 0], [1, 1], [0, 0], [0, 0]])
    names = text.character_names("<PERSON>Tom</PERSON> sees SOMEONE<Nick>; He<Tom> waves, "
                                 "SOMEONE leaves.")
    assert names == ["Tom", "Nick"]
    clip = types.SimpleNamespace(sentence="SOMEONE<Al> waves; <PERSON>Nick</PERSON> leaves.",
                                 movie="m")
    pairs = [types.SimpleNamespace(clip=clip, sentence=s, frame_id=f, feature=np.zeros(2))
             for s, f in (("Al waves", "features/m/c.npy#0"),
                          ("Also Nick leaves.", "frames/m/c/1.jpg"))]
    refs = extras.keyframe_refs(pairs, pathlib.Path("/r"))
    assert [r.names for r in refs] == [("Al",), ("Nick",)]  # whole words of its own part
    assert refs[0].path is None and refs[1].path == pathlib.Path("/r/frames/m/c/1.jpg")
