"""MoviePuzzle ordering metrics: hand-worked cases, scipy/enumeration/search checks, Table 1."""

import heapq
import itertools
import json
import math

import numpy as np
import pytest
from scipy.stats import kendalltau

from vnr.benchmarks.moviepuzzle import order_metrics as om

# img_num histogram of the 100 public in-domain MoviePuzzle clips (game/in_domain/*/info.json)
PUBLIC_LENGTHS = {10: 25, 11: 20, 12: 9, 13: 7, 15: 2, 16: 6, 17: 5, 18: 1, 20: 25}
PAPER_RANDOM = {"lsd": 34.24, "lmd": 4.57, "sd": 10.59, "ssd": 33.99, "os2": 49.66, "os3": 16.42}


def _pad(orders, N):
    """List of 1-D orders -> padded [B, N] array (padded indices last) and mask."""
    out = np.tile(np.arange(N), (len(orders), 1))
    mask = np.zeros((len(orders), N), bool)
    for b, o in enumerate(orders):
        out[b, : len(o)] = o
        mask[b, : len(o)] = True
    return out, mask


def _all(pred, gt, mask=None):
    return {
        "lsd": np.asarray(om.location_square_deviation(pred, gt, mask)),
        "lmd": np.asarray(om.location_mean_deviation(pred, gt, mask)),
        "sd": np.asarray(om.swap_deviation(pred, gt, mask)),
        "ssd": np.asarray(om.swap_distance_deviation(pred, gt, mask)),
        "os2": np.asarray(om.ordering_score(pred, gt, 2, mask)),
        "os3": np.asarray(om.ordering_score(pred, gt, 3, mask)),
    }


def test_hand_worked_examples():
    # gt identity; pred swaps neighbours (0,1) and (2,3): dev = [1,-1,1,-1]
    # gt identity; pred is the 3-cycle [1,2,0]: item positions p = [2,0,1], dev = [2,-1,-1]
    # gt [2,0,1] and pred equal to it: a perfect order
    pred, mask = _pad([[1, 0, 3, 2], [1, 2, 0], [2, 0, 1]], 4)
    gt, _ = _pad([[0, 1, 2, 3], [0, 1, 2], [2, 0, 1]], 4)
    got = _all(pred, gt, mask)
    np.testing.assert_allclose(got["lsd"], [1.0, 2.0, 0.0], atol=1e-6)
    np.testing.assert_allclose(got["lmd"], [1.0, 4 / 3, 0.0], atol=1e-6)
    np.testing.assert_allclose(got["sd"], [2.0, 2.0, 0.0])
    np.testing.assert_allclose(got["ssd"], [2.0, 2.0, 0.0])
    np.testing.assert_allclose(got["os2"], [4 / 6, 1 / 3, 1.0], atol=1e-6)
    np.testing.assert_allclose(got["os3"], [0.0, 0.0, 1.0], atol=1e-6)
    # reversed order of 4: every pair and triple flipped; p - q = [3, 1, -1, -3]
    rev = _all(np.array([[3, 2, 1, 0]]), np.array([[0, 1, 2, 3]]))
    assert rev["lsd"][0] == pytest.approx(5.0) and rev["lmd"][0] == pytest.approx(2.0)
    assert rev["sd"][0] == 2 and rev["ssd"][0] == 4
    assert rev["os2"][0] == 0 and rev["os3"][0] == 0


def test_os2_is_kendall_tau_and_os3_os4_match_enumeration():
    rng = np.random.default_rng(0)
    lens = [5, 7, 9, 9, 8, 6]
    preds, gts = [rng.permutation(n) for n in lens], [rng.permutation(n) for n in lens]
    pred, mask = _pad(preds, 9)
    gt, _ = _pad(gts, 9)
    os = {beta: np.asarray(om.ordering_score(pred, gt, beta, mask)) for beta in (2, 3, 4)}
    for b, n in enumerate(lens):
        p, q = np.argsort(preds[b]), np.argsort(gts[b])  # position of each frame
        tau = kendalltau(p, q).statistic
        assert os[2][b] == pytest.approx((1 + tau) / 2, abs=1e-6)
        for beta in (3, 4):
            subsets = list(itertools.combinations(range(n), beta))
            same = sum(
                np.array_equal(np.argsort(p[list(c)]), np.argsort(q[list(c)])) for c in subsets
            )
            assert os[beta][b] == pytest.approx(same / len(subsets), abs=1e-6)


