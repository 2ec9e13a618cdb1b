"""Link prediction metrics (gnnscale.tasks.scores) against scikit-learn and OGB's
Evaluators on the same scores, ties included; the accumulator over slices and over 2 ranks
equals the one-shot figures exactly."""
from __future__ import annotations

import pytest
import torch

from gnnscale.config import OptionError
from gnnscale.tasks.scores import (
    LinkMetrics, average_precision, hits_at_k, mrr, mrr_values, multilabel_roc_auc, parse_metric, roc_auc,
)


def _scores(seed: int, n: int, m: int, ties: bool, dtype=torch.float64):
    """(pos [n], neg [m]); positives shifted up a little; ``ties``: rounded to one decimal."""
    g = torch.Generator().manual_seed(seed)
    pos = torch.randn(n, generator=g, dtype=torch.float64) + 0.7
    neg = torch.randn(m, generator=g, dtype=torch.float64)
    if ties:
        pos, neg = torch.round(pos, decimals=1), torch.round(neg, decimals=1)
    return pos.to(dtype), neg.to(dtype)


def _ranked(seed: int, n: int, k: int, ties: bool, dtype=torch.float32):
    """(pos [n], neg [n, k]); ``ties``: small integers, so many negatives equal their positive."""
    g = torch.Generator().manual_seed(seed)
    if ties:
        return (torch.randint(0, 6, (n,), generator=g).to(dtype) + 1,
                torch.randint(0, 6, (n, k), generator=g).to(dtype))
    return torch.randn(n, generator=g).to(dtype) + 1.0, torch.randn(n, k, generator=g).to(dtype)


def _labels(pos, neg):
    import numpy as np

    y = np.concatenate([np.ones(pos.numel()), np.zeros(neg.numel())])
    return y, torch.cat([pos, neg]).numpy()


CASES = [(0, 400, 700, False), (1, 400, 700, True), (2, 1, 1, False), (3, 3, 2, True), (4, 50, 2000, True),
         (5, 300, 20, False)]


