"""The `merge-shards` and `compact` subcommands, registered by `cli/`: argument handling only; the checks
and the merge are in `shards`, compaction in `verdict_file`, the `cascade` section of merged shards of a
run with a judge in cli/cascade.py."""
from __future__ import annotations

import json
from pathlib import Path

from ..run_settings import sidecar
from ..verdict_file import compact_file
from .cascade import add_cascade_section
from .common import add_command, add_data_options

EXAMPLES = """examples:
  adaptrubric score DATA --model M --out v1.jsonl --shard 1/4      # on machine 1 (2/4, 3/4, 4/4 on the others)
  adaptrubric merge-shards DATA --shards v1.jsonl v2.jsonl v3.jsonl v4.jsonl --out verdicts.jsonl
"""


def cmd_merge_shards(args) -> int:
    from ..scale_out.shards import merge_shards

    summary = merge_shards(args.shards, args.out, data=args.data, fmt=args.format, image_roots=args.image_root)
    if "cascade" in json.loads(sidecar(Path(args.out), "config").read_text()):  # shards of a run with a judge
        add_cascade_section(Path(args.out), summary)
    print(json.dumps(summary, indent=2))
    return 0


def cmd_compact(args) -> int:
    n_in, n_out = compact_file(Path(args.verdicts), Path(args.out))
    print(f"{args.out}: {n_out} line(s), one per id ({n_in} in {args.verdicts}: {n_in - n_out} earlier line(s) of "
          "ids with a later one left out)")
    return 0


def add_subcommands(sub) -> None:
    p = add_command(sub, "compact", cmd_compact, help="write a verdict file's last line per id (one line per id)",
        description="A verdict file may hold several lines of one id (a resumed run's retried errors, a "
                    "cascade's lines asked of the judge again); readers take the last one. Write the "
                    "last line of each id, in the order the ids first appear, to --out, with copies of "
                    "the config and summary sidecars, for tools that take the file as it is (pandas).",
        epilog="examples:\n  adaptrubric compact v.jsonl --out v.compact.jsonl")
    p.add_argument("verdicts", metavar="VERDICTS", help="the verdict JSONL to compact (left as it is)")
    p.add_argument("--out", required=True, help="the compacted verdict JSONL to write (must not hold lines)")

    p = add_command(sub, "merge-shards", cmd_merge_shards,
                    help="join the verdict files of `score --shard I/N` into one",
        description="Check that the shard files cover the data once (shards 1..N each once, the same "
                    "settings, no id in two shards, every record of DATA answered), then write them as "
                    "one verdict file with its config and summary sidecars. Prints the summary JSON.",
        epilog=EXAMPLES)
    p.add_argument("data", metavar="DATA", help="the data that was scored: every record must have its verdict")
    p.add_argument("--shards", nargs="+", required=True, metavar="SHARD.jsonl",
                   help="the verdict files `score --shard I/N` wrote")
    p.add_argument("--out", required=True, help="the merged verdict JSONL to write (must not hold lines)")
    add_data_options(p)
