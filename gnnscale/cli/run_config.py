"""``gnnscale train --config run.yaml``: every option of ``train`` as a YAML key.

The keys are the flags' names, with dashes or underscores (``batch-size`` or ``batch_size``),
the values YAML's types: ``fanouts: [15, 10, 5]``, ``pipeline: true``, ``layer-kwargs:
{heads: 4}``, ``method-opt: {slack: 0.1}``; ``null`` leaves an option unset where its default is
unset (``eval-fanouts: null``), so what ``--print-config`` prints (and ``--metrics`` writes
beside its file) loads back as the same run. The file's values become the defaults of ``train``'s options, so a flag given on
the command line overrides them. An unknown key or a value of the wrong type is an error that
names the key, the file and the line. The resolved configuration (every option, after the file
and the flags) is what :func:`resolved` returns and :func:`dump` writes.

Torch-free (the launcher reads it before any worker starts).
"""
from __future__ import annotations

import argparse
import os
from typing import Any

import yaml

from gnnscale.errors import GnnscaleError
from gnnscale.options import did_you_mean

# Options of the command line itself, not of the run.
NOT_IN_FILE = {"help", "config", "print_config", "command"}


class ConfigError(GnnscaleError):
    """A configuration file with an unknown key or a value of the wrong type."""


def _options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {a.dest: a for a in parser._actions if a.dest not in NOT_IN_FILE and a.dest != argparse.SUPPRESS}


def _is_bool_action(action: argparse.Action) -> bool:
    return isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction, argparse.BooleanOptionalAction))


def _convert(action: argparse.Action, value: Any) -> tuple[Any, str | None]:
    """(the option's value, None) or (None, what was expected)."""
    if value is None and action.default is None:  # unset, as --print-config writes it (null)
        return None, None
    if _is_bool_action(action):
        return (value, None) if isinstance(value, bool) else (None, "true or false")
    kind = getattr(action.type, "__name__", None)
    if kind == "_int_list":
        if isinstance(value, int) and not isinstance(value, bool):
            value = [value]
        if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            return list(value), None
        return None, "a list of integers, e.g. [15, 10, 5]"
    if kind == "_str_list":
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return list(value), None
        return None, "a list of names, e.g. [nodes, train]"
    if kind == "_json_dict":
        return (dict(value), None) if isinstance(value, dict) else (None, "a mapping, e.g. {heads: 4}")
    if kind == "key_value":  # --method-opt: a mapping {slack: 0.1}, or KEY=VALUE items
        if isinstance(value, dict) and all(isinstance(k, str) for k in value):
            return list(value.items()), None
        if isinstance(value, list) and all(isinstance(v, str) and "=" in v for v in value):
            return [action.type(v) for v in value], None
        return None, "a mapping, e.g. {slack: 0.1}"
    if kind == "_weight_decay":  # a number, "convs=0.01,5e-4" or a mapping {convs: 0.01, "*": 5e-4}
        from gnnscale.config import OptionError, parse_weight_decay

        try:
            rest, groups = parse_weight_decay(value)
        except OptionError:
            return None, "a number, PREFIX=DECAY items such as convs=0.01,5e-4, or a mapping {convs: 0.01}"
        return (value if groups else rest), None
    if action.type is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
        return (value, None) if ok or (value is None and action.default is None) else (None, "an integer")
    if action.type is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return (float(value), None) if ok else ((None, None) if value is None and action.default is None
                                                else (None, "a number"))
    if value is None and action.default is None:
        return None, None
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        return None, "a string"
    value = str(value)
    if action.choices is not None and value not in action.choices:
        return None, f"one of {', '.join(map(str, action.choices))}"
    return value, None


def load(path: str | os.PathLike, parser: argparse.ArgumentParser) -> dict[str, Any]:
    """The options set in ``path`` (by ``dest``), checked against ``parser``'s options."""
    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as err:
        raise ConfigError(f"--config {path}: cannot read it ({err.strerror})") from None
    try:
        node = yaml.compose(text)
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f", line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{path}{where}: not valid YAML ({getattr(err, 'problem', err)})") from None
    if data is None:
        return {}
    if not isinstance(data, dict) or node is None or not isinstance(node, yaml.MappingNode):
        raise ConfigError(f"{path}, line 1: expected a mapping of option names to values, found "
                          f"{type(data).__name__}")
    lines = {str(k.value): k.start_mark.line + 1 for k, _ in node.value}
    options = _options(parser)
    out: dict[str, Any] = {}
    for key, value in data.items():
        line = lines.get(str(key), "?")
        dest = str(key).replace("-", "_")
        if dest not in options:
            hint = did_you_mean(dest, options, as_flag=True)
            raise ConfigError(f"{path}, line {line}: unknown option {key!r}{hint}; the keys are `gnnscale train` "
                              "options without the leading dashes (see gnnscale train --help)")
        converted, expected = _convert(options[dest], value)
        if expected is not None:
            raise ConfigError(f"{path}, line {line}: option {key!r} expects {expected}, found {value!r} "
                              f"({type(value).__name__})")
        out[dest] = converted
    return out


def resolved(args: argparse.Namespace, parser: argparse.ArgumentParser) -> dict[str, Any]:
    """Every option of the run (after the file and the flags), by flag name, as :func:`load` reads it
    back (KEY=VALUE options as a mapping)."""
    out = {}
    for dest, action in _options(parser).items():
        if hasattr(args, dest):
            value = getattr(args, dest)
            out[dest.replace("_", "-")] = dict(value) if getattr(action.type, "__name__", None) == "key_value" \
                else value
    return out


def dump(config: dict[str, Any]) -> str:
    return yaml.safe_dump(config, sort_keys=True, default_flow_style=None)


def beside(metrics_path: str) -> str:
    """Where the resolved configuration of a run with ``--metrics metrics_path`` goes."""
    root, _ = os.path.splitext(metrics_path)
    return root + ".config.yaml"
