"""The options' table machinery and their values' checks, beside :mod:`gnnscale.config`.

:func:`option` makes a :class:`~gnnscale.config.TrainConfig` field that carries its option's
facts (an :class:`OptionSpec` row: default, help, section, choices or range, the modes it applies
to, what it requires, an extra check); :data:`SECTIONS` names the sections; the run's modes are
named here so that a row can say where it applies. The checks of values that are more than a
range (``--weight-decay``, ``--link-metric``, ``--pos-weight``, ``--staleness``, integer lists)
are here too, used by the rows and by the code that reads the values. Torch-free.
"""
from __future__ import annotations

import contextlib
import difflib
import numbers
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple, Sequence

from gnnscale.errors import OPTION_FACE, ExchangeError, GnnscaleError

# The run's modes (resolved by gnnscale.planning.plan), as the options' ``applies`` name them.
DATA_PARALLEL, LAYER_PIPELINE, CHUNK_PIPELINE = "data_parallel", "layer_pipeline", "chunk_pipeline"
ALL_MODES = frozenset({DATA_PARALLEL, LAYER_PIPELINE, CHUNK_PIPELINE})
SAMPLED_MODES = frozenset({DATA_PARALLEL, LAYER_PIPELINE})

MODES = ("exact", "historical", "local")  # --exchange: see gnnscale.history
DEVICES = ("cpu", "cuda", "auto")  # --device: see gnnscale.process.device
# Node targets' metrics (docs/targets_and_edge_features.md section 5): each kind's, its default first.
NODE_METRICS = ("accuracy", "macro_f1", "micro_f1", "roc_auc", "ap", "mae", "rmse")
KIND_METRICS = {"class": ("accuracy", "macro_f1", "micro_f1"), "binary": ("roc_auc", "ap", "accuracy", "macro_f1"),
                "multilabel": ("roc_auc", "ap", "micro_f1", "macro_f1"), "regression": ("rmse", "mae")}
#: metrics where lower is better (regression targets): the best epoch has the least
LOWER_IS_BETTER = ("rmse", "mae")

#: section -> the title of its group in ``gnnscale train --help`` (in this order)
SECTIONS = {
    "training": "training",
    "model": "model",
    "sampling": "sampling and evaluation",
    "data": "feature cache, pipeline and network model",
    "exchange": "cross-partition embedding exchange",
    "pipeline": "layer and chunk pipelines (the model's layers split over workers)",
    "task": "task: link prediction and edge targets (--task; docs/link_prediction.md)",
    "targets": "node targets (class, binary, multilabel, regression; docs/targets_and_edge_features.md)",
    "checkpoint": "checkpoints and the saved model",
    "run": "run: devices, logs and checks",
}

class OptionError(GnnscaleError):
    """An option whose value is out of its range or not one of its choices."""


def cli_flag(name: str) -> str:
    """The command-line flag of a TrainConfig field: ``batch_size`` -> ``--batch-size``."""
    return "--" + name.replace("_", "-")


@contextlib.contextmanager
def python_face():
    """Within it, errors name options as the Python API's keywords (``fanouts``), not flags (``--fanouts``),
    unless the caller said otherwise already (a script under :func:`gnnscale.errors.run_main`: flags)."""
    token = OPTION_FACE.set("python") if OPTION_FACE.get() is None else None
    try:
        yield
    finally:
        if token is not None:
            OPTION_FACE.reset(token)


def flag(name: str) -> str:
    """How an error names the option ``name`` to whoever is calling: the flag ``--batch-size`` from the
    command line, the keyword ``batch_size`` from Python (:func:`python_face`)."""
    return name if OPTION_FACE.get() == "python" else cli_flag(name)


def given(name: str, text: str, value: Any = None) -> str:
    """An option with a value as the caller writes it: ``--pos-weight auto`` / ``pos_weight='auto'``
    (``text`` is the command line's; in Python ``value``'s repr where given, else a number stays a number)."""
    if OPTION_FACE.get() != "python":
        return f"{cli_flag(name)} {text}"
    if value is not None:
        return f"{name}={value!r}"
    try:
        float(text)
        return f"{name}={text}"
    except ValueError:
        return f"{name}={text!r}"


def did_you_mean(word: str, names, as_flag: bool = False) -> str:
    """`` (did you mean 'epochs'?)`` for the name of ``names`` nearest ``word``; '' where none is near
    (``as_flag``: the name as the config file's key, ``batch-size``)."""
    near = difflib.get_close_matches(str(word).replace("-", "_"), [str(n).replace("-", "_") for n in names], n=1)
    if not near:
        return ""
    return f" (did you mean {(near[0].replace('_', '-') if as_flag else near[0])!r}?)"


