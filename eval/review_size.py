"""How big a review page is: bytes of review.html + review_files/ per 1,000 trajectories.

Scores a data set with a scripted verifier (no model; its output is a rationale of --raw-chars
characters followed by the verdict block, about what a real verifier writes) or takes --verdicts,
writes the review page with the package's own code and prints the folder size split into thumbnails
and card data, per trajectory and per 1,000 trajectories. Without --data it measures synthetic
trajectories drawn at phone resolution (1080x2400); flat synthetic screens compress better than
real screenshots, so give real data for a figure to quote.

    python eval/review_size.py                                # synthetic, 1080x2400
    python eval/review_size.py --data ../data/androidgen      # real screenshots

Exits 1 when the page it wrote has no thumbnails.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adaptrubric_local import AdaptRubric, FakeEngine, PipelineConfig, load_trajectories
from adaptrubric_local.evaluation.harness import run_review
from adaptrubric_local.scoring import score_file

WORDS = ["the", "final", "screen", "shows", "the", "note", "list", "and", "the", "requested", "text",
         "appears", "at", "the", "top", "of", "the", "file", "while", "the", "keyboard", "is", "closed",
         "and", "no", "error", "dialog", "is", "visible", "so", "the", "edit", "was", "saved"]


def rationale(chars: int) -> str:
    out, k = [], 0
    while sum(len(w) + 1 for w in out) < chars:
        out.append(WORDS[k % len(WORDS)])
        k += 1
    return " ".join(out)


def du(path: Path) -> int:
    total = 0
    for root, _, names in os.walk(path):
        total += sum(os.path.getsize(os.path.join(root, n)) for n in names)
    return total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", help="trajectories (any supported format); default: synthetic at 1080x2400")
    ap.add_argument("--verdicts", help="verdicts of --data (default: scored here by a scripted verifier)")
    ap.add_argument("--raw-chars", type=int, default=1200, help="length of the scripted rationale (default 1200)")
    ap.add_argument("--tasks", type=int, default=25, help="synthetic tasks (x4 candidates; default 25)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        data = args.data
        if data is None:
            from adaptrubric_local.synth import synthesize

            data = synthesize(tmp / "synth", n_tasks=args.tasks, candidates=4, size=(1080, 2400))
        vfile = Path(args.verdicts) if args.verdicts else tmp / "v.jsonl"
        if not args.verdicts:
            text = rationale(args.raw_chars) + "\nSCORE: 1\nEVIDENCE_SUFFICIENT: yes\nMISSING_EVIDENCE: none"
            eng = FakeEngine(script=lambda r: text if r.kind == "verify" else FakeEngine().script(r))
            score_file(AdaptRubric(eng, PipelineConfig(router="rules", fine=False)), data, vfile, progress=False)
        n = len(load_trajectories(data, check_images=False).trajectories)
        t0 = time.perf_counter()
        run_review(vfile, tmp / "review", data)
        seconds = time.perf_counter() - t0
        thumbs = du(tmp / "review" / "review_files" / "thumbs")
        total = du(tmp / "review")
        n_thumbs = len(list((tmp / "review" / "review_files" / "thumbs").iterdir()))
    print(f"data: {data} ({n} trajectories, {n_thumbs} thumbnails); written in {seconds:.1f} s")
    print(f"thumbnails: {thumbs / n / 1e3:.1f} kB per trajectory ({thumbs / max(1, n_thumbs) / 1e3:.1f} kB each)")
    print(f"card data and page: {(total - thumbs) / n / 1e3:.1f} kB per trajectory")
    print(f"review folder: {total / n * 1000 / 1e6:.1f} MB per 1,000 trajectories")
    if not n_thumbs or not n:
        print("CHECK FAILED: the review page has no thumbnails", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
