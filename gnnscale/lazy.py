"""Package re-exports that load on first use (PEP 562).

A package's ``__init__`` names its public API in one table, ``{name: submodule}``; nothing is
imported until a name is used. Light callers (the launcher of ``gnnscale train`` reads
meta.json, hashes the parts and checks ``--fanouts`` through these packages) then do not pay
for torch, numba or METIS.
"""
from __future__ import annotations

import importlib
from typing import Any, Callable


def lazy_exports(package: str, namespace: dict[str, Any], exports: dict[str, str]
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``.

    Args:
        package: the package's ``__name__``. namespace: its ``globals()`` (a loaded name is
            cached there). exports: public name -> module, absolute (``gnnscale.api``) or
            relative to ``package`` (``.api``).
    """

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__