class Needs(NamedTuple):
    """What an option requires: another ``option`` set so that ``ok(cfg)`` holds, ``words`` for the error."""

    option: str
    ok: Callable[[Any], bool]
    words: str


# The kind of each field's type as written (``int | None``: an int that may be unset): how the
# command line parses it and what the check takes. A field of another type must be given one.
KINDS = {"int": "int", "float": "float", "str": "str", "bool": "bool", "Sequence[int]": "ints", "dict": "mapping",
         "str | type": "str", "str | float": "str", "float | str | dict": "decay"}


@dataclass(frozen=True)
class OptionSpec:
    """One option's facts (the :func:`option` metadata of a :class:`TrainConfig` field).

    Attributes:
        name: the field (``batch_size``; the flag is ``--batch-size``). default: its default
            (a dict option's: a fresh copy of it per config).
        section: a key of :data:`SECTIONS`. help: the ``--help`` text (plain ``%``).
        kind: int, float, str, bool, ints (a list of integers), mapping, decay (``--weight-decay``).
        choices: the values it may take (None: any of its kind). metavar: the help's placeholder.
        at_least / below / above: its range (``below`` and ``above`` exclusive); None: unbounded.
        parse: a check of the value that returns the value to keep (None: none).
        applies: the modes that honour it; why: why not the others (the plan's error says it).
        requires: the option it needs (None: none). off_everywhere: False applies in every mode
            (an auto option whose off is the plain path). negatable: a bool option with ``--no-``.
        nullable: None is a value (its default is None: unset).
    """

    name: str
    default: Any
    section: str
    help: str
    kind: str
    choices: tuple | None = None
    metavar: str | None = None
    at_least: float | None = None
    below: float | None = None
    above: float | None = None
    parse: Callable[[Any], Any] | None = None
    applies: frozenset = ALL_MODES
    why: str = ""
    requires: Needs | None = None
    off_everywhere: bool = False
    negatable: bool = True

    @property
    def nullable(self) -> bool:
        return self.default is None


def option(default: Any, section: str, *, help: str, choices: Sequence | None = None, metavar: str | None = None,
           at_least: float | None = None, below: float | None = None, above: float | None = None,
           parse: Callable[[Any], Any] | None = None, applies: frozenset | set = ALL_MODES, why: str = "",
           requires: tuple | None = None, off_everywhere: bool = False, negatable: bool = True) -> Any:
    """A :class:`TrainConfig` field that carries its option's facts (see :class:`OptionSpec`).

    Raises:
        ValueError: a section not in :data:`SECTIONS`, a mode not in :data:`ALL_MODES`, or an
            option that applies to fewer modes without saying why (a mistake in this module).
    """
    applies = frozenset(applies)
    if section not in SECTIONS or not applies <= ALL_MODES or (applies != ALL_MODES and not why):
        raise ValueError(f"option(section={section!r}, applies={sorted(applies)}, why={why!r}): the section must be "
                         f"one of {', '.join(SECTIONS)}, the modes among {', '.join(sorted(ALL_MODES))}, and an "
                         "option that applies to fewer modes says why")
    facts = dict(default=default, section=section, help=help, choices=tuple(choices) if choices else None,
                 metavar=metavar, at_least=at_least, below=below, above=above, parse=parse, applies=applies, why=why,
                 requires=Needs(*requires) if requires else None, off_everywhere=off_everywhere, negatable=negatable)
    if isinstance(default, dict):
        return field(default_factory=lambda: dict(default), metadata={"option": facts})
    return field(default=default, metadata={"option": facts})


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ExchangeError(f"exchange mode must be one of {', '.join(MODES)}; found {mode!r}. "
                            "Use --exchange exact (default), historical or local.")
    return mode


def check_staleness(staleness: int) -> int:
    if isinstance(staleness, bool) or int(staleness) != staleness or int(staleness) < 2:
        raise ExchangeError(
            f"the staleness bound must be an integer >= 2 steps; found {staleness!r}. Pushed embeddings "
            "travel while the next step computes, so the freshest row a step can read is 2 steps old."
        )
    return int(staleness)


def default_node_metric(kind: str) -> str:
    """The metric a target ``kind`` is judged by without ``--metric``: accuracy, roc_auc, roc_auc, rmse."""
    return KIND_METRICS.get(kind, KIND_METRICS["class"])[0]


