"""Bank induction then two refinement rounds on a synthetic app domain, on the CPU.

The domain ("ShopDesk", a made-up CRM: look up, update, refund; a success and a failed run per task),
the teacher and the verifier are scripted (adaptrubric_local/bank_induction/synthetic.py): no model
runs. What this shows is the procedure end to end: sampling, teacher prompts and replies, a bank that
validates, the router listing the new families, disagreement cases, revisions kept or rejected on a
validation split the teacher never sees, and the files written. It says nothing about how well a real
teacher writes rubrics or how much a real verifier gains.

    python eval/bank_demo.py [--out runs/bank_demo] [--tasks-per-kind 12]

Ends with one line: families=<n> valid=<yes|no> acc_round0=<x> acc_final=<y> (validation accuracy, %);
exits 1 when the induced bank does not validate.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from adaptrubric_local.bank import load_bank
from adaptrubric_local.bank_induction import InduceConfig, RefineConfig, induce, refine
from adaptrubric_local.bank_induction.synthetic import make_domain, scripted_teacher, scripted_verifier
from adaptrubric_local.formats import load_trajectories
from adaptrubric_local.prompts import load_prompts
from adaptrubric_local.route import router_prompt
from adaptrubric_local.schema import SchemaError


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="output folder (default: a temporary folder, removed at the end)")
    ap.add_argument("--tasks-per-kind", type=int, default=12, help="tasks per kind of task (default 12)")
    args = ap.parse_args(argv)
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="bank_demo_"))
    if out.exists() and args.out:
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        data = make_domain(out / "data", tasks_per_kind=args.tasks_per_kind)
        trajs = load_trajectories(data).trajectories
        print(f"domain: {len(trajs)} trajectories ({sum(t.label == 1 for t in trajs)} successful) in {data}")
        summary = induce(trajs, out / "bank.yaml", scripted_teacher(), InduceConfig(name="shopdesk", domain="ShopDesk"),
                         data_desc=str(data))
        print(f"induce: {summary['sampled']} sampled, {summary['dimensions']} dimensions, {summary['teacher_calls']} "
              f"teacher calls -> families {', '.join(summary['families'])}")
        try:
            bank = load_bank(out / "bank.yaml")
            valid = "yes"
        except SchemaError as exc:
            print(exc)
            valid = "no"
        print("router prompt lists:", [line.split(" : ")[0][2:] for line in
                                       router_prompt(load_prompts(), bank, "x").splitlines() if " : " in line])
        rep = refine(trajs, out / "bank.yaml", out / "refine", scripted_verifier(), scripted_teacher(),
                     RefineConfig(rounds=2), data_desc=str(data), log=print)
        for r in rep["rounds"]:
            for fam, ch in r.get("changes", {}).items():
                if ch["decision"] != "no disagreements":
                    print(f"round {r['round']}: {fam}: {ch['decision']} (validation acc "
                          f"{ch.get('val_acc_before', 0):.1f} -> {ch.get('val_acc_after', 0):.1f})")
        print((out / "refine" / "report.md").read_text())
        print(json.dumps(rep["teacher"]), f"verifier_calls={rep['verifier_calls']}")
        scored = [r for r in rep["rounds"] if "val" in r]
        line = (f"families={len(bank.families)} valid={valid} acc_round0={scored[0]['val']['acc']:.1f} "
                f"acc_final={scored[-1]['val']['acc']:.1f}")
    finally:
        if not args.out:
            shutil.rmtree(out, ignore_errors=True)
    print(line)
    if valid != "yes":
        print("CHECK FAILED: the induced bank does not validate", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
