"""``gnnscale``'s entry point: parse (a ``--config`` file's values become the defaults), run the command."""
from __future__ import annotations

import re
import sys

from gnnscale.errors import GnnscaleError

_NUMBER_LIST = re.compile(r"^-?\d+(,-?\d+)*$")


def _join_negative_lists(argv: list[str]) -> list[str]:
    """Let ``--fanouts -1,-1`` work: argparse would read ``-1,-1`` as an option."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok in ("--fanouts", "--eval-fanouts", "--parts") and i + 1 < len(argv) and _NUMBER_LIST.match(argv[i + 1]):
            out.append(f"{tok}={argv[i + 1]}")
            i += 2
            continue
        out.append(tok)
        i += 1
    return out



def main(argv: list[str] | None = None) -> int:
    from gnnscale.cli import commands as c
    from gnnscale.cli.parser import build_parser
    from gnnscale.logs import setup_logging

    setup_logging()
    argv = _join_negative_lists(list(sys.argv[1:] if argv is None else argv))
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "train" and args.config:  # the file's values become defaults: flags override them
        from gnnscale.cli.run_config import load

        try:
            parser.subcommands["train"].set_defaults(**load(args.config, parser.subcommands["train"]))
        except GnnscaleError as err:
            print(f"gnnscale train: error: {err}", file=sys.stderr)
            return 2
        args = parser.parse_args(argv)
    args.parser = parser.subcommands.get(args.command)
    commands = {"partition": c.cmd_partition, "train": c.cmd_train, "info": c.cmd_info, "datasets": c.cmd_datasets,
                "bench-partition": c.cmd_bench_partition, "evaluate": c.cmd_evaluate, "predict": c.cmd_predict, "embed": c.cmd_embed,
                "report": c.cmd_report}
    try:
        return commands[args.command](args)
    except GnnscaleError as err:
        print(f"gnnscale {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

