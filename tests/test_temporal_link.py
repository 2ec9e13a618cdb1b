"""Temporal link prediction's pieces (issue 57 item 3): the chronological split, negatives,
EdgeBank and the AP/AUC/MRR evaluation, on exact toy cases."""
from __future__ import annotations

import torch

from gnnscale.tasks.temporal_link import EdgeBank, chronological_split, evaluate, negatives


def test_the_split_is_by_time():
    t = torch.tensor([5, 1, 9, 3, 7, 2, 8, 4, 6, 0])
    s = chronological_split(t, (0.6, 0.2, 0.2))
    assert t[s["train"]].tolist() == [0, 1, 2, 3, 4, 5] and t[s["val"]].tolist() == [6, 7]
    assert t[s["test"]].tolist() == [8, 9]


def test_edgebank_remembers_pairs_strictly_before_the_query_and_within_its_window():
    src, dst, t = torch.tensor([0, 0, 1]), torch.tensor([1, 1, 2]), torch.tensor([10, 20, 15])
    unlimited, window = EdgeBank(src, dst, t, 3), EdgeBank(src, dst, t, 3, window=5)
    q_src, q_dst, q_t = torch.tensor([0, 0, 0, 0, 1, 1, 2]), torch.tensor([1, 1, 1, 1, 2, 2, 1]), \
        torch.tensor([10, 11, 30, 100, 15, 16, 50])
    assert unlimited.score(q_src, q_dst, q_t).tolist() == [0, 1, 1, 1, 0, 1, 0]  # at t itself: not yet seen
    assert window.score(q_src, q_dst, q_t).tolist() == [0, 1, 0, 0, 0, 1, 0]  # 30 - 20 > 5


def test_negatives_are_keyed_never_the_positive_and_historical_ones_come_from_the_sources_past():
    src, dst = torch.tensor([0, 1, 2, 0]), torch.tensor([1, 2, 0, 3])
    history = (torch.tensor([0, 0, 1]), torch.tensor([5, 6, 7]))
    a = negatives(src, dst, 10, 6, seed=3, split="test", history=history)
    assert torch.equal(a, negatives(src, dst, 10, 6, seed=3, split="test", history=history))
    assert not bool((a == dst.unsqueeze(1)).any())
    assert set(a[0, :3].tolist()) <= {5, 6} and set(a[1, :3].tolist()) <= {7}  # half from the past


def test_evaluation_ranks_as_tgb_and_edgebank_scores_through_it():
    src, dst, t = torch.tensor([0, 1]), torch.tensor([1, 2]), torch.tensor([10, 10])
    bank = EdgeBank(torch.tensor([0]), torch.tensor([1]), torch.tensor([5]), 4)
    out = evaluate(bank.score, src, dst, t, torch.tensor([3, 3]), torch.tensor([[2, 3], [0, 3]]))
    # positive 0 seen (1 vs 0, 0): rank 1; positive 1 unseen (0 vs 0, 0): rank 1 + (0 + 2) / 2 = 2
    assert out["mrr"] == (1 + 1 / 2) / 2 and out["auc"] == 0.75


def test_the_synthetic_generator_is_seeded_sorted_and_its_signal_recurs():
    from gnnscale.datasets.temporal import generate_temporal_synthetic

    a, b = generate_temporal_synthetic(seed=2), generate_temporal_synthetic(seed=2)
    assert torch.equal(a.edge_index, b.edge_index) and torch.equal(a.edge_time, b.edge_time)
    assert bool((a.edge_time[1:] >= a.edge_time[:-1]).all())
    pairs = a.edge_index[0] * a.num_nodes + a.edge_index[1]
    assert torch.unique(pairs).numel() < pairs.numel() // 2  # recurring pairs and bursts repeat


