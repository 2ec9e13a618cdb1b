"""Exception types of gnnscale.

Every error a user can cause derives from :class:`GnnscaleError`, so the CLI can
print its message (what was expected, what was found, how to fix it) and exit
with status 2 instead of dumping a traceback.
"""
from __future__ import annotations

import contextvars


class GnnscaleError(Exception):
    """Base class of the errors gnnscale raises for bad input or a bad environment."""


class DatasetError(GnnscaleError):
    """A dataset name is unknown, or its files are missing or malformed."""


class PartitionError(GnnscaleError):
    """A partitioning request is invalid, or a partition folder is missing or corrupt."""


class SamplerError(GnnscaleError):
    """Sampler arguments (fanouts, seeds, weights) are invalid."""


class SamplerValueError(SamplerError, ValueError):
    """A loader argument PyG's loaders refuse with ``ValueError``: ``gnnscale.pyg``'s loaders raise this,
    so code written against PyG's errors (``except ValueError``) catches it, and the CLI's handler too."""


class RuntimeSetupError(GnnscaleError):
    """The distributed runtime could not start (port in use, wrong worker count, ...)."""


class PeerError(GnnscaleError):
    """A peer rank died, or did not answer a collective within the timeout."""


class ExchangeError(GnnscaleError):
    """Bad exchange options, or a historical embedding that may not be used."""


class ModelError(GnnscaleError):
    """A model option is invalid."""


class OutputError(GnnscaleError):
    """An output path that cannot be written (checked before any work starts: gnnscale.outputs)."""


#: how errors name the options of ``gnnscale train``: "cli" (the flags, ``--batch-size``), "python" (the
#: keywords of ``gnnscale.train``, ``batch_size``) or None (not said: flags). Set by
#: :func:`gnnscale.options.python_face` and :func:`run_main`; read by :func:`gnnscale.options.flag`.
OPTION_FACE: contextvars.ContextVar[str | None] = contextvars.ContextVar("gnnscale_option_face", default=None)


def run_main(main, script: str) -> None:
    """Run a script's ``main()``: a :class:`GnnscaleError` (a user's error) ends it with its one
    line, ``<script>: error: <message>`` on stderr, and exit status 2 instead of a traceback.
    ``script`` is the script's ``__file__``. A script's options are flags, so errors name the
    options of ``gnnscale.train`` by their flags (``--epochs``) within it."""
    import os
    import sys

    token = OPTION_FACE.set("cli")
    try:
        main()
    except GnnscaleError as err:
        print(f"{os.path.basename(script)}: error: {err}", file=sys.stderr)
        sys.exit(2)
    finally:
        OPTION_FACE.reset(token)
