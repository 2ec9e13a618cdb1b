"""Learned node embeddings sharded by owner with a sparse Adam (gnnscale.data.embeddings).

The distributed table after a few steps equals one ``nn.Embedding(sparse=True)`` trained by
``torch.optim.SparseAdam`` on the union of the ranks' pulls (loss: the sum of theirs); a
checkpoint resumes bit-equal; bytes are counted under the embedding categories; the typed encoder
reads pulled rows as it reads its own table.
"""
from __future__ import annotations

import pytest
import torch
from torch import nn

from gnnscale.data.embeddings import DistEmbedding, EmbeddingError, TypedEmbeddings, initial_rows
from gnnscale.nn.models import ModelError
from gnnscale.nn.typed_encoder import TypedEncoder
from gnnscale.partitioning.book import PartitionBook, TypedPartitionBook
from gnnscale.process.comm import Communicator
from gnnscale.process.launch import launch_local
from gnnscale.samplers.block import TypedInput

from dist_workers import dist_embedding_steps

NUM_ROWS, DIM, SEED, LR, STEPS, RESUME_AT = 50, 8, 7, 0.05, 4, 2
OFFSETS = {2: [0, 23, 50], 3: [0, 17, 17, 50]}  # with 3 ranks, rank 1 owns no row
FEATURE_DIMS, NAMES = [3, 0, 0], ["paper", "author", "field"]
TYPED_COUNTS = {2: [[4, 6, 3], [5, 5, 4]], 3: [[4, 6, 3], [2, 0, 4], [3, 5, 0]]}  # [P, T] nodes per part