def test_tgat_reads_each_edges_age_and_a_time_blind_model_does_not():
    from gnnscale.nn.temporal import TGAT, TimeEncoding
    from gnnscale.samplers.temporal import TemporalBlock

    enc = TimeEncoding(8)
    assert enc(torch.tensor([0.0, 5.0])).shape == (2, 8) and torch.allclose(enc(torch.zeros(1)), torch.ones(1, 8))
    ei = torch.tensor([[1, 2], [0, 0]])
    block = lambda et: TemporalBlock(torch.tensor([0, 1, 2]), torch.tensor([0]), ei, edge_time=et,  # noqa: E731
                                     src_time=torch.tensor([100, 100, 100]), src_tree=torch.zeros(3, dtype=torch.long))
    torch.manual_seed(0)
    for blind, same in ((False, False), (True, True)):
        m = TGAT(0, 8, 1, time_dim=4, heads=2, num_nodes=3, embed_dim=4, dropout=0.0, time_blind=blind).eval()
        ids = torch.tensor([0, 1, 2])
        h1, h2 = m(None, [block(torch.tensor([10, 90]))], ids), m(None, [block(torch.tensor([95, 99]))], ids)
        assert h1.shape == (1, 8) and torch.equal(h1, h2) == same


def test_the_example_trains_tgat_and_prints_it_beside_edgebank(tmp_path, run_example):
    out = tmp_path / "r.json"
    r = run_example(tmp_path, "temporal_link.py", "--dataset", "temporal-synthetic", "--events", "2000",
                    "--epochs", "1", "--fanouts", "4,4", "--hidden", "16", "--eval-events", "60", "--neg", "20",
                    "--cache-dir", str(tmp_path / "cache"), "--json", str(out))
    assert "model     test AP" in r.stdout and "edgebank  test AP" in r.stdout
    import json

    res = json.loads(out.read_text())  # the engine's task: each test event kept by its key's uniform (about 60)
    assert 40 <= res["test_events"] <= 80 and 0.0 < res["model"]["mrr"] <= 1.0
    assert res["edgebank"]["positives"] == res["test_events"] and res["edgebank"]["negatives_per_positive_mrr"] == 20


def test_event_keyed_negatives_are_the_same_on_any_share():
    from gnnscale.tasks.temporal_link import event_keys

    g = torch.Generator().manual_seed(0)
    s, d, t = torch.randint(0, 50, (400,), generator=g), torch.randint(0, 50, (400,), generator=g), \
        torch.randint(0, 10**6, (400,), generator=g)
    k = event_keys(s, d, t)
    whole = negatives(s, d, 50, 8, 3, "test", (s, d), keys=k)
    half = negatives(s[200:], d[200:], 50, 8, 3, "test", (s, d), keys=k[200:])  # another worker's share
    assert torch.equal(whole[200:], half) and not bool((whole == d.unsqueeze(1)).any())
    assert not torch.equal(whole, negatives(s, d, 50, 8, 4, "test", (s, d), keys=k))  # the seed changes them


def test_pair_history_reads_only_the_past():
    from gnnscale.tasks.temporal_link import PairHistory

    src, dst, t = torch.tensor([0, 0, 0, 1]), torch.tensor([1, 1, 1, 0]), torch.tensor([10, 20, 20, 15])
    h = PairHistory(src, dst, t, 2)
    q_s, q_d, q_t = torch.tensor([0, 0, 0, 0, 1]), torch.tensor([1, 1, 1, 1, 0]), torch.tensor([10, 11, 20, 21, 15])
    n, last = h.counts(q_s, q_d, q_t)
    assert n.tolist() == [0, 1, 1, 3, 0] and last.tolist() == [10, 10, 10, 20, 15]
    f = h.features(q_s, q_d, q_t)  # both directions: 1 -> 0 happened at 15
    assert f.shape == (5, 6) and f[:, 1].tolist() == [0.0, 1.0, 1.0, 1.0, 0.0]
    # the other direction: 1 -> 0 (at 15) seen before 20 and 21 only; for (1, 0, 15), 0 -> 1 at 10
    assert f[:, 4].tolist() == [0.0, 0.0, 1.0, 1.0, 1.0]
    assert abs(float(f[3, 2]) - float(torch.log1p(torch.tensor(1.0))) / 20) < 1e-6  # 21 - 20: one unit ago
