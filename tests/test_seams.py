"""The seams of issue 45 (items 2 and 3): the axes, the trainer and the offline evaluator ask the
task and the step hooks instead of testing a task name, a decoder string or ``sharded``; every
task supplies the :class:`~gnnscale.tasks.task.Task` protocol; a MiniBatch moves every field the
model and the loss read."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
ENGINE = [*sorted((ROOT / "gnnscale" / "parallel").glob("*.py")), ROOT / "gnnscale" / "training" / "trainer.py",
          ROOT / "gnnscale" / "training" / "evaluate.py", ROOT / "gnnscale" / "training" / "embed.py",
          ROOT / "gnnscale" / "cli" / "commands.py"]  # gnnscale evaluate reads the model file
BRANCHES = {"a task name": re.compile(r"task\.name\b|cfg\.task\b"),
            "a decoder string": re.compile(r"decoder|\"edge:\""),
            "sharded": re.compile(r"sharded")}


def test_no_axis_trainer_or_evaluator_branches_on_the_task_or_the_embeddings():
    found = []
    for path in ENGINE:
        if not path.exists():
            continue
        text = path.read_text()
        for node in ast.walk(ast.parse(text)):
            tests = [node.test] if isinstance(node, (ast.If, ast.IfExp, ast.While)) else []
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
                tests.append(node)
            for t in tests:
                seg = ast.get_source_segment(text, t) or ""
                found += [f"{path.relative_to(ROOT)}:{t.lineno} tests {what}: {seg}"
                          for what, pat in BRANCHES.items() if pat.search(seg)]
    assert not found, found


def test_every_task_supplies_the_protocol():
    from gnnscale.tasks.task import TASKS, Task

    wanted = [n for n in dir(Task) if not n.startswith("_")] + list(Task.__annotations__)
    for name, kind in TASKS.items():
        missing = [n for n in wanted if not hasattr(kind, n) and n not in ("metric", "out_dim")]
        assert not missing, (name, missing)
        assert kind.name == name


def test_minibatch_to_moves_every_field_the_model_reads():
    from gnnscale.data.degrees import DegreeLookup
    from gnnscale.samplers.block import Block, MiniBatch, TypedInput

    ids = torch.arange(4)
    block = Block(ids, ids[:2], torch.tensor([[0, 1], [1, 0]]), edge_attr=torch.ones(2, 3))
    x = TypedInput(torch.zeros(4, dtype=torch.int64), ids, {0: torch.ones(4, 5)})
    mb = MiniBatch(ids[:2], [block], x=x, y=torch.tensor([1, 0]), degrees=DegreeLookup(ids, ids + 1),
                   edge_label_index=torch.tensor([[0], [1]]), edge_label=torch.ones(1), neg_of_pos=torch.zeros(0,
                                                                                                          dtype=torch.int64),
                   node_keys=[ids])
    moved = mb.to("meta")
    assert all(t.device.type == "meta" for t in moved.tensors())
    assert len(moved.tensors()) == len(mb.to("cpu").tensors()) == 13  # x (3), y, degrees (2), block (4), pairs (3)
    assert moved.seeds.device.type == "cpu" and moved.blocks[0].src_ids.device.type == "cpu"  # host-side ids
    assert moved.node_keys[0].device.type == "cpu"  # the keyed dropout hashes them on the host
    same = mb.to("cpu")
    assert same.device_blocks is mb.blocks and same.y is mb.y  # the CPU: nothing copied


def test_plan_run_reads_the_partitions_facts_from_its_metadata():
    import pytest

    from gnnscale.config import TrainConfig
    from gnnscale.planning.plan import PlanError, plan_run

    cfg = TrainConfig(layer="gat", edge_features="on")
    with pytest.raises(PlanError, match="no edge"):  # the metadata says 0 edge features (absent: 0)
        plan_run(cfg, {"num_parts": 2}, 2)
    assert plan_run(cfg, {"num_parts": 2, "edge_feature_dim": 4}, 2).dp == 2
    assert plan_run(cfg, 2, 2).dp == 2  # a dataset not cut yet: its edge features are checked after the cut
    with pytest.raises(PlanError, match="link"):
        plan_run(TrainConfig(task="link"), {"num_parts": 2}, 2)  # no split in the metadata


def test_a_saved_model_is_checked_against_the_partition_by_its_task():
    """``gnnscale evaluate`` asks the model's task whether it fits the partition (no decoder string)."""
    from gnnscale.tasks.task import TASKS

    node_meta = {"feature_dim": 1433, "num_classes": 7}
    blob = {"num_features": 1433, "num_classes": 7}
    assert TASKS["node"].model_misfit(node_meta, blob) is None
    assert TASKS["node"].model_misfit(node_meta | {"num_classes": 6}, blob) == "1433 features, 6 outputs per node"
    assert TASKS["node"].model_misfit(node_meta | {"target": {"num_outputs": 1}}, blob) == \
        "1433 features, 1 outputs per node"
    link_blob = {"num_features": 1433, "num_classes": 64}  # an encoder's width, not classes
    for task in ("link", "edge"):
        assert TASKS[task].model_misfit(node_meta | {"link": {"metric": "auc"}}, link_blob) is None
        assert TASKS[task].model_misfit(node_meta, link_blob).startswith("no link split; evaluate it on a partition")
        assert TASKS[task].model_misfit(node_meta | {"feature_dim": 10, "link": {}}, link_blob) == "10 features"


def test_the_layer_stack_is_homogeneous_and_a_typed_graph_gets_typed_gnn():
    """``GNN`` holds no typed branch (a ``TypedGNN`` owns the typed encoder); the typed model keeps
    the parameter names and draw order of the model files written before the split."""
    from gnnscale.config import TrainConfig
    from gnnscale.nn.models import GNN
    from gnnscale.nn.spec import ModelSpec
    from gnnscale.nn.typed_model import TypedGNN

    text = (ROOT / "gnnscale" / "nn" / "models.py").read_text()
    tree = ast.parse(text)
    gnn = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "GNN")
    branches = [ast.get_source_segment(text, n.test) for n in ast.walk(gnn) if isinstance(n, (ast.If, ast.IfExp))]
    assert not [b for b in branches if re.search(r"typed", b)], branches
    meta = {"node_types": ["paper", "author"], "edge_types": [["author", "writes", "paper"]],
            "feature_dims": [5, 0], "num_nodes_per_type": [4, 3]}
    model = ModelSpec.of(TrainConfig(layer="rgcn", hidden=8), None, 3, typed=meta).build(seed=0)
    assert type(model) is TypedGNN and model.node_types == ["paper", "author"]
    assert [n for n, _ in model.named_parameters()][:3] == [
        "typed_encoder.linears.0.weight", "typed_encoder.linears.0.bias", "typed_encoder.embeddings.1.weight"]
    assert type(ModelSpec.of(TrainConfig(hidden=8), 5, 3).build(seed=0)) is GNN


def test_forward_layers_takes_one_hooks_object():
    import inspect

    from gnnscale.nn.models import GNN, LayerHooks

    params = list(inspect.signature(GNN.forward_layers).parameters)
    assert params == ["self", "h", "x0", "blocks", "start", "end", "hooks"]
    assert sorted(f for f in LayerHooks.__dataclass_fields__) == sorted(
        ["hist", "emit", "node_degree", "rng_key", "row_keys", "grad_hooks"])