def _min_swaps_and_distance(n):
    """Exhaustive shortest paths over all orders of n: (#swaps, total swap length)."""
    start = tuple(range(n))
    count, cost = {start: 0}, {start: 0}
    frontier = [start]
    while frontier:  # BFS for the number of swaps
        nxt = []
        for p in frontier:
            for i, j in itertools.combinations(range(n), 2):
                q = list(p)
                q[i], q[j] = q[j], q[i]
                q = tuple(q)
                if q not in count:
                    count[q] = count[p] + 1
                    nxt.append(q)
        frontier = nxt
    heap = [(0, start)]
    while heap:  # Dijkstra for the least total |i - j|
        d, p = heapq.heappop(heap)
        if d > cost[p]:
            continue
        for i, j in itertools.combinations(range(n), 2):
            q = list(p)
            q[i], q[j] = q[j], q[i]
            q = tuple(q)
            if d + j - i < cost.get(q, 1e9):
                cost[q] = d + j - i
                heapq.heappush(heap, (d + j - i, q))
    return count, cost


def test_sd_and_ssd_are_least_swaps_and_least_swap_length():
    n = 5
    count, cost = _min_swaps_and_distance(n)
    perms = np.array(sorted(count))
    gt = np.tile(np.arange(n), (len(perms), 1))
    np.testing.assert_array_equal(om.swap_deviation(perms, gt), [count[tuple(p)] for p in perms])
    np.testing.assert_array_equal(
        om.swap_distance_deviation(perms, gt), [cost[tuple(p)] for p in perms]
    )


def test_padding_invariance():
    rng = np.random.default_rng(1)
    lens = [3, 11, 16]
    preds, gts = [rng.permutation(n) for n in lens], [rng.permutation(n) for n in lens]
    pred, mask = _pad(preds, 16)
    gt, _ = _pad(gts, 16)
    batch = _all(pred, gt, mask)
    b = 1  # the 11-frame clip alone, at its own width
    alone = _all(preds[b][None], gts[b][None])
    for k in batch:
        assert batch[k][b] == pytest.approx(alone[k][0], abs=1e-5), k


def test_random_row_of_table_1():
    lengths = np.repeat(list(PUBLIC_LENGTHS), list(PUBLIC_LENGTHS.values()))
    expect = om.random_expectation(lengths)
    for k, paper in PAPER_RANDOM.items():  # closed forms land within 4% of the paper
        assert abs(expect[k] - paper) / paper < 0.04, (k, expect[k], paper)
    # and the implementation agrees with the closed forms on simulated random orders
    rng = np.random.default_rng(2)
    sim = rng.choice(lengths, 3000)
    preds = [rng.permutation(n) for n in sim]
    pred, mask = _pad(preds, 20)
    gt = np.tile(np.arange(20), (len(sim), 1))
    got = om.summary(pred, gt, mask)
    exact = om.random_expectation(sim)
    for k in exact:
        assert got[k] == pytest.approx(exact[k], rel=0.05), k


def test_random_row_real_lengths(shared_data):
    infos = sorted((shared_data / "moviepuzzle_public" / "in_domain").glob("*/info.json"))
    lengths = [json.loads(p.read_text())["img_num"] for p in infos]
    assert len(lengths) == sum(PUBLIC_LENGTHS.values())
    expect = om.random_expectation(lengths)
    assert expect["lsd"] == pytest.approx(35.09, abs=0.01)
    assert expect["sd"] == pytest.approx(10.766, abs=0.001)


def test_summary_keys_and_units():
    pred, mask = _pad([[1, 0, 3, 2], [0, 1, 2]], 4)
    gt, _ = _pad([[0, 1, 2, 3], [0, 1, 2]], 4)
    s = om.summary(pred, gt, mask)
    assert set(s) == {"lsd", "lmd", "sd", "ssd", "os2", "os3"}
    assert s["os2"] == pytest.approx(100 * (4 / 6 + 1) / 2, abs=1e-4)
    assert s["os3"] == pytest.approx(50.0, abs=1e-4)
    assert s["sd"] == pytest.approx(1.0)


