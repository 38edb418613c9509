"""Judge a distilled student: the base model and the adapter score the held-out split through the
normal scoring path (the pipeline settings the teacher ran with, the adapter's image settings and
base quantisation), on one loaded model (the base run switches the adapter off), then the eval
harness writes each one's metrics, report and plots, and a side-by-side table gives agreement with
the teacher, how close the student's p_success is to the teacher's probability (mean absolute
difference, ECE against it) where the teacher gave one, and accuracy/F1 against labels. Also
`merge`, which folds an adapter into its base model (a 4-bit-trained one into the base dequantised
from the same 4-bit weights). Knows nothing about argument parsing.
"""
from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import fields, replace
from pathlib import Path

from ..engine.base import Engine, Output, Request
from ..engine.hf_config import HFEngineConfig
from ..formats import LoadResult, load_trajectories
from ..pipeline import AdaptRubric, PipelineConfig
from .records import folder_file, read_split


def _manifest(data_dir: Path) -> dict:
    return json.loads(folder_file(data_dir, "manifest.json").read_text())


def pipeline_from_manifest(manifest: dict, **overrides) -> PipelineConfig:
    """The pipeline settings the teacher ran with."""
    known = {f.name for f in fields(PipelineConfig)}
    return PipelineConfig(**{**{k: v for k, v in manifest.get("pipeline", {}).items() if k in known}, **overrides})


def split_data(data_dir: Path, split: str, data: str | None = None) -> tuple[str, LoadResult, dict[str, dict]]:
    """The split's trajectories from the collected data set: (data path, the split's trajectories,
    the teacher's score and P(SCORE=1) per trajectory id)."""
    records = read_split(data_dir, split)
    teacher = {r["id"]: {"score": r["verify"]["verdict"]["score"], "p": r["verify"].get("p_success")}
               for r in records}
    src = data or _manifest(data_dir).get("data")
    if not src or not Path(src).exists():
        raise ValueError(f"the collected data set {src!r} is not there; pass --data with its new location")
    loaded = load_trajectories(src)
    trajs = [t for t in loaded.trajectories if t.id in teacher]
    if len(trajs) != len(teacher):
        raise ValueError(f"{src}: {len(teacher) - len(trajs)} trajectory(ies) of {split}.jsonl are missing")
    return src, LoadResult(trajectories=trajs), teacher


def ece_against(student: list[float], reference: list[float], bins: int = 15) -> float:
    """Expected calibration error of `student` probabilities against `reference` ones: in 15
    equal-width bins of the student's value, |mean student - mean reference|, weighted by bin size."""
    total, err = len(student), 0.0
    for k in range(bins):
        lo, hi = k / bins, (k + 1) / bins
        idx = [i for i, x in enumerate(student) if lo <= x < hi or (k == bins - 1 and x == 1.0)]
        if idx:
            err += len(idx) / total * abs(sum(student[i] for i in idx) / len(idx) - sum(reference[i] for i in idx)
                                          / len(idx))
    return err


def agreement(verdicts_path: Path, teacher: dict[str, dict]) -> dict:
    """Fraction of trajectories where the student's parsed score equals the teacher's (unparsed and
    errors count as disagreement); where the teacher gave P(SCORE=1), the mean absolute difference
    of the student's p_success from it and the ECE against it."""
    from ..evaluation.harness import load_verdicts

    vs = {str(v.id): v for v in load_verdicts(verdicts_path)}
    same = sum(1 for i, t in teacher.items() if vs.get(i) is not None and vs[i].status == "ok"
               and vs[i].score == t["score"])
    pairs = [(vs[i].p_success, t["p"]) for i, t in teacher.items()
             if t["p"] is not None and i in vs and vs[i].p_success is not None]
    out = {"agreement": same / len(teacher) if teacher else None, "n": len(teacher),
           "predictions": {i: (vs[i].score if i in vs else None) for i in teacher},
           "p_success": {i: (vs[i].p_success if i in vs else None) for i in teacher},
           "p_mae_vs_teacher": None, "ece_vs_teacher": None, "n_teacher_p": len(pairs)}
    if pairs:
        out["p_mae_vs_teacher"] = sum(abs(a - b) for a, b in pairs) / len(pairs)
        out["ece_vs_teacher"] = ece_against([p for p, _ in pairs], [q for _, q in pairs])
    return out


