"""Judge a distilled student: the base model and the adapter score the held-out split through the
normal scoring path (the pipeline settings the teacher ran with, the adapter's visual-token
budget), then the eval harness writes each one's metrics, report and plots, and a side-by-side
table gives agreement with the teacher and accuracy/F1 against labels. Also `merge`, which folds an
adapter into its base model. Knows nothing about argument parsing.
"""
from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path
from typing import Optional

from ..formats import LoadResult, load_trajectories
from ..pipeline import AdaptRubric, PipelineConfig


def _manifest(data_dir: Path) -> dict:
    path = data_dir / "manifest.json"
    if not path.is_file():
        raise ValueError(f"{path} not found (is {data_dir} a folder written by `adaptrubric distill collect`?)")
    return json.loads(path.read_text())


def pipeline_from_manifest(manifest: dict, **overrides) -> PipelineConfig:
    """The pipeline settings the teacher ran with."""
    known = {f.name for f in fields(PipelineConfig)}
    return PipelineConfig(**{**{k: v for k, v in manifest.get("pipeline", {}).items() if k in known}, **overrides})


def split_data(data_dir: Path, split: str, data: Optional[str] = None) -> tuple[str, LoadResult, dict[str, int]]:
    """The split's trajectories from the collected data set: (data path, the split's trajectories,
    the teacher's score per trajectory id)."""
    from .collect import read_split

    records = read_split(data_dir, split)
    teacher = {r["id"]: r["verify"]["verdict"]["score"] for r in records}
    src = data or _manifest(data_dir).get("data")
    if not src or not Path(src).exists():
        raise ValueError(f"the collected data set {src!r} is not there; pass --data with its new location")
    loaded = load_trajectories(src)
    trajs = [t for t in loaded.trajectories if t.id in teacher]
    if len(trajs) != len(teacher):
        raise ValueError(f"{src}: {len(teacher) - len(trajs)} trajectory(ies) of {split}.jsonl are missing")
    return src, LoadResult(trajectories=trajs), teacher


def agreement(verdicts_path: Path, teacher: dict[str, int]) -> dict:
    """Fraction of trajectories where the student's parsed score equals the teacher's (unparsed and
    errors count as disagreement)."""
    from ..evaluation.harness import load_verdicts

    vs = {str(v.id): v for v in load_verdicts(verdicts_path)}
    same = sum(1 for i, s in teacher.items() if vs.get(i) is not None and vs[i].status == "ok" and vs[i].score == s)
    return {"agreement": same / len(teacher) if teacher else None, "n": len(teacher),
            "predictions": {i: (vs[i].score if i in vs else None) for i in teacher}}


def score_split(data_path: str, loaded: LoadResult, model: str, adapter: Optional[str], out: Path,
                pipe_cfg: PipelineConfig, max_visual_tokens: Optional[int], batch_size: int, max_new_tokens: int,
                progress: bool) -> Path:
    """Score the split with the transformers engine (base or base+adapter) into out/verdicts.jsonl."""
    from ..engine.hf import HFEngine, HFEngineConfig
    from ..scoring import score_file

    out.mkdir(parents=True, exist_ok=True)
    vpath = out / "verdicts.jsonl"
    if vpath.exists():
        vpath.unlink()
    engine = HFEngine(HFEngineConfig(model=model, adapter=adapter, max_visual_tokens=max_visual_tokens,
                                     max_batch_size=batch_size, max_new_tokens=max_new_tokens))
    try:
        score_file(AdaptRubric(engine, pipe_cfg), data_path, vpath, loaded=loaded, progress=progress)
    finally:
        engine.close()
    return vpath


def evaluate(data_dir: str | Path, model: str, adapter: str | Path, out: str | Path, split: str = "val",
             batch_size: int = 8, max_new_tokens: Optional[int] = None, data: Optional[str] = None,
             progress: bool = True, base: bool = True) -> dict:
    """Base vs adapter on one split; writes out/{base,adapter}/ (verdicts, metrics, report, plots),
    out/comparison.json and out/comparison.md, and adds the numbers to the adapter's model card."""
    from ..evaluation.harness import run_eval

    data_dir, out, adapter = Path(data_dir), Path(out), Path(adapter)
    out.mkdir(parents=True, exist_ok=True)
    tc_path = adapter / "training_config.json"
    tcfg = json.loads(tc_path.read_text()) if tc_path.is_file() else {}
    visual = tcfg.get("max_visual_tokens", 6144)
    pipe_cfg = pipeline_from_manifest(_manifest(data_dir))
    cap = max_new_tokens or pipe_cfg.verify_max_new_tokens
    pipe_cfg = pipeline_from_manifest(_manifest(data_dir), verify_max_new_tokens=cap)
    data_path, loaded, teacher = split_data(data_dir, split, data)
    table: dict[str, dict] = {}
    runs = {}
    for name, ad in ((("base", None),) if base else ()) + (("adapter", str(adapter)),):
        vpath = score_split(data_path, loaded, model, ad, out / name, pipe_cfg, visual, batch_size, cap, progress)
        m = run_eval(vpath, out / name, data_path, loaded)
        agr = agreement(vpath, teacher)
        runs[name] = {"verdicts": str(vpath), "predictions": agr["predictions"]}
        o = m["overall"]
        for key, val in (("agreement_with_teacher", agr["agreement"]), ("acc", o.get("acc")), ("f1", o.get("f1")),
                         ("acc_strict", o.get("acc_strict")), ("unparsed", o.get("unparsed")), ("n", o.get("n"))):
            table.setdefault(key, {})[name] = val
    result = {"split": split, "model": model, "adapter": str(adapter), "table": table, "runs": runs,
              "pipeline": pipe_cfg.__dict__, "max_visual_tokens": visual}
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
    try:
        from . import import_training

        tl = import_training()
        TrainConfig, write_model_card = tl.TrainConfig, tl.write_model_card
        cfg = TrainConfig(**json.loads(tc.read_text()))
    except (ImportError, ValueError, TypeError):
        return  # data folder moved or an older config: leave the card as it is
    write_model_card(adapter, cfg, json.loads(summ.read_text()), evaluation=table)


def merge(model: str, adapter: str | Path, out: str | Path, dtype: str = "auto") -> Path:
    """Merge a LoRA adapter into its base model and save a checkpoint that loads with --model alone."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForImageTextToText, AutoProcessor

    out = Path(out)
    if not (Path(adapter) / "adapter_config.json").is_file():
        raise ValueError(f"{adapter}: no adapter_config.json (not a peft adapter folder)")
    torch_dtype = {"auto": "auto", "bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dtype]
    base = AutoModelForImageTextToText.from_pretrained(model, dtype=torch_dtype, use_safetensors=True)
    merged = PeftModel.from_pretrained(base, str(adapter)).merge_and_unload()
    merged.save_pretrained(out, safe_serialization=True)
    AutoProcessor.from_pretrained(model).save_pretrained(out)
    card = Path(adapter) / "README.md"
    (out / "README.md").write_text(f"Merged checkpoint: `{model}` + adapter `{adapter}`.\n\n"
                                   + (card.read_text() if card.is_file() else ""))
    return out
