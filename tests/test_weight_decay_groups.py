"""Weight decay by parameter-name prefix (issue 44, item 11): ``--weight-decay convs=0.01,5e-4`` as
GCNII's paper trains (0.01 on the convolutions, 5e-4 on the dense layers), in the CLI, a config
file and the API, honoured in every mode; a prefix that names no parameter is refused with one
line naming it and the model's prefixes."""
from __future__ import annotations

import pytest
import torch
import yaml

from gnnscale.config import OptionError, TrainConfig, parse_weight_decay

FIX = "Pass e.g. --weight-decay 5e-4 or --weight-decay convs=0.01,5e-4"


def test_parse_weight_decay_forms():
    assert parse_weight_decay(5e-4) == (5e-4, {})
    assert parse_weight_decay("0.01") == (0.01, {})
    assert parse_weight_decay("convs=0.01,5e-4") == (5e-4, {"convs": 0.01})
    assert parse_weight_decay(" convs = 0.01 , head=1e-3 ") == (0.0, {"convs": 0.01, "head": 1e-3})
    assert parse_weight_decay({"convs": 0.01, "*": 5e-4}) == (5e-4, {"convs": 0.01})
    assert parse_weight_decay({"convs.0": 0, "": 1e-3}) == (1e-3, {"convs.0": 0.0})
    # a number however given stays one decay for all (the config's value becomes the number)
    assert TrainConfig(weight_decay="0.01").check().weight_decay == 0.01
    assert TrainConfig(weight_decay={"*": 0.02}).check().weight_decay == 0.02
    assert TrainConfig(weight_decay="convs=0.01,5e-4").check().weight_decay == "convs=0.01,5e-4"


@pytest.mark.parametrize("value, message", [
    (-1.0, f"--weight-decay must be a number of at least 0 or PREFIX=DECAY items; found -1.0 in it. {FIX}"),
    ("convs=-1", f"--weight-decay must be a number of at least 0 or PREFIX=DECAY items; found 'convs=-1' in it. {FIX}"),
    ("convs=x", f"--weight-decay must be a number of at least 0 or PREFIX=DECAY items; found 'convs=x' in it. {FIX}"),
    (True, f"--weight-decay must be a number of at least 0 or PREFIX=DECAY items; found True in it. {FIX}"),
    ("1e-3,5e-4", "--weight-decay takes at most one plain number (the decay of the parameters no prefix names); "
                  "found two in '1e-3,5e-4'. Keep one, e.g. convs=0.01,5e-4"),
    ("convs=1,convs=2", "--weight-decay names the prefix 'convs' twice in 'convs=1,convs=2'; give each prefix once"),
    ("conv-s=1", "--weight-decay prefix 'conv-s' is not a parameter name's leading part (names and indices joined "
                 "by dots, e.g. convs or convs.0); pass e.g. convs=0.01,5e-4"),
])
def test_bad_weight_decay_is_one_line(value, message):
    with pytest.raises(OptionError) as err:
        TrainConfig(weight_decay=value).check()
    assert str(err.value) == message


def _gcnii(layers: int = 4):
    from gnnscale.nn.models import GNN

    torch.manual_seed(0)
    return GNN(12, 8, 3, layers, layer="gcnii", dropout=0.0)


@pytest.mark.parametrize("decay", ["convs=0.01,convs.2=0,head=1e-3", "convs.2=0,convs=0.01,head=1e-3",
                                   {"convs.2": 0, "head": 1e-3, "convs": 0.01}])
def test_groups_by_prefix_longest_wins(decay):
    """The longest matching prefix gives a parameter its decay, wherever it stands in the list (the
    longer one first, too: a last-match rule gives convs.2 the 0.01 of convs)."""
    from gnnscale.process.eager import adam, param_groups

    model = _gcnii()
    opt = adam(model.named_parameters(), 0.01, decay)
    got = [(g["weight_decay"], len(g["params"])) for g in opt.param_groups]
    # encoder (2, the rest: 0), convs 0,1,3 (0.01), convs.2 (0: the longer prefix), head (2)
    assert sorted(got) == [(0.0, 3), (1e-3, 2), (0.01, 3)]
    name_of = {id(p): n for n, p in model.named_parameters()}
    by_name = {name_of[id(p)]: g["weight_decay"] for g in param_groups(model.named_parameters(), decay)
               for p in g["params"]}
    assert {n: d for n, d in by_name.items() if n.startswith("convs.")} == {
        "convs.0.weight1": 0.01, "convs.1.weight1": 0.01, "convs.2.weight1": 0.0, "convs.3.weight1": 0.01}, by_name
    plain = adam(_gcnii().named_parameters(), 0.01, 5e-4)
    assert [(g["weight_decay"], len(g["params"])) for g in plain.param_groups] == [(5e-4, 8)]


