"""The layer names the launcher knows without torch: a torch-free copy of the layer registry's names
(:mod:`gnnscale.nn.layers.registry`: ``ZOO``, ``TYPED_ZOO`` and the ``prefix:`` builders), so that
``--layer sagee`` is refused in one line before torch is imported and before any worker starts.
``tests/test_output_paths.py`` keeps the copy equal to the registry."""
from __future__ import annotations

from typing import Iterable

from gnnscale.options import OptionError, did_you_mean

#: the homogeneous zoo (``gnnscale.nn.layers.ZOO``), in its order
ZOO_NAMES = ("sage", "sage-pyg", "gcn", "gcnii", "gat", "gat-pyg", "gin", "gine", "tgat")
#: the relation-aware zoo of typed graphs (``gnnscale.nn.layers.TYPED_ZOO``)
TYPED_NAMES = ("rgcn", "hgt")
#: ``prefix:<rest>`` specs built by a registered prefix (``dgl:ClassName``, ``rel:<spec>``)
PREFIXES = ("dgl", "rel")


def check_layer_name(spec: str, zoo: Iterable[str] = ZOO_NAMES, typed: Iterable[str] = TYPED_NAMES) -> None:
    """A ``--layer`` spec given by name names a layer of the zoo (``zoo`` or ``typed``; ``rel:<spec>``:
    its inner spec); an import path ``module:Class`` and ``dgl:Class`` are left to the builder (they
    need torch). ``zoo`` and ``typed``: the registry's names where it is loaded already (a user's
    own ``register``-ed layers too).

    Raises:
        OptionError: one line with the unknown name, the closest known one and what a spec may be.
    """
    zoo, typed = [n.lower() for n in zoo], [n.lower() for n in typed]
    text = spec.strip()
    inner = text
    while ":" in inner:
        prefix, _, rest = inner.partition(":")
        if prefix.strip().lower() != "rel":
            return  # dgl:Class, module:Class: built once by the launcher's check (torch)
        inner = rest.strip()
    if inner.lower() in zoo + typed:
        return
    hint = did_you_mean(inner.lower(), zoo + typed, as_flag=True)  # names keep their hyphens (sage-pyg)
    raise OptionError(f"--layer {text}: unknown layer {inner!r}{hint}; expected one of {', '.join(zoo)}, an import "
                      f"path 'package.module:ClassName' or 'dgl:ClassName'; on typed graphs also "
                      f"{', '.join(typed + ['rel:<layer>'])}")
