"""The `labels` subcommands, registered by `cli/`: `labels merge` writes a labelled copy of a data
set. Argument handling only; labels files are read and applied by `labels.py` (through
`cli/common.py`'s `load_labelled`, the step every command that reads labels takes), the copy is written by
the canonical format's writer.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from .common import FORMATTER, add_data_options, add_labels_options, load_labelled

EXAMPLES = """examples:
  adaptrubric labels merge runs/synth/trajectories.jsonl --labels labels.jsonl --out runs/labelled
  adaptrubric labels merge ../data/androidgen --labels alice.jsonl --labels bob.jsonl --out runs/androidgen-labelled
  adaptrubric eval runs/labelled --image-root runs/synth --verdicts v.jsonl --out runs/eval

The copy is one canonical JSONL (DIR/trajectories.jsonl) whose screenshots stay where they are: its
image paths lead from DIR to the original files, so read it with --image-root naming the original data
folder (the command prints it). DIR/merge.json records the data, the labels files (sha256) and the counts.
A later labels file wins per id; a null (unsure) label leaves the data's label as it was.
"""


def _image_roots(data: Path, extra: list[str]) -> list[str]:
    root = data if data.is_dir() else data.parent
    return [str(root.resolve()), *(str(Path(r).resolve()) for r in extra)]


def cmd_merge(args) -> int:
    from ..formats import canonical, load_trajectories

    if not args.labels:
        raise ValueError("give at least one --labels FILE (what the review page's Export writes)")
    loaded, labels = load_labelled(args)
    out = Path(args.out)
    target = out / "trajectories.jsonl"
    sources = {Path(t.source).resolve() for t in loaded.trajectories if t.source}
    if any(out.resolve() in (s, s.parent) for s in sources):
        raise ValueError(f"--out {out} holds the data set's own files; write the labelled copy into another folder "
                         "(read as a whole, a folder with both would hold every trajectory twice)")
    out.mkdir(parents=True, exist_ok=True)
    canonical.write(loaded.trajectories, target, reference=True)
    roots = _image_roots(Path(args.data), args.image_root)
    back = load_trajectories(target, check_images=False, image_roots=roots)  # the copy reads back as written
    if back.errors or [(t.id, t.label) for t in back.trajectories] != [(t.id, t.label) for t in loaded.trajectories]:
        why = back.errors[0] if back.errors else "the labels differ"
        raise ValueError(f"{target} does not read back as written: {why}")
    record = {"data": str(args.data), "trajectories": len(loaded.trajectories), "bad_records": len(loaded.errors),
              "labelled": sum(t.label in (0, 1) for t in loaded.trajectories), "labels": labels,
              "image_roots": roots}
    (out / "merge.json").write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n")
    for e in loaded.errors:
        print(f"not copied (bad record): {e}", file=sys.stderr)
    print(f"wrote {target}: {record['trajectories']} trajectories, {record['labelled']} labelled"
          + (f"; {len(loaded.errors)} bad record(s) not copied" if loaded.errors else ""))
    print("its screenshots are the originals: read it with " + " ".join(f"--image-root {r}" for r in roots))
    return 0


def add_subcommands(sub) -> None:
    """Register `labels merge`."""
    d = sub.add_parser("labels", help="labels files (what the review page exports): a labelled copy of a data set",
                       description="Work with labels files: lines of id and label (1, 0, or null for unsure) that "
                                   "the review page exports and every command that reads labels takes with --labels.",
                       epilog=EXAMPLES, formatter_class=FORMATTER)
    dsub = d.add_subparsers(dest="labels_cmd", metavar="STEP", required=True)
    p = dsub.add_parser("merge", help="write a copy of the data set, canonical format, with the labels applied",
                        description="Apply --labels files to DATA and write DIR/trajectories.jsonl (canonical "
                                    "format; the screenshots are referenced where they are, not copied) and "
                                    "DIR/merge.json (data, labels files with sha256, counts).",
                        epilog=EXAMPLES, formatter_class=FORMATTER)
    p.add_argument("data", help="trajectory file or folder (any supported format)")
    p.add_argument("--out", required=True, help="output folder DIR")
    add_labels_options(p)
    add_data_options(p)
    p.set_defaults(func=cmd_merge)
