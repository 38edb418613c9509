"""The adapter's model card (`README.md` in the adapter folder): base model, teacher, data counts,
what the student sees, how it was trained, its validation and evaluation numbers, and the exact
command that scores with it. Knows nothing about training itself.
"""
from __future__ import annotations

import json
from pathlib import Path

from .config import TrainConfig


def _f(x) -> str:
    return f"{x:.4g}" if isinstance(x, (int, float)) and x is not None else "-"


def write_model_card(out: Path, cfg: TrainConfig, summary: dict, evaluation: dict | None = None) -> None:
    """README.md: base model, teacher, data counts, metrics, bank hash, target, how to use it."""
    manifest_path = Path(cfg.data) / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
    teacher, counts, pipe = manifest.get("teacher", {}), manifest.get("counts", {}), manifest.get("pipeline", {})
    visual = ("native (the processor's own)" if cfg.max_visual_tokens is None
              else f"{cfg.max_visual_tokens} per trajectory")
    soft = summary.get("soft_label_examples", 0)
    lines = [
        "---", "library_name: peft", f"base_model: {cfg.model}", "tags: [adaptrubric, lora, gui-agent-verifier]", "---",
        "", f"# AdaptRubric verifier adapter: {Path(cfg.out).name}", "",
        f"A LoRA adapter{' (QLoRA, 4-bit base)' if cfg.load_in_4bit else ''} for `{cfg.model}` distilled from "
        f"the teacher `{teacher.get('name', '?')}` ({teacher.get('kind', '?')}) on AdaptRubric judgments.", "",
        "| | |", "|---|---|",
        f"| base model | `{cfg.model}` |",
        f"| teacher | `{teacher.get('name', '?')}` ({teacher.get('kind', '?')}); images sent: "
        f"{json.dumps(teacher.get('images', {}))} |",
        f"| target | `{cfg.target}` "
        f"({'visible reasoning + verdict lines' if cfg.target == 'full' else 'verdict lines only'}) |",
        f"| tasks | {', '.join(cfg.tasks)} |",
        f"| soft labels | {soft} example(s) with the teacher's P(SCORE=1) (KL weight {cfg.kd_weight}"
        f"{'' if cfg.soft_labels else ', off'}) |",
        f"| bank sha | `{manifest.get('bank_sha', '?')}` |",
        f"| prompts sha | `{manifest.get('prompts_sha', '?')}` |",
        f"| data | train {summary.get('train_examples')} examples ({counts.get('train', '?')} trajectories, "
        f"{counts.get('train_positive', '?')} positive), val {summary.get('val_examples')} examples "
        f"({counts.get('val', '?')} trajectories); teacher outputs left out: {counts.get('unparsed', 0)} unparsed, "
        f"{counts.get('truncated', 0)} truncated, {counts.get('disagree', 0)} disagreeing with labels |",
        f"| pipeline at collection | router `{pipe.get('router')}`, fine cues {pipe.get('fine')}, "
        f"max_images {pipe.get('max_images')} |",
        f"| images | visual tokens: {visual}; max_pixels {cfg.max_pixels or 'processor default'} "
        "(image_policy.json: `score --adapter` adopts these) |",
        f"| LoRA | r {cfg.lora_r}, alpha {cfg.lora_alpha}, dropout {cfg.lora_dropout}; vision tower "
        f"{'LoRA' if cfg.train_vision else 'frozen'} |",
        f"| training | {cfg.epochs} epochs, lr {cfg.learning_rate}, batch {cfg.per_device_batch_size} x accum "
        f"{cfg.grad_accum} x {summary.get('world_size', 1)} process(es), {summary.get('optimizer_steps')} steps, "
        f"{summary.get('seconds', 0):.0f} s |",
        f"| kept epoch | {_f(summary.get('best_epoch'))} by validation {summary.get('best_metric_name', '-')} "
        f"{_f(summary.get('best_metric'))} |",
        f"| train loss / val loss | {_f(summary.get('train_loss'))} / {_f(summary.get('eval_loss'))} |",
        "",
    ]
    if evaluation:
        lines += ["## Evaluation on held-out tasks", "", "| | base | adapter |", "|---|---|---|"]
        lines += [f"| {k} | {_f(row.get('base'))} | {_f(row.get('adapter'))} |" for k, row in evaluation.items()]
        lines.append("")
    # how to score with the adapter (the image settings come from the adapter folder itself)
    use = (f"adaptrubric score DATA --model {cfg.model} --adapter {cfg.out} --out verdicts.jsonl"
           + (" --router rules" if pipe.get("router") == "rules" else "")
           + (" --no-fine" if pipe.get("fine") is False else ""))
    lines += ["## Use", "", "```", use, "```", "",
              "The adapter's image settings (image_policy.json) are adopted by `score`, `serve` and `RewardModel`; "
              "score with the pipeline settings the teacher ran with (above) so the student sees the prompt layout it "
              "was trained on. Files: `training_config.json` (this run), `loss_log.jsonl`, `train_summary.json`.", ""]
    (out / "README.md").write_text("\n".join(lines))
