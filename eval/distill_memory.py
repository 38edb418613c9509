"""Peak memory of `distill train` on screen-sized trajectories, measured, against the memory plan.

The cost that dominates real LoRA training is the language-model head over Qwen3-VL's 151,936-row
vocabulary. A tiny random Qwen3-VL padded to that vocabulary shows it on the CPU: 4 trajectories of
6 phone screenshots (1080x2400), `distill train --epochs 1 --target verdict` in a subprocess, its
peak resident memory from `resource.getrusage(RUSAGE_CHILDREN)` of a fresh parent, beside `distill plan`'s estimate
for the same run. With `--reference` the same run is repeated with transformers' own loss (logits
at every position, upcast to float32 by the loss) and both sides and their ratio are printed.

    python eval/distill_memory.py --out runs/distill-memory --reference

Exits 1 when the plan's estimate is not within 25% of the measured peak, or the reference run failed (no
ratio); tests/test_distill_memory.py runs the first part in the suite (`check`).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

QWEN3VL_VOCAB = 151_936
GB = 1024 ** 3

REFERENCE = """
import sys
import torch
from adaptrubric_local.distill import trainer, train

def full_logits(self, model, inputs):  # transformers' default: logits at every position, its own loss
    inputs = dict(inputs)
    for k in ("score_pos", "weight", "teacher_score", "teacher_p"):
        inputs.pop(k)
    labels = inputs.pop("labels")
    inputs = self._pixels(model, inputs)
    loss = model(**inputs, labels=labels, use_cache=False).loss
    nan = torch.full((labels.shape[0],), float("nan"))
    return {"loss": loss, "p1": nan, "teacher_score": nan, "teacher_p": nan}