def parse_pos_weight(value) -> str | float | None:
    """``--pos-weight``: None, ``"auto"`` or a positive number (a numeric string too)."""
    if value is None or value == "auto":
        return value
    try:
        number = float(value) if not isinstance(value, bool) else None
    except (TypeError, ValueError):
        number = None
    if number is None or not number > 0 or number == float("inf"):
        raise OptionError(f"{flag('pos_weight')} must be auto or a positive number; found {value!r}. Pass "
                          f"{given('pos_weight', 'auto')} (negatives / positives of the training labels) or e.g. "
                          f"{given('pos_weight', '3')}.")
    return number


def parse_link_metric(text: str) -> tuple[str, int | None]:
    """(``auc`` | ``hits`` | ``mrr``, K) of ``--link-metric`` (``auc``, ``mrr`` or ``hits@K``)."""
    t = str(text).strip().lower()
    if t in ("auc", "mrr"):
        return t, None
    if t.startswith("hits@") and t[5:].isascii() and t[5:].isdigit() and int(t[5:]) > 0:
        return "hits", int(t[5:])
    raise OptionError(f"{flag('link_metric')} must be auc, mrr or hits@K with K a positive integer; found {text!r}. "
                      f"Pass e.g. {given('link_metric', 'auc')}, {given('link_metric', 'mrr')} or "
                      f"{given('link_metric', 'hits@50')}.")


def _decay(text, item: str) -> float:
    """One decay of ``--weight-decay``: a finite number of at least 0."""
    try:
        value = float(text) if not isinstance(text, bool) else None
    except (TypeError, ValueError):
        value = None
    if value is None or not 0.0 <= value < float("inf"):
        raise OptionError(f"{flag('weight_decay')} must be a number of at least 0 or PREFIX=DECAY items; found "
                          f"{item!r} in it. Pass e.g. {given('weight_decay', '5e-4')} or "
                          f"{given('weight_decay', 'convs=0.01,5e-4')}")
    return value


def parse_weight_decay(value) -> tuple[float, dict[str, float]]:
    """``--weight-decay``: (the decay of the parameters no prefix names, {prefix: decay}).

    ``value`` is a number (one decay for every parameter: ``(value, {})``), or items
    ``PREFIX=DECAY`` separated by commas, with at most one plain number for the parameters no
    prefix names (0 without one): ``"convs=0.01,5e-4"`` -> ``(5e-4, {"convs": 0.01})``; or the
    same as a mapping (the key ``""`` or ``"*"`` for the rest). A prefix names the parameters whose
    dotted name (``model.named_parameters()``: ``convs.3.weight1``, ``encoder.weight``,
    ``head.bias``) is the prefix or starts with it and a dot; where several name one parameter, the
    longest wins. Whether each prefix names a parameter of the model is checked where the model is
    built (:func:`gnnscale.process.eager.param_groups`).

    Raises:
        OptionError: an item that is neither a number nor ``PREFIX=DECAY``, a decay below 0, a
            prefix given twice or two plain numbers.
    """
    if isinstance(value, dict):
        items = [(str(k), v) for k, v in value.items()]
    elif isinstance(value, str):
        items = []
        for part in value.split(","):
            key, eq, decay = part.strip().rpartition("=")
            items.append((key.strip() if eq else "", decay.strip()))
    else:
        return _decay(value, value), {}
    rest: float | None = None
    groups: dict[str, float] = {}
    for key, decay in items:
        item = f"{key}={decay}" if key else str(decay)
        number = _decay(decay, item)
        if key in ("", "*"):
            if rest is not None:
                raise OptionError(f"{flag('weight_decay')} takes at most one plain number (the decay of the "
                                  f"parameters no prefix names); found two in {value!r}. Keep one, e.g. convs=0.01,5e-4")
            rest = number
            continue
        parts = key.split(".")
        if not all(p and (p.replace("_", "").isalnum()) and p.isascii() for p in parts):
            raise OptionError(f"{flag('weight_decay')} prefix {key!r} is not a parameter name's leading part (names "
                              "and indices joined by dots, e.g. convs or convs.0); pass e.g. convs=0.01,5e-4")
        if key in groups:
            raise OptionError(f"{flag('weight_decay')} names the prefix {key!r} twice in {value!r}; give each prefix "
                              "once")
        groups[key] = number
    return (rest if rest is not None else 0.0), groups


def int_list(name: str, value) -> list[int] | tuple[int, ...] | None:
    """The list option ``name``'s value: a sequence of integers as given, a comma-separated string
    (``"10,10"``, as ``--fanouts`` takes it) as a list, None where the option may be unset.

    Raises:
        OptionError: anything else, naming the option (``--fanouts``), what it takes and what was found.
    """
    if value is None and name != "fanouts":
        return None
    if isinstance(value, str):
        try:
            return [int(v) for v in value.split(",") if v.strip()]
        except ValueError:
            pass
    elif isinstance(value, (list, tuple)) and all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in value):
        return value
    raise OptionError(f"{flag(name)} expects integers, e.g. [10, 10] or '10,10'; found {value!r}")