class BaseOf(Engine):
    """The base model of an engine that holds base + adapter: the same loaded weights and the same
    batch budget, with the adapter switched off for each call (peft's `disable_adapter()`), named and
    recorded as the base. How `evaluate` scores both without loading the model twice: a second
    engine would size its batches from the GPU memory the first one still holds."""

    def __init__(self, engine):
        self.inner = engine
        self.config = replace(engine.config, adapter=None)
        self.name = self.config.name

    def generate(self, requests: list[Request]) -> list[Output]:
        with self.inner.model.disable_adapter():
            return self.inner.generate(requests)

    def generate_iter(self, requests: list[Request]) -> Iterator[list[tuple[int, Output]]]:
        """The inner engine's outputs per length group, as they are ready (the progress bar moves per group
        in the base run too); the adapter is off until the last group is handed over."""
        with self.inner.model.disable_adapter():
            yield from self.inner.generate_iter(requests)

    def next_token_probs(self, requests, prefixes, candidates=("0", "1")):
        with self.inner.model.disable_adapter():
            return self.inner.next_token_probs(requests, prefixes, candidates)

    @property
    def stats(self) -> dict:
        return self.inner.stats


def evaluate(data_dir: str | Path, model: str, adapter: str | Path, out: str | Path, split: str = "val",
             batch_size: int = HFEngineConfig.max_batch_size, max_new_tokens: int | None = None,
             data: str | None = None, progress: bool = True, base: bool = True,
             load_in_4bit: bool | None = None) -> dict:
    """Base vs adapter on one split; writes out/{base,adapter}/ (verdicts, metrics, report, plots),
    out/comparison.json and out/comparison.md, and adds the numbers to the adapter's model card.
    Both score at the adapter's image settings (image_policy.json) and the collection's pipeline, on
    the base loaded as the adapter was trained (base_quantisation.json: a QLoRA student on its 4-bit
    base) unless `load_in_4bit` says otherwise (with a warning when it differs)."""
    from ..engine.hf import HFEngine
    from ..evaluation.harness import run_eval
    from ..scoring import score_file
    from .image_policy import adopt

    data_dir, out, adapter = Path(data_dir), Path(out), Path(adapter)
    out.mkdir(parents=True, exist_ok=True)
    chosen = {} if load_in_4bit is None else {"load_in_4bit": load_in_4bit}
    images, pipe_over = adopt(adapter, {"max_visual_tokens": None, "max_pixels": None, **chosen}, {}, explicit=chosen)
    if max_new_tokens:
        pipe_over["verify_max_new_tokens"] = max_new_tokens
    pipe_cfg = pipeline_from_manifest(_manifest(data_dir), **pipe_over)
    cap = pipe_cfg.verify_max_new_tokens
    data_path, loaded, teacher = split_data(data_dir, split, data)
    table: dict[str, dict] = {}
    runs = {}
    # one loaded model for both runs: the base is the same engine with the adapter switched off
    engine = HFEngine(HFEngineConfig(model=model, adapter=str(adapter), max_batch_size=batch_size,
                                     max_new_tokens=cap, **images))
    scored = []
    try:
        for name, eng in ((("base", BaseOf(engine)),) if base else ()) + (("adapter", engine),):
            (out / name).mkdir(parents=True, exist_ok=True)
            (vpath := out / name / "verdicts.jsonl").unlink(missing_ok=True)
            score_file(AdaptRubric(eng, pipe_cfg), data_path, vpath, loaded=loaded, progress=progress)
            scored.append((name, vpath))
    finally:
        import torch

        engine.close()
        eng = None  # the loop's last engine: else `del engine` frees nothing
        del engine, eng
        if torch.cuda.is_available():  # hand the freed model's memory back to the GPU
            torch.cuda.empty_cache()
    for name, vpath in scored:
        m = run_eval(vpath, out / name, data_path, loaded)
        agr = agreement(vpath, teacher)
        runs[name] = {"verdicts": str(vpath), "predictions": agr["predictions"], "p_success": agr["p_success"]}
        o = m["overall"]
        for key, val in (("agreement_with_teacher", agr["agreement"]), ("p_mae_vs_teacher", agr["p_mae_vs_teacher"]),
                         ("ece_vs_teacher", agr["ece_vs_teacher"]), ("acc", o.get("acc")), ("f1", o.get("f1")),
                         ("acc_strict", o.get("acc_strict")), ("unparsed", o.get("unparsed")), ("n", o.get("n"))):
            table.setdefault(key, {})[name] = val
    result = {"split": split, "model": model, "adapter": str(adapter), "table": table, "runs": runs,
              "pipeline": pipe_cfg.__dict__, "images": images}
    (out / "comparison.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    md = ["| metric | base | adapter |", "|---|---|---|"] + [
        f"| {k} | {_fmt(v.get('base'))} | {_fmt(v.get('adapter'))} |" for k, v in table.items()]
    (out / "comparison.md").write_text(f"# {adapter.name} vs {model} on {split}\n\n" + "\n".join(md) + "\n")
    _update_card(adapter, table)
    return result


