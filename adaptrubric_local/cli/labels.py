"""The `labels` subcommands, registered by `cli/`: `labels merge` writes a labelled copy of a data set
as it streams (`labelled_stream.py`), then streams the copy back to check a digest of its ids and labels.
Argument handling only; labels files are read and applied by `labels.py`.
"""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from ..formats import canonical
from ..formats.stream import stream_trajectories
from ..labelled_stream import LabelledStream
from ..types import Trajectory
from .common import add_command, add_data_options, add_labels_options, data_options

EXAMPLES = """examples:
  adaptrubric labels merge runs/synth/trajectories.jsonl --labels labels.jsonl --out runs/labelled
  adaptrubric labels merge ../data/androidgen --labels alice.jsonl --labels bob.jsonl --out runs/androidgen-labelled
  adaptrubric eval runs/labelled --image-root runs/synth --verdicts v.jsonl --out runs/eval

The copy is one canonical JSONL (DIR/trajectories.jsonl) whose screenshots stay where they are: its
image paths lead from DIR to the original files, so read it with --image-root naming the original data
folder (the command prints it). DIR/merge.json records the data, the labels files (sha256) and the counts.
A later labels file wins per id; a null (unsure) label leaves the data's label as it was.
"""


def cmd_merge(args) -> int:
    if not args.labels:
        raise ValueError("give at least one --labels FILE (what the review page's Export writes)")
    src = LabelledStream(args.data, args.labels, **data_options(args))  # the labels files are read (and checked) here
    out = Path(args.out)
    target = out / "trajectories.jsonl"
    if any(out.resolve() in (s, s.parent) for s in src.sources()):
        raise ValueError(f"--out {out} holds the data set's own files; write the labelled copy into another folder "
                         "(read as a whole, a folder with both would hold every trajectory twice)")
    out.mkdir(parents=True, exist_ok=True)
    written = ReadBack()  # canonical JSONL as the data is read, screenshots referenced where they are
    with open(target, "w", encoding="utf-8") as fh:
        for _, x in src.items():
            if isinstance(x, Trajectory):
                fh.write(canonical.record_line(x, target, reference=True))
                written.add(x)
            else:
                print(f"not copied (bad record): {x}", file=sys.stderr)
    if src.warning():  # what `load_labelled` says of a data set and its labels files
        print(src.warning(), file=sys.stderr)
    print(src.applied().summary(), file=sys.stderr)
    root = Path(args.data) if Path(args.data).is_dir() else Path(args.data).parent  # then the --image-root folders
    roots = [str(root.resolve()), *(str(Path(r).resolve()) for r in args.image_root)]
    back = ReadBack()  # the copy reads back as written, streamed too
    for _, x in stream_trajectories(target, check_images=False, image_roots=roots).items():
        back.add(x)
    if back.first_error or back.digest() != written.digest():
        why = back.first_error or "the labels differ"
        raise ValueError(f"{target} does not read back as written: {why}")
    record = {"data": str(args.data), "trajectories": written.n, "bad_records": src.bad,
              "labelled": written.labelled, "labels": src.applied().record(), "image_roots": roots}
    (out / "merge.json").write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {target}: {record['trajectories']} trajectories, {record['labelled']} labelled"
          + (f"; {src.bad} bad record(s) not copied" if src.bad else ""))
    print("its screenshots are the originals: read it with " + " ".join(f"--image-root {r}" for r in roots))
    return 0


class ReadBack:
    """What a copy holds, one trajectory at a time: how many, how many labelled, a digest of their ids and
    labels in order, and the first record that did not read."""

    def __init__(self):
        self.n = self.labelled = 0
        self.first_error = None
        self._hash = hashlib.sha256()

    def add(self, x) -> None:
        if isinstance(x, Trajectory):
            self.n += 1
            self.labelled += x.label in (0, 1)
            self._hash.update(json.dumps([x.id, x.label]).encode() + b"\n")
        elif self.first_error is None:
            self.first_error = x

    def digest(self) -> tuple[int, str]:
        return self.n, self._hash.hexdigest()


def add_subcommands(sub) -> None:
    d = add_command(sub, "labels", help="labels files (what the review page exports): a labelled copy of a data set",
                    description="Work with labels files: lines of id and label (1, 0, or null for unsure) that the "
                                "review page exports and every command that reads labels takes with --labels.",
                    epilog=EXAMPLES)
    dsub = d.add_subparsers(dest="labels_cmd", metavar="STEP", required=True)
    p = add_command(dsub, "merge", cmd_merge,
                    help="write a copy of the data set, canonical format, with the labels applied",
                    description="Apply --labels files to DATA and write DIR/trajectories.jsonl (canonical format; the "
                                "screenshots are referenced where they are, not copied) and DIR/merge.json (data, "
                                "labels files with sha256, counts).", epilog=EXAMPLES)
    p.add_argument("data", help="trajectory file or folder (any supported format)")
    p.add_argument("--out", required=True, help="output folder DIR")
    add_labels_options(p)
    add_data_options(p)