trainer.DistillTrainer._forward = full_logits
sys.exit(train.main(sys.argv[1:]))
"""


def phone_data(out: Path, n_traj: int = 4, frames: int = 6, size: tuple[int, int] = (1080, 2400)) -> Path:
    """`n_traj` labelled trajectories of `frames` drawn phone screens each (canonical JSONL)."""
    from PIL import Image, ImageDraw

    out.mkdir(parents=True, exist_ok=True)
    recs = []
    for t in range(n_traj):
        steps = []
        for k in range(frames):
            path = out / "img" / f"t{t}_{k}.png"
            path.parent.mkdir(parents=True, exist_ok=True)
            im = Image.new("RGB", size, (245, 245, 245))
            d = ImageDraw.Draw(im)
            d.rectangle([0, 0, size[0], 120], fill=(30 + 40 * t, 90, 160))
            for row in range(12):
                y = 200 + row * 170
                d.rectangle([60, y, size[0] - 60, y + 120], fill=((k * 37 + row * 11) % 255, 200, 220))
                d.text((90, y + 40), f"item {row} on screen {k} of trajectory {t}", fill=(0, 0, 0))
            if k == frames - 1:
                d.rectangle([0, size[1] - 400, size[0], size[1]], fill=(0, 170, 0) if t % 2 else (200, 0, 0))
            im.save(path)
            steps.append({"screenshot": str(path.relative_to(out)), "action": f"tap(item {k})", "action_type": "tap"})
        recs.append({"id": f"t{t}", "instruction": f"Open item {t} in the Notes app.", "steps": steps,
                     "label": t % 2, "task_id": f"task{t}", "platform": "android"})
    path = out / "trajectories.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


def prepare(out: Path) -> tuple[Path, Path]:
    """(the tiny model with Qwen3-VL's vocabulary, a labels-teacher distillation folder)."""
    from adaptrubric_local.distill.collect import CollectConfig, collect, label_teacher, teacher_pipeline
    from adaptrubric_local.dry_run import tokenizer_corpus
    from adaptrubric_local.engine.tiny import make_tiny_model
    from adaptrubric_local.formats import load_trajectories

    model = out / "tiny-qwen3vl-vocab"
    if not (model / "config.json").is_file():
        make_tiny_model(model, corpus=tokenizer_corpus(), vocab_size=QWEN3VL_VOCAB)
    dist = out / "distill"
    if not (dist / "train.jsonl").is_file():
        data = phone_data(out / "data")
        trajs = load_trajectories(data).trajectories
        collect(data, dist, label_teacher(trajs), teacher_pipeline("labels"), CollectConfig(val_fraction=0.0),
                progress=False)
    return model, dist


# a fresh parent for each measured process: RUSAGE_CHILDREN is the largest child a process has waited for
WRAP = ("import json, resource, subprocess, sys; p = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
        "print(json.dumps({'rc': p.returncode, 'stdout': p.stdout, 'stderr': p.stderr, "
        "'maxrss_kb': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))")


def run(cmd: list[str]) -> dict:
    """Run one process to the end: exit status, seconds, its peak resident memory (with the
    DataLoader workers it starts: the largest of them), output."""
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", WRAP, *cmd], capture_output=True, text=True, check=True)
    res = json.loads(p.stdout.strip().splitlines()[-1])
    return {"rc": res["rc"], "seconds": time.perf_counter() - t0, "peak_gb": res["maxrss_kb"] * 1024 / GB,
            "stdout": res["stdout"], "stderr": res["stderr"]}


def measure(out: Path, reference: bool = False) -> dict:
    """Plan and train, each in its own process, at once; with `reference`, the full-logits run after them."""
    model, dist = prepare(out)
    args = [str(dist), "--model", str(model), "--target", "verdict", "--epochs", "1", "--no-progress"]
    ckpt = out / "ckpt"
    # the plan beside the training: each process's peak is its own parent's RUSAGE_CHILDREN
    with ThreadPoolExecutor(1) as pool:
        planned = pool.submit(run, [sys.executable, "-m", "adaptrubric_local.cli", "distill", "plan", *args, "--json"])
        trained = run([sys.executable, "-m", "adaptrubric_local.cli", "distill", "train", *args, "--out", str(ckpt)])
        plan = planned.result()
    if plan["rc"] != 0:
        raise RuntimeError(plan["stderr"][-2000:])
    estimate = json.loads(plan["stdout"])["estimate_gib"]["total"]
    if trained["rc"] != 0:
        raise RuntimeError(trained["stderr"][-3000:])
    result = {"estimate_gb": estimate, "measured_gb": trained["peak_gb"], "ratio": trained["peak_gb"] / estimate,
              "train_seconds": trained["seconds"], "plan": json.loads(plan["stdout"])}
    if reference:
        ref = run([sys.executable, "-c", REFERENCE, *args, "--out", str(out / "ckpt-full-logits")])
        result["reference"] = {"rc": ref["rc"], "peak_gb": ref["peak_gb"], "seconds": ref["seconds"],
                               "error": ref["stderr"][-500:] if ref["rc"] else None}
    return result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--out", default="runs/distill-memory", help="working folder (default runs/distill-memory)")
    ap.add_argument("--reference", action="store_true",
                    help="also train with transformers' own full-vocabulary loss, for comparison")
    args = ap.parse_args(argv)
    res = measure(Path(args.out), args.reference)
    lengths = res["plan"]["lengths"]
    print(f"data: {lengths['examples']} trajectories, tokens per example p50 {lengths['total']['p50']}, max "
          f"{lengths['total']['max']} ({lengths['visual']['max']} visual); vocabulary {QWEN3VL_VOCAB}")
    print(f"distill train (logits at labelled positions): peak RSS {res['measured_gb']:.2f} GB, plan estimate "
          f"{res['estimate_gb']:.2f} GB, measured/estimate {res['ratio']:.2f}, {res['train_seconds']:.0f} s")
    if "reference" in res:
        ref = res["reference"]
        print(f"reference (logits at every position, transformers' loss): peak RSS {ref['peak_gb']:.2f} GB"
              + (f" (exit {ref['rc']})" if ref["rc"] else "") + f", {ref['seconds']:.0f} s; "
              f"reference/package {ref['peak_gb'] / res['measured_gb']:.1f}x")
    problems = check(res)
    if problems:
        print("CHECK FAILED: " + "; ".join(problems), file=sys.stderr)
        return 1
    return 0


def check(res: dict) -> list[str]:
    """What is wrong with a measurement (empty when the plan holds and every ratio could be computed)."""
    out = []
    if not 0.75 <= res["ratio"] <= 1.25:
        out.append(f"measured {res['measured_gb']:.2f} GB against an estimate of {res['estimate_gb']:.2f} GB: "
                   "not within 25%")
    ref = res.get("reference")
    if ref is not None and ref["rc"]:
        out.append(f"the reference run failed (exit {ref['rc']}): no ratio; {ref['error']}")
    return out


if __name__ == "__main__":
    sys.exit(main())