def _fmt(x) -> str:
    return f"{x:.3f}" if isinstance(x, float) else ("-" if x is None else str(x))


def _update_card(adapter: Path, table: dict) -> None:
    """Rewrite the adapter's model card with the evaluation table (when it came from `distill train`)."""
    tc, summ = adapter / "training_config.json", adapter / "train_summary.json"
    if not (tc.is_file() and summ.is_file()):
        return
    from .card import write_model_card
    from .config import TrainConfig

    try:
        cfg = TrainConfig(**json.loads(tc.read_text()))
    except (ValueError, TypeError):
        return  # data folder moved or an older config: leave the card as it is
    write_model_card(adapter, cfg, json.loads(summ.read_text()), evaluation=table)


def merge(model: str, adapter: str | Path, out: str | Path, dtype: str = "auto") -> Path:
    """Merge a LoRA adapter into its base model and save a checkpoint that loads with --model alone.
    An adapter trained on a 4-bit (or 8-bit) base (QLoRA: base_quantisation.json) learned its update
    against the quantised weights, not the original ones: the base is loaded quantised exactly as in
    training, dequantised, and the adapter merged into that (what the student was trained on); the
    result is saved unquantised in `dtype`. Says which it did on stderr and in the merged README."""
    from ..engine.loading import merge_adapter
    from .image_policy import read_quantisation

    out = Path(out)
    if not (Path(adapter) / "adapter_config.json").is_file():
        raise ValueError(f"{adapter}: no adapter_config.json (not a peft adapter folder)")
    quant = read_quantisation(adapter)
    base = None
    if quant.get("load_in_4bit") or quant.get("load_in_8bit"):
        from ..engine.loading import load_model

        bits = "4-bit (nf4)" if quant["load_in_4bit"] else "8-bit"
        base, _ = load_model(HFEngineConfig(model=model, dtype=dtype, attn_implementation="sdpa", **quant))
        base = base.dequantize()
        kept = next(p.dtype for p in base.parameters() if p.is_floating_point())
        note = (f"{adapter} was trained on a {bits} base: merged into {model} dequantised from the same {bits} "
                f"weights it was trained on (not the original weights), saved unquantised in {kept}")
    else:
        note = f"{adapter} merged into {model}"
    merge_adapter(model, adapter, out, dtype, base=base)
    card = Path(adapter) / "README.md"
    (out / "README.md").write_text(f"Merged checkpoint: `{model}` + adapter `{adapter}`.\n\n{note}.\n\n"
                                   + (card.read_text() if card.is_file() else ""))
    print(f"merge: {note}", file=sys.stderr)
    return out
