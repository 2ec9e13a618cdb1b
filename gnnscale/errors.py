"""Exception types of gnnscale.

Every error a user can cause derives from :class:`GnnscaleError`, so the CLI can
print its message (what was expected, what was found, how to fix it) and exit
with status 2 instead of dumping a traceback.
"""


class GnnscaleError(Exception):
    """Base class of the errors gnnscale raises for bad input or a bad environment."""


class DatasetError(GnnscaleError):
    """A dataset name is unknown, or its files are missing or malformed."""


class PartitionError(GnnscaleError):
    """A partitioning request is invalid, or a partition folder is missing or corrupt."""


class SamplerError(GnnscaleError):
    """Sampler arguments (fanouts, seeds, weights) are invalid."""


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


def run_main(main, script: str) -> None:
    """Run a script's ``main()``: a :class:`GnnscaleError` (a user's error) ends it with its one
    line, ``<script>: error: <message>`` on stderr, and exit status 2 instead of a traceback.
    ``script`` is the script's ``__file__``."""
    import os
    import sys

    try:
        main()
    except GnnscaleError as err:
        print(f"{os.path.basename(script)}: error: {err}", file=sys.stderr)
        sys.exit(2)