def test_bad_input():
    gt = np.array([[0, 1, 2, 3]])
    with pytest.raises(ValueError, match="beta"):
        om.ordering_score(gt, gt, beta=3, mask=np.array([[True, True, False, False]]))
    with pytest.raises(ValueError, match="beta"):
        om.ordering_score(gt, gt, beta=0)
    with pytest.raises(ValueError, match="mask"):
        om.location_square_deviation(gt, gt, np.zeros((1, 4), bool))
    with pytest.raises(ValueError, match="mask"):
        om.location_square_deviation(gt, gt, np.array([[True, False, True, True]]))
    with pytest.raises(ValueError, match="pred_order"):
        om.swap_deviation(np.array([[0, 0, 2, 3]]), gt)
    with pytest.raises(ValueError, match="pred_order"):  # padded index not last
        om.swap_deviation(np.array([[3, 1, 2, 0]]), gt, np.array([[True, True, True, False]]))
    with pytest.raises(ValueError, match="gt_order"):
        om.swap_deviation(gt, np.array([[0, 1, 2]]))
    with pytest.raises(ValueError, match="lengths"):
        om.random_expectation([2, 10])


def test_os_of_partial_outputs_against_enumeration():
    """Appendix B: denominator C(n, beta) over the true clip; missing frames lose their
    subsets; on full orders the partial OS equals the OS."""
    rng = np.random.default_rng(9)
    N = 7
    lens = [7, 5, 6]
    gt = np.tile(np.arange(N), (3, 1))
    mask = np.arange(N)[None] < np.asarray(lens)[:, None]
    full = gt.copy()
    for b, n in enumerate(lens):
        gt[b, :n] = rng.permutation(n)
        full[b, :n] = rng.permutation(n)
    for beta in (2, 3):
        np.testing.assert_allclose(om.ordering_score_partial(full, gt, beta, mask),
                                   om.ordering_score(full, gt, beta, mask), atol=1e-6)
    pred = np.full((3, 9), -1)
    for b, n in enumerate(lens):
        keep = rng.permutation(n)[: n - 2]  # two frames missing
        pred[b, : keep.size] = keep
    pred[0, 5], pred[0, 6] = pred[0, 0], 11  # a repeat (first place counts), an unknown id
    for beta in (2, 3):
        got = np.asarray(om.ordering_score_partial(pred, gt, beta, mask))
        for b, n in enumerate(lens):
            seq = [int(x) for x in pred[b] if 0 <= x < n]
            place = {}
            for k, x in enumerate(seq):
                place.setdefault(x, k)
            true_pos = {int(f): k for k, f in enumerate(gt[b, :n])}
            hits = sum(all(f in place for f in sub) and sorted(sub, key=place.get)
                       == sorted(sub, key=true_pos.get)
                       for sub in itertools.combinations(range(n), beta))
            assert got[b] == pytest.approx(hits / math.comb(n, beta), abs=1e-6)
    with pytest.raises(ValueError, match="pred must be"):
        om.ordering_score_partial(pred[:2], gt, 2, mask)


def test_length_report_groups_per_clip_os(tmp_path, capsys):
    """Figures 9-11 as tables: per-clip rows written by the evaluation, grouped by length."""
    from vnr.benchmarks.moviepuzzle import length_report as lr

    N = 6
    gt = np.tile(np.arange(N), (3, 1))
    pred = gt.copy()
    pred[1, :4] = [3, 2, 1, 0]  # fully reversed 4-frame clip: OS2 = OS3 = 0
    mask = np.arange(N)[None] < np.array([6, 4, 4])[:, None]
    shot = np.array([[0, 0, 1, 1, 2, 2], [0, 0, 0, 0, -1, -1], [0, 1, 2, 3, -1, -1]])
    rows = lr.clip_rows(pred, gt, mask, shot, np.zeros_like(shot))
    assert [r["frames"] for r in rows] == [6, 4, 4] and [r["shot_len"] for r in rows] == [2, 4, 1]
    assert rows[1]["os2"] == 0.0 and rows[2]["os2"] == 100.0
    assert lr.by_value(rows, "frames") == {4: (2, 50.0, 50.0), 6: (1, 100.0, 100.0)}
    lr.write_clips(tmp_path / "run" / "reports" / "test_clips.jsonl", rows)
    lr.main([str(tmp_path / "run"), "--by", "shot_len"])
    assert "| 4 | 1 | 0.00 | 0.00 |" in capsys.readouterr().out
