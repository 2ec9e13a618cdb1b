"""Dataset names and their options: parsing ``source:arg?key=value&...`` specs.

A dataset *spec* is a string such as ``planetoid:cora``, ``npz:/data/x.npz?split=3``
or ``synthetic?num_nodes=1000000&avg_degree=20``. The part after ``?`` is a URL
query; each value is parsed as int, then float, then bool (``true``/``false``),
else kept as a string. Each source declares its options as a table of
:class:`Option`; :func:`resolve_options` merges the query with keyword options
(keywords win), checks that every key is known and coerces every value to the
declared type, raising :class:`~gnnscale.errors.DatasetError` otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import parse_qsl, urlencode

from gnnscale.errors import DatasetError


@dataclass(frozen=True)
class Option:
    """One option a dataset source accepts.

    ``kind`` is one of ``int``, ``float``, ``bool``, ``str``; ``default`` may be
    ``None`` for "not given" (the source then decides).
    """

    kind: type
    default: Any
    help: str


def parse_value(text: str) -> int | float | bool | str:
    """Parse one query value: int, else float, else bool (true/false), else the string."""
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    if text.lower() in ("true", "yes", "on"):
        return True
    if text.lower() in ("false", "no", "off"):
        return False
    return text


def split_spec(spec: str) -> tuple[str, dict[str, Any]]:
    """Split ``"base?k=v&k2=v2"`` into ``("base", {"k": parsed v, ...})``.

    Raises DatasetError on a malformed query (an item without ``=``, an empty key
    or a key given twice).
    """
    if not isinstance(spec, str) or not spec.strip():
        raise DatasetError(
            f"expected a dataset name such as 'planetoid:cora' or 'synthetic', found {spec!r}; "
            "pass a non-empty string (`gnnscale datasets` lists the names)"
        )
    base, sep, query = spec.strip().partition("?")
    options: dict[str, Any] = {}
    if sep and query:
        try:
            pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=True)
        except ValueError as exc:
            raise DatasetError(
                f"expected options in URL-query form 'key=value&key2=value2' after '?' in "
                f"dataset name {spec!r}, found {query!r} ({exc}); fix the query part"
            ) from None
        for key, value in pairs:
            if not key:
                raise DatasetError(
                    f"expected 'key=value' items in the options of {spec!r}, found an empty key; "
                    "fix the query part"
                )
            if key in options:
                raise DatasetError(
                    f"expected each option once in {spec!r}, found {key!r} twice; remove one"
                )
            options[key] = parse_value(value)
    return base, options


def _coerce(source: str, key: str, value: Any, kind: type) -> Any:
    """Coerce ``value`` to ``kind`` or raise a DatasetError naming the option."""
    if value is None:
        return None
    if kind is bool:
        if isinstance(value, (bool, int)) and value in (0, 1, True, False):
            return bool(value)
        if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no", "on", "off"):
            return value.lower() in ("true", "yes", "on")
    elif kind is int:
        if isinstance(value, bool):
            pass
        elif isinstance(value, int):
            return int(value)
        elif isinstance(value, float) and value.is_integer():
            return int(value)
        elif isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                pass
        else:
            try:  # numpy integers
                import numpy as np

                if isinstance(value, np.integer):
                    return int(value)
            except ImportError:  # pragma: no cover
                pass
    elif kind is float:
        if not isinstance(value, bool):
            try:
                return float(value)
            except (TypeError, ValueError):
                pass
    elif kind is str:
        return str(value)
    raise DatasetError(
        f"expected option {key!r} of dataset source {source!r} to be a {kind.__name__}, "
        f"found {value!r}; pass e.g. {key}=<{kind.__name__}>"
    )


def resolve_options(
    source: str, table: Mapping[str, Option], query: Mapping[str, Any], kwargs: Mapping[str, Any]
) -> dict[str, Any]:
    """Merge query options and keyword options (keywords win) against ``table``.

    Returns a dict with every key of ``table``: the given value coerced to the
    declared type, or the default. Unknown keys raise DatasetError listing the
    valid ones.
    """
    given = {**dict(query), **{k: v for k, v in kwargs.items() if v is not None}}  # None = not given
    unknown = sorted(set(given) - set(table))
    if unknown:
        valid = ", ".join(sorted(table)) or "(none)"
        raise DatasetError(
            f"expected options of dataset source {source!r} among [{valid}], found unknown "
            f"option(s) {unknown}; remove them or fix their spelling"
        )
    out = {}
    for key, opt in table.items():
        out[key] = _coerce(source, key, given[key], opt.kind) if key in given else opt.default
    return out


def canonical_name(base: str, query: Mapping[str, Any], kwargs: Mapping[str, Any]) -> str:
    """The name a dataset is recorded under: ``base`` plus the explicitly given options.

    Options are sorted so equal requests give equal names; ``root`` is never part of it.
    """
    given = {**dict(query), **{k: v for k, v in kwargs.items() if v is not None}}
    given.pop("root", None)
    if not given:
        return base
    items = sorted((k, str(v).lower() if isinstance(v, bool) else str(v)) for k, v in given.items())
    return f"{base}?{urlencode(items)}"


def format_options(table: Mapping[str, Option], indent: str = "    ") -> str:
    """Help text lines for an option table: ``name (type, default X): help``."""
    lines = []
    for key, opt in table.items():
        default = "default: automatic" if opt.default is None else f"default {opt.default}"
        lines.append(f"{indent}{key} ({opt.kind.__name__}, {default}): {opt.help}")
    return "\n".join(lines)


def data_folder(arg: str, root: str | None, holds: str, scheme: str) -> "Path":
    """The folder a ``scheme:<arg>`` dataset names (relative to ``root`` when given and ``arg`` is
    relative); a missing folder is a DatasetError saying what it should hold (``holds``)."""
    from pathlib import Path

    from gnnscale.errors import DatasetError

    folder = Path(arg).expanduser()
    if not folder.is_absolute() and root is not None:
        folder = Path(root).expanduser() / folder
    if not folder.is_dir():
        raise DatasetError(f"expected {holds} at {folder}, found {'a file' if folder.exists() else 'nothing'}; "
                           f"pass {scheme}:<folder>")
    return folder