def test_grouped_decay_steps_as_torch_adam_with_the_papers_groups():
    """The engine's optimizer with convs=0.01,5e-4 equals torch's Adam given GCNII's two groups."""
    from gnnscale.process.eager import adam

    a, b = _gcnii(), _gcnii()
    x = torch.randn(6, 12)
    ref = torch.optim.Adam([dict(params=list(b.convs.parameters()), weight_decay=0.01),
                            dict(params=list(b.encoder.parameters()) + list(b.head.parameters()), weight_decay=5e-4)],
                           lr=0.01)
    mine = adam(a.named_parameters(), 0.01, "convs=0.01,5e-4")
    one = adam(_gcnii().named_parameters(), 0.01, 5e-4)
    ids = torch.arange(6)
    from gnnscale.samplers.block import Block

    blocks = [Block(ids, ids, torch.tensor([[0, 1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 0]]))] * 4
    for model, opt in ((a, mine), (b, ref)):
        for _ in range(3):
            opt.zero_grad()
            model(x, blocks).square().sum().backward()
            opt.step()
    for (n, p), (_, q) in zip(a.named_parameters(), b.named_parameters()):
        assert torch.equal(p, q), n
    assert len(one.param_groups) == 1


def test_unknown_prefix_names_the_models_prefixes():
    from gnnscale.process.eager import adam

    with pytest.raises(OptionError) as err:
        adam(_gcnii().named_parameters(), 0.01, "convs=0.01,lins=5e-4")
    assert str(err.value) == ("--weight-decay names the prefix 'lins', which matches no parameter of the model; its "
                              "prefixes are encoder, convs, head (or a longer leading part of a parameter's name, "
                              "e.g. convs.0); pass e.g. --weight-decay convs=0.01,5e-4")


def test_a_stage_checks_prefixes_against_the_whole_model():
    """A pipeline stage steps its own layers only; ``head`` is the last stage's, not unknown on the first."""
    from gnnscale.parallel.stage import stage_model
    from gnnscale.process.eager import adam

    whole = _gcnii()
    names = [n for n, _ in whole.named_parameters()]
    first = stage_model(whole, 0, 2)
    opt = adam(first.named_parameters(), 0.01, "convs=0.01,head=5e-4", names=names)
    assert sorted((g["weight_decay"], len(g["params"])) for g in opt.param_groups) == [(0.0, 2), (0.01, 2)]
    with pytest.raises(OptionError, match="its prefixes are encoder, convs, head"):
        adam(first.named_parameters(), 0.01, "heads=5e-4", names=names)


def test_cli_and_config_file(tmp_path, capsys):
    from gnnscale.cli.main import main

    assert main(["train", "--dataset", "planetoid:cora", "--weight-decay", "convs=0.01,5e-4", "--print-config"]) == 0
    text = capsys.readouterr().out
    assert yaml.safe_load(text)["weight-decay"] == "convs=0.01,5e-4"
    path = tmp_path / "run.yaml"
    path.write_text(text)
    assert main(["train", "--config", str(path), "--print-config"]) == 0
    assert capsys.readouterr().out == text
    mapping = tmp_path / "map.yaml"
    mapping.write_text("dataset: planetoid:cora\nweight-decay: {convs: 0.01, '*': 0.0005}\n")
    assert main(["train", "--config", str(mapping), "--print-config"]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["weight-decay"] == {"convs": 0.01, "*": 0.0005}
    with pytest.raises(SystemExit) as code:
        main(["train", "--dataset", "planetoid:cora", "--weight-decay", "convs=x"])
    assert code.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.endswith(f"--weight-decay must be a number of at least 0 or PREFIX=DECAY items; found 'convs=x' in it. "
                        f"{FIX} (see `gnnscale train --help`)")


MODES = {
    "data parallel": dict(workers=2, parts=2, over=dict(fanouts=(5, 5), batch_size=64)),
    "layer pipeline": dict(workers=2, parts=1, over=dict(fanouts=(5, 5), batch_size=64, pipeline_stages=2,
                                                           micro_batches=2)),
    "chunk pipeline": dict(workers=2, parts=2, over=dict(chunks=True, pipeline_stages=2, layer="gcnii", num_layers=2,
                                                           stage_layers=(1, 1))),
}
COMMON = dict(hidden=16, epochs=1, eval_every=0, verify=False, progress=False, timeout=60.0, device="cpu", lr=0.05)


@pytest.mark.parametrize("mode", list(MODES))
def test_every_mode_honours_decay_by_prefix_and_refuses_an_unknown_one(cora_partition, mode):
    """The grouped decay trains otherwise than no decay and than the same decay on every parameter
    (all in the same worker processes); a prefix of no parameter is refused in every mode."""
    from dist_workers import run_configs

    from gnnscale.process.launch import launch_local

    spec = MODES[mode]
    parts = cora_partition(spec["parts"])
    # the first layer decays (on the first stage of a pipeline), the rest not; then the mapping form
    # (API, config file) of the same option, no decay, and the same decay on every parameter
    decays = ["convs.0=0.5", {"convs.0": 0.5, "*": 0}, 0.0, 0.5]
    cfgs = [TrainConfig(**(COMMON | spec["over"] | {"weight_decay": wd})).check() for wd in decays]
    got = launch_local(run_configs, spec["workers"], args=(parts, cfgs))[0]
    assert not [g["error"] for g in got if "error" in g]
    grouped, mapping, none, every = (g["digest"] for g in got)
    assert grouped == mapping and len({grouped, none, every}) == 3
    bad = TrainConfig(**(COMMON | spec["over"] | {"weight_decay": "convs=0.01,lins=5e-4"})).check()
    refused = launch_local(run_configs, spec["workers"], args=(parts, [bad]))[0]
    assert refused[0]["error"].startswith("OptionError: --weight-decay names the prefix 'lins', which matches no "
                                          "parameter of the model; its prefixes are "), refused