def loss_of(rows: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    return ((rows * w1) ** 2).sum() + (rows * w2).sum()


def weights() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(11)
    return torch.randn(DIM, generator=g), torch.randn(DIM, generator=g)


def step_ids(world: int) -> list:
    """Per step, per rank: ids with repeats (rank 1 pulls nothing at step 2)."""
    g = torch.Generator().manual_seed(100 + world)
    out = []
    for step in range(STEPS):
        per_rank = []
        for rank in range(world):
            n = 0 if (step == 2 and rank == 1) else int(torch.randint(8, 20, (1,), generator=g))
            per_rank.append(torch.randint(0, NUM_ROWS, (n,), generator=g).tolist())
        out.append(per_rank)
    return out


def sparse_adam_reference(tables: dict, batches: list, w1, w2, forward=None) -> dict:
    """SparseAdam on ``nn.Embedding(sparse=True)`` tables; each batch is a list of per-rank inputs
    whose losses are summed (one step per batch)."""
    embs = {k: nn.Embedding.from_pretrained(v.clone(), freeze=False, sparse=True) for k, v in tables.items()}
    opt = torch.optim.SparseAdam([e.weight for e in embs.values()], lr=LR)
    for batch in batches:
        opt.zero_grad()
        if forward is None:
            loss = sum(loss_of(embs["t"](torch.tensor(ids, dtype=torch.int64)), w1, w2) for ids in batch)
        else:
            loss = sum(forward(embs, x) for x in batch)
        loss.backward()
        opt.step()
    return {k: e.weight.detach() for k, e in embs.items()}


def typed_case(world: int):
    """Random typed inputs per rank, the encoder's linear weights, and the single-process reference."""
    counts = torch.tensor(TYPED_COUNTS[world])
    per_type = counts.sum(0).tolist()
    torch.manual_seed(0)
    enc = TypedEncoder(FEATURE_DIMS, per_type, DIM, sparse=True)
    g = torch.Generator().manual_seed(5)
    inputs = []
    for _ in range(world):
        s = 15
        nt = torch.randint(0, 3, (s,), generator=g)
        ti = (torch.rand(s, generator=g) * torch.tensor(per_type, dtype=torch.float64)[nt]).long()
        inputs.append((nt, ti, {0: torch.randn(int((nt == 0).sum()), 3, generator=g)}))
    w1, w2 = weights()
    tables = {t: initial_rows(torch.arange(per_type[t]), DIM, SEED, NAMES[t]) for t in (1, 2)}

    def forward(embs, x):
        for t in (1, 2):
            enc.embeddings[str(t)] = embs[t]
        return loss_of(enc(TypedInput(*x)), w1, w2)

    ref = sparse_adam_reference(tables, [inputs], w1, w2, forward)
    linears = {k: v.detach().clone() for k, v in enc.linears.state_dict().items()}
    return {"counts": TYPED_COUNTS[world], "feature_dims": FEATURE_DIMS, "names": NAMES, "inputs": inputs,
            "linears": linears}, ref


@pytest.mark.parametrize("world", [2, 3])
def test_distributed_table_equals_single_process_sparse_adam(world):
    w1, w2 = weights()
    ids = step_ids(world)
    typed, typed_ref = typed_case(world)
    res = launch_local(dist_embedding_steps, world,
                       args=(NUM_ROWS, DIM, OFFSETS[world], ids, w1, w2, SEED, LR, RESUME_AT, typed))
    full0 = initial_rows(torch.arange(NUM_ROWS), DIM, SEED, "author")
    ref = sparse_adam_reference({"t": full0}, ids, w1, w2)["t"]
    r0 = res[0]
    # Any partitioning starts from the single process's table.
    assert torch.equal(r0["start"], full0)
    assert all(r["start"] is None and r["final"] is None for r in res[1:])
    assert (ref - full0).abs().max() > 1e-3  # the steps did move rows
    assert torch.allclose(r0["final"], ref, atol=1e-6, rtol=0)
    # Rows no rank ever pulled are untouched.
    touched = torch.zeros(NUM_ROWS, dtype=torch.bool)
    touched[torch.tensor([i for step in ids for r in step for i in r])] = True
    assert torch.equal(r0["final"][~touched], full0[~touched])
    # The checkpoint (taken before step RESUME_AT, loaded into a table of another seed) resumes bit-equal.
    assert torch.equal(r0["resumed"], r0["final"])

    # Bytes: at each step, 8 B per distinct remote id asked for, 4 * DIM per row back, and the same
    # for the gradients pushed; what one rank sends, its peers receive.
    offsets = torch.tensor(OFFSETS[world])
    for step in range(STEPS):
        asked = []
        for rank in range(world):
            u = torch.unique(torch.tensor(ids[step][rank], dtype=torch.int64))
            own = (u >= offsets[rank]) & (u < offsets[rank + 1])
            asked.append(u[~own])
        for rank, r in enumerate(res):
            st = r["stats"][step]["comm"]
            n_remote = asked[rank].numel()
            served = sum(int(((a >= offsets[rank]) & (a < offsets[rank + 1])).sum()) for q, a in enumerate(asked)
                         if q != rank)
            assert st["sent"].get("embedding_pull_request", 0) == 8 * n_remote
            assert st["received"].get("embedding_pull", 0) == 4 * DIM * n_remote
            assert st["received"].get("embedding_pull_request", 0) == 8 * served
            assert st["sent"].get("embedding_pull", 0) == 4 * DIM * served
            assert st["sent"].get("embedding_grad_ids", 0) == 8 * n_remote
            assert st["sent"].get("embedding_grad", 0) == 4 * DIM * n_remote
            assert st["received"].get("embedding_grad", 0) == 4 * DIM * served
            assert st["rounds"] == {"embedding_pull_request": 1, "embedding_pull": 1, "embedding_grad_ids": 1,
                                    "embedding_grad": 1}
            emb = r["stats"][step]["emb"]
            assert emb["pulled_rows"] == len(ids[step][rank])
            assert emb["remote_rows"] == emb["pushed_rows"] == n_remote
    for rank, r in enumerate(res):
        owned = OFFSETS[world][rank + 1] - OFFSETS[world][rank]
        assert r["nbytes"] == 3 * owned * DIM * 4
        sent = r["gather_stats"]["sent"].get("embedding_gather", 0)
        assert sent == (0 if rank == 0 else owned * DIM * 4)
    assert r0["gather_stats"]["received"]["embedding_gather"] == (NUM_ROWS - OFFSETS[world][1]) * DIM * 4

    # TypedEmbeddings + TypedEncoder(external=True) == the encoder's own sparse tables under SparseAdam.
    for t in (1, 2):
        assert torch.allclose(r0["typed"][t], typed_ref[t], atol=1e-6, rtol=0)
        assert (typed_ref[t] - initial_rows(torch.arange(typed_ref[t].shape[0]), DIM, SEED, NAMES[t])).abs().max() > 1e-3
    assert all(r["typed"] == {1: None, 2: None} for r in res[1:])
    assert all(r["typed_state"] == {1: 1, 2: 1} for r in res)
    assert all(not any(n.startswith("embeddings") for n in r["encoder_params"]) for r in res)


def test_sparse_step_equals_dense_adam_on_touched_rows():
    comm = Communicator(0, 1)
    emb = DistEmbedding(NUM_ROWS, DIM, PartitionBook([0, NUM_ROWS]), comm, seed=SEED, table=3, lr=LR)
    w1, w2 = weights()
    ids = torch.tensor([4, 9, 4, 31, 9, 9, 0])
    dense = nn.Parameter(initial_rows(torch.arange(NUM_ROWS), DIM, SEED, 3))
    before = dense.detach().clone()
    assert torch.equal(emb.weight, before)
    opt = torch.optim.Adam([dense], lr=LR)
    loss_of(dense[ids], w1, w2).backward()
    opt.step()
    rows = emb.pull(ids)
    assert rows.is_leaf and rows.requires_grad and rows.shape == (7, DIM) and rows.dtype == torch.float32
    loss_of(rows, w1, w2).backward()
    emb.push()
    touched = torch.zeros(NUM_ROWS, dtype=torch.bool)
    touched[ids] = True
    assert torch.allclose(emb.weight[touched], dense.detach()[touched], atol=1e-6, rtol=0)
    assert (emb.weight[touched] - before[touched]).abs().min() > 1e-3
    assert torch.equal(emb.weight[~touched], before[~touched])
    assert torch.equal(emb.exp_avg[~touched], torch.zeros(int((~touched).sum()), DIM))
    assert emb.step == 1 and emb.stats["updated_rows"] == 4 and emb.stats["pulled_rows"] == 7

    # One process is SparseAdam itself, to the bit; pulls without grad are not recorded.
    ref = sparse_adam_reference({"t": before}, [[ids.tolist()], [[1, 2, 2]]], w1, w2)["t"]
    with torch.no_grad():
        plain = emb.pull(torch.tensor([5, 5]))
    assert not plain.requires_grad and torch.equal(plain, emb.weight[[5, 5]])
    rows = emb.pull(torch.tensor([1, 2, 2]))
    loss_of(rows, w1, w2).backward()
    emb.push()
    assert torch.equal(emb.weight, ref)
    emb.push()  # nothing pulled: a step with no row touched
    assert torch.equal(emb.weight, ref) and emb.step == 3
    assert torch.equal(emb.gather(), ref)


@pytest.mark.parametrize("scale", [0.5, 1 / 3])
def test_push_scale_reaches_the_moments(scale):
    """``push(scale)`` (1/world in DDP runs) equals SparseAdam fed the scaled gradient in the moments
    too: Adam's step barely changes under a constant factor (weights agree to ~1e-6 without it),
    but ``exp_avg`` would be off by 1/scale and ``exp_avg_sq`` by 1/scale^2, and checkpoints carry them."""
    comm = Communicator(0, 1)
    emb = DistEmbedding(NUM_ROWS, DIM, PartitionBook([0, NUM_ROWS]), comm, seed=SEED, table=3, lr=LR)
    w1, w2 = weights()
    ref = nn.Embedding.from_pretrained(emb.weight.clone(), freeze=False, sparse=True)
    opt = torch.optim.SparseAdam([ref.weight], lr=LR)
    for ids in ([4, 9, 4, 31, 9, 9, 0], [1, 2, 2, 9]):
        ids = torch.tensor(ids)
        opt.zero_grad()
        (scale * loss_of(ref(ids), w1, w2)).backward()  # the scaled gradient
        opt.step()
        loss_of(emb.pull(ids), w1, w2).backward()
        emb.push(scale=scale)
    state = opt.state[ref.weight]
    touched = state["exp_avg_sq"].abs().sum(1) > 0
    assert int(touched.sum()) == 6
    assert torch.allclose(emb.exp_avg, state["exp_avg"], atol=1e-7, rtol=1e-5)
    assert torch.allclose(emb.exp_avg_sq, state["exp_avg_sq"], atol=1e-9, rtol=1e-5)
    assert torch.allclose(emb.weight, ref.weight.detach(), atol=1e-6, rtol=0)
    saved = emb.state_dict()  # what a checkpoint carries
    assert torch.allclose(saved["exp_avg"], state["exp_avg"], atol=1e-7, rtol=1e-5)


def test_state_dict_round_trip_and_errors():
    comm = Communicator(0, 1)
    book = PartitionBook([0, NUM_ROWS])
    w1, w2 = weights()
    a = DistEmbedding(NUM_ROWS, DIM, book, comm, seed=SEED, table="author", lr=LR)
    loss_of(a.pull(torch.tensor([1, 2, 3, 3])), w1, w2).backward()
    a.push()
    state = a.state_dict()
    b = DistEmbedding(NUM_ROWS, DIM, book, comm, seed=SEED + 9, table="author")
    b.load_state_dict(state)
    for e in (a, b):
        loss_of(e.pull(torch.tensor([3, 4, 40])), w1, w2).backward()
        e.push()
    assert torch.equal(a.weight, b.weight) and torch.equal(a.exp_avg_sq, b.exp_avg_sq) and a.step == b.step == 2
    # Tables of other names (or seeds) start apart; the values are bounded by 1/sqrt(dim).
    other = initial_rows(torch.arange(NUM_ROWS), DIM, SEED, "field")
    assert not torch.equal(other, initial_rows(torch.arange(NUM_ROWS), DIM, SEED, "author"))
    assert other.abs().max() <= DIM ** -0.5 and other.std() > 0.2 * DIM ** -0.5
    with pytest.raises(EmbeddingError, match=r"row ids in \[0, 50\), found ids in \[0, 50\]"):
        a.pull(torch.tensor([0, 50]))
    with pytest.raises(EmbeddingError, match="resume with the partitioning"):
        DistEmbedding(NUM_ROWS + 1, DIM, PartitionBook([0, NUM_ROWS + 1]), comm).load_state_dict(state)
    with pytest.raises(EmbeddingError, match="one part per rank"):
        DistEmbedding(NUM_ROWS, DIM, PartitionBook([0, 10, NUM_ROWS]), comm)


def test_typed_encoder_reads_emb_rows_like_its_own_tables():
    counts = [6, 5, 4]
    torch.manual_seed(1)
    local = TypedEncoder(FEATURE_DIMS, counts, DIM, sparse=True)
    assert [n for n, _ in local.named_parameters()] == ["linears.0.weight", "linears.0.bias", "embeddings.1.weight",
                                                        "embeddings.2.weight"]
    external = TypedEncoder(FEATURE_DIMS, counts, DIM, external=True)
    external.linears.load_state_dict(local.linears.state_dict())
    assert external.embedding_types == [] and external.external_types == [1, 2]
    assert [n for n, _ in external.named_parameters()] == ["linears.0.weight", "linears.0.bias"]
    g = torch.Generator().manual_seed(3)
    nt = torch.randint(0, 3, (20,), generator=g)
    ti = (torch.rand(20, generator=g) * torch.tensor(counts, dtype=torch.float64)[nt]).long()
    x = TypedInput(nt, ti, {0: torch.randn(int((nt == 0).sum()), 3, generator=g)})
    emb_rows = {t: local.embeddings[t].weight.detach()[ti[torch.nonzero(nt == t).flatten()]].clone().requires_grad_()
                for t in (1, 2)}
    xe = TypedInput(nt, ti, x.rows, emb_rows)
    assert xe.to("cpu").emb_rows.keys() == {1, 2} and x.to("cpu").emb_rows is None
    w1, w2 = weights()
    want, got, mixed = local(x), external(xe), local(xe)
    assert torch.equal(got, want) and torch.equal(mixed, want)
    loss_of(want, w1, w2).backward()
    loss_of(got, w1, w2).backward()
    for t in (1, 2):  # the pulled rows' gradients, summed per row, are the table's sparse gradient
        dense = torch.zeros(counts[t], DIM).index_add_(0, ti[nt == t], emb_rows[t].grad)
        assert torch.allclose(local.embeddings[t].weight.grad.to_dense(), dense, atol=1e-6)
    with pytest.raises(ModelError, match=r"type 1's embedding table is external .* emb_rows\[1\]"):
        external(x)
    with pytest.raises(ModelError, match=r"emb_rows\[2\] must be"):
        external(TypedInput(nt, ti, x.rows, {1: emb_rows[1], 2: emb_rows[2][:1]}))
    with pytest.raises(ModelError, match="external tables are for node types without features"):
        TypedEncoder(FEATURE_DIMS, counts, DIM, external=(0,))


def test_typed_embeddings_one_process():
    counts = torch.tensor([[4, 6, 3]])
    zero = torch.zeros(1, 1, dtype=torch.int64)
    book = TypedPartitionBook([0, 13], torch.cat([zero, counts.cumsum(1)], 1), torch.cat([torch.zeros_like(counts), counts], 0).T)
    temb = TypedEmbeddings(book, FEATURE_DIMS, DIM, Communicator(0, 1), seed=SEED, node_types=NAMES)
    assert temb.types == [1, 2] and temb.nbytes == 3 * (6 + 3) * DIM * 4
    nt = torch.tensor([2, 0, 1, 1, 2, 1])
    ti = torch.tensor([0, 3, 5, 5, 2, 0])
    rows = temb.pull(TypedInput(nt, ti, {}))
    assert torch.equal(rows[1], initial_rows(torch.tensor([5, 5, 0]), DIM, SEED, "author"))
    assert torch.equal(rows[2], initial_rows(torch.tensor([0, 2]), DIM, SEED, "field"))
    temb.push()  # no backward: joins, touches nothing
    assert all(e.step == 1 and e.stats["updated_rows"] == 0 for e in temb.tables.values())
    with pytest.raises(EmbeddingError, match=r"expected tables of the types \[1, 2\]"):
        temb.load_state_dict({1: temb.state_dict()[1]})