def parse_cache_size(text) -> dict[str, int | float]:
    """``--cache-size``: ``{"rows": N}``, ``{"bytes": B}`` or ``{"fraction": f}`` (of the remote rows) from
    ``rows=5000``, ``bytes=64MB`` (KB, MB, GB), ``fraction=0.1``, or a bare ``10%``, ``0.1`` (a fraction) or
    ``5000`` (rows); None or '' is no cache.

    Raises:
        OptionError: any other form, a negative size, or a fraction above 1 (100%).
    """
    if text is None or text == "":
        return {"fraction": 0.0}
    t = str(text).strip().lower()
    out: dict[str, int | float] | None = None
    try:
        if t.endswith("%"):
            out = {"fraction": float(t[:-1]) / 100}
        elif "=" in t:
            kind, val = t.split("=", 1)
            if kind == "rows":
                out = {"rows": int(val)}
            elif kind == "fraction":
                out = {"fraction": float(val)}
            elif kind == "bytes":
                mult = 1
                for suf, m in (("gb", 1 << 30), ("mb", 1 << 20), ("kb", 1 << 10)):
                    if val.endswith(suf):
                        val, mult = val[: -len(suf)], m
                out = {"bytes": int(float(val) * mult)}
        else:
            v = float(t)
            out = {"fraction": v} if v < 1 or "." in t else {"rows": int(v)}
    except ValueError:
        out = None
    if out is None:
        raise OptionError(f"{flag('cache_size')} must look like rows=5000, bytes=64MB, fraction=0.1 or 10%; found "
                          f"{text!r}")
    (kind, value), = out.items()
    if not value >= 0 or kind == "fraction" and value > 1:
        raise OptionError(f"{flag('cache_size')} must be between 0 and 100% of the remote rows (a fraction 0 to 1), "
                          f"or rows/bytes of at least 0; found {text!r}. Pass e.g. {given('cache_size', '100%')} "
                          f"(every remote row) or {given('cache_size', 'rows=5000')}")
    return out


# The options' extra checks (``parse``): each returns the value the config keeps.
def cache_size_value(value) -> str:
    """``--cache-size`` checked (:func:`parse_cache_size`), kept as given."""
    parse_cache_size(value)
    return value


def weight_decay_value(value) -> float | str | dict:
    """``--weight-decay`` checked: one decay for all as the number, however it was given; groups as given."""
    default, groups = parse_weight_decay(value)
    return value if groups else default


def staleness_value(value) -> int:
    """``--staleness`` checked (:func:`check_staleness`), kept as given."""
    check_staleness(value)
    return value


def link_metric_value(value) -> str:
    """``--link-metric`` checked (:func:`parse_link_metric`), kept as given."""
    parse_link_metric(value)
    return value


def pos_weight_value(value) -> str | float:
    """``--pos-weight`` checked (:func:`parse_pos_weight`), kept as given."""
    parse_pos_weight(value)
    return value


def key_value(text: str) -> tuple[str, Any]:
    """``--method-opt KEY=VALUE``: ``(key, value)``, the value an int, a float, a bool (true/false)
    or the string (argparse's type: raises ``argparse.ArgumentTypeError`` on a text without ``=``)."""
    import argparse

    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE such as slack=0.1; found {text!r}")
    key, value = text.split("=", 1)
    for conv in (int, float):
        try:
            return key.strip(), conv(value)
        except ValueError:
            pass
    if value.lower() in ("true", "false"):
        return key.strip(), value.lower() == "true"
    return key.strip(), value


def temporal_split_value(value) -> str:
    """``--temporal-split`` checked: three fractions train,val,test >= 0 summing to 1, kept as given."""
    temporal_fractions(value)
    return value


def temporal_fractions(value) -> tuple[float, float, float]:
    """The three fractions of ``--temporal-split`` (``"0.70,0.15,0.15"`` or a sequence)."""
    try:
        parts = [float(v) for v in (str(value).split(",") if isinstance(value, str) else value)]
    except (TypeError, ValueError):
        parts = []
    if len(parts) != 3 or min(parts) < 0 or abs(sum(parts) - 1.0) > 1e-6 or parts[0] == 0:
        raise OptionError(f"{flag('temporal_split')} expects three fractions train,val,test >= 0 summing to 1 (train "
                          f"above 0), e.g. 0.70,0.15,0.15; found {value!r}")
    return parts[0], parts[1], parts[2]