@pytest.mark.parametrize("seed,n,m,ties", CASES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_roc_auc_and_average_precision_equal_sklearn(seed, n, m, ties, dtype):
    from sklearn.metrics import average_precision_score, roc_auc_score

    pos, neg = _scores(seed, n, m, ties, dtype)
    y, s = _labels(pos, neg)
    assert roc_auc(pos, neg) == pytest.approx(roc_auc_score(y, s), abs=1e-12, rel=0)
    assert average_precision(pos, neg) == pytest.approx(average_precision_score(y, s), abs=1e-12, rel=0)


def test_every_score_tied_and_separable():
    from sklearn.metrics import average_precision_score, roc_auc_score

    for pos, neg in [(torch.full((7,), 0.5), torch.full((11,), 0.5)), (torch.arange(5.0) + 10, torch.arange(9.0)),
                     (torch.arange(9.0), torch.arange(5.0) + 10)]:
        y, s = _labels(pos, neg)
        assert roc_auc(pos, neg) == pytest.approx(roc_auc_score(y, s), abs=1e-12, rel=0)
        assert average_precision(pos, neg) == pytest.approx(average_precision_score(y, s), abs=1e-12, rel=0)
    assert roc_auc(torch.full((7,), 0.5), torch.full((11,), 0.5)) == 0.5
    assert average_precision(torch.tensor([0.3, 0.1]), torch.zeros(0)) == 1.0  # sklearn: all positive -> 1
    with pytest.raises(ValueError, match="positive and negative"):
        roc_auc(torch.ones(3), torch.zeros(0))
    with pytest.raises(ValueError, match="NaN"):
        roc_auc(torch.tensor([float("nan")]), torch.zeros(2))


HITS = [("ogbl-collab", 50), ("ogbl-ppa", 100), ("ogbl-ddi", 20)]


@pytest.mark.parametrize("name,k", HITS)
@pytest.mark.parametrize("seed,n,m,ties", [(0, 300, 3000, False), (1, 300, 3000, True), (2, 40, 10, False)])
def test_hits_equal_ogb_evaluator(name, k, seed, n, m, ties):
    from ogb.linkproppred import Evaluator

    pos, neg = _scores(seed, n, m, ties, torch.float32)
    want = Evaluator(name).eval({"y_pred_pos": pos, "y_pred_neg": neg})[f"hits@{k}"]
    assert hits_at_k(pos, neg, k) == want
    if m >= k:  # the K-th negative is among the positives' values: strictly above only
        kth = torch.topk(neg, k).values[-1]
        tied = torch.cat([pos, kth.repeat(25)])
        want = Evaluator(name).eval({"y_pred_pos": tied, "y_pred_neg": neg})[f"hits@{k}"]
        assert hits_at_k(tied, neg, k) == want


@pytest.mark.parametrize("seed,n,k,ties", [(0, 200, 100, False), (1, 200, 100, True), (2, 1, 1000, True)])
def test_mrr_equals_ogb_citation2(seed, n, k, ties):
    from ogb.linkproppred import Evaluator

    pos, neg = _ranked(seed, n, k, ties)
    got = Evaluator("ogbl-citation2").eval({"y_pred_pos": pos, "y_pred_neg": neg})["mrr_list"]
    values = mrr_values(pos, neg)
    assert values.dtype == torch.float64 and values.shape == (n,)
    assert torch.allclose(values.float(), got, rtol=1e-7, atol=0)  # OGB's are float32
    assert mrr(pos, neg) == pytest.approx(float(got.double().mean()), abs=1e-6)
    assert mrr(pos, neg) == pytest.approx(float(values.mean()), abs=1e-12)
    # Independently: rank = 1 + number of negatives above + half of those tied.
    rank = 1 + (neg > pos[:, None]).sum(1).double() + 0.5 * (neg == pos[:, None]).sum(1).double()
    assert torch.allclose(values, 1 / rank, rtol=0, atol=1e-15)


def test_multilabel_roc_auc_equals_ogbn_proteins_and_sklearn():
    from ogb.nodeproppred import Evaluator
    from sklearn.metrics import roc_auc_score

    g = torch.Generator().manual_seed(7)
    n, c = 300, 112  # ogbn-proteins has 112 labels
    y = (torch.rand(n, c, generator=g) < torch.rand(c, generator=g)).long()
    y[:, 3] = 0  # one class only: skipped
    y[:, 5] = 1
    s = torch.randn(n, c, generator=g) + 0.4 * y
    s[:, :40] = torch.round(s[:, :40], decimals=1)  # ties
    want = Evaluator("ogbn-proteins").eval({"y_true": y, "y_pred": s})["rocauc"]
    cols = [j for j in range(c) if 0 < int(y[:, j].sum()) < n]
    assert len(cols) == c - 2
    by_hand = sum(roc_auc_score(y[:, j].numpy(), s[:, j].numpy()) for j in cols) / len(cols)
    got = multilabel_roc_auc(y, s)
    assert got == pytest.approx(want, abs=1e-12, rel=0)
    assert got == pytest.approx(by_hand, abs=1e-12, rel=0)
    assert multilabel_roc_auc(y.bool(), s.double()) == got
    with pytest.raises(ValueError, match="both a positive and a negative"):
        multilabel_roc_auc(torch.zeros(4, 2), torch.randn(4, 2))
    with pytest.raises(ValueError, match="0 or 1"):
        multilabel_roc_auc(torch.full((4, 2), 2), torch.randn(4, 2))


# -- the accumulator ------------------------------------------------------------------------

def _slices(x: torch.Tensor, cuts) -> list[torch.Tensor]:
    return list(torch.tensor_split(x, cuts))


def test_link_metrics_over_slices_equals_one_shot():
    pos, neg = _scores(11, 500, 1500, True, torch.float32)
    acc = LinkMetrics("auc")
    for p in _slices(pos, [0, 7, 300, 300]):  # an empty slice too
        acc.add_pos(p)
    for q in _slices(neg, [1000, 1001]):
        acc.add_neg(q)
    assert acc.result() == {"auc": roc_auc(pos, neg), "ap": average_precision(pos, neg)}
    assert acc.result(None) == acc.result()

    acc = LinkMetrics("hits@50")
    for p, q in zip(_slices(pos, [10, 250, 260]), _slices(neg, [3, 40, 900])):
        acc.add(p, q)
    assert acc._top.numel() == 50  # only the top K negatives are kept
    assert acc.result() == {"hits@50": hits_at_k(pos, neg, 50)}

    rpos, rneg = _ranked(12, 300, 100, True)
    both = torch.cat([rpos[:, None], rneg], 1)  # as an evaluator slices one score matrix
    acc = LinkMetrics("MRR")
    for a, b in [(0, 13), (13, 13), (13, 200), (200, 300)]:
        acc.add_ranked(both[a:b, 0], both[a:b, 1:])
    assert acc._hist.numel() <= 2 * 100 + 1  # counts per rank value, nothing per score
    assert acc.result() == {"mrr": mrr(rpos, rneg)}


def test_link_metrics_empty_and_misuse():
    from gnnscale.process.comm import Communicator

    one = Communicator()  # world_size 1: no collective
    assert LinkMetrics("auc").result(one) == {"auc": None, "ap": None}
    assert LinkMetrics("hits@20").result(one) == {"hits@20": None}
    assert LinkMetrics("mrr").result(one) == {"mrr": None}
    acc = LinkMetrics("auc")
    acc.add_pos(torch.tensor([0.2, 0.9]))
    assert acc.result(one) == {"auc": None, "ap": 1.0}  # no negatives: AUC undefined
    acc = LinkMetrics("hits@20")
    acc.add(torch.tensor([0.2, 0.9]), torch.randn(19))
    assert acc.result(one) == {"hits@20": 1.0}  # fewer than K negatives: OGB's 1
    with pytest.raises(ValueError, match="add_ranked"):
        LinkMetrics("mrr").add_pos(torch.ones(2))
    with pytest.raises(ValueError, match="add_pos"):
        LinkMetrics("auc").add_ranked(torch.ones(2), torch.ones(2, 3))
    with pytest.raises(ValueError, match="one row of negatives per positive"):
        LinkMetrics("mrr").add_ranked(torch.ones(2), torch.ones(3, 3))


def _dist_worker(data: dict) -> dict:
    """Rank r adds its share of every metric's scores (rank 1 none for mrr; nobody any for
    the empty ones) and returns every result."""
    from gnnscale.process.comm import Communicator
    from gnnscale.process.groups import init_distributed

    info = init_distributed(timeout=60)
    comm = Communicator(info.rank, info.world_size, timeout=60)
    r = info.rank
    out = {}
    for metric in ("auc", "hits@50", "hits@5000", "mrr"):
        acc = LinkMetrics(metric)
        if metric == "mrr":
            if r == 0:
                for a, b in [(0, 100), (100, 300)]:
                    acc.add_ranked(data["rpos"][a:b], data["rneg"][a:b])
        else:
            pos, neg = data["pos"], data["neg"]
            half = pos.numel() // 2
            acc.add_pos(pos[:half] if r == 0 else pos[half:])
            if metric == "auc":
                acc.add_neg(neg[:700] if r == 0 else neg[700:])
            elif r == 1:  # hits: every negative on rank 1
                for q in torch.tensor_split(neg, 4):
                    acc.add_neg(q)
        out[metric] = acc.result(comm)
        out[metric + " empty"] = LinkMetrics(metric).result(comm)
    return out


def test_two_ranks_equal_one_process():
    from gnnscale.process.launch import launch_local

    pos, neg = _scores(21, 501, 1500, True, torch.float32)
    rpos, rneg = _ranked(22, 300, 100, True)
    data = {"pos": pos, "neg": neg, "rpos": rpos, "rneg": rneg}
    res = launch_local("test_link_metrics:_dist_worker", 2, args=(data,), threads_per_worker=1)
    want = {
        "auc": {"auc": roc_auc(pos, neg), "ap": average_precision(pos, neg)},
        "hits@50": {"hits@50": hits_at_k(pos, neg, 50)},
        "hits@5000": {"hits@5000": 1.0},
        "mrr": {"mrr": mrr(rpos, rneg)},
        "auc empty": {"auc": None, "ap": None},
        "hits@50 empty": {"hits@50": None},
        "hits@5000 empty": {"hits@5000": None},
        "mrr empty": {"mrr": None},
    }
    assert 0 < want["hits@50"]["hits@50"] < 1
    assert res[0] == want
    assert res[1] == want


# -- parse_metric -------------------------------------------------------------------------

def test_parse_metric():
    assert parse_metric("auc") == ("auc", None)
    assert parse_metric(" MRR ") == ("mrr", None)
    assert parse_metric("hits@50") == ("hits", 50)
    assert LinkMetrics("Hits@20").metric == "hits@20"
    for bad in ("hits@0", "hits@x", "foo", "hits@", "hits@-3"):
        with pytest.raises(OptionError) as err:
            parse_metric(bad)
        msg = str(err.value)
        assert repr(bad) in msg and "hits@K" in msg and "\n" not in msg
    with pytest.raises(OptionError, match="'foo'"):
        LinkMetrics("foo")
