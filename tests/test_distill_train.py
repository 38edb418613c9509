"""Training a LoRA student on a collected folder: inputs built exactly as at scoring time, the
adapter folder and model card, --resume, two processes, evaluate and merge (tiny random model)."""
import json
from pathlib import Path

import pytest

from adaptrubric_local.distill import config as tc
from adaptrubric_local.distill import train as tl


def _cfg(dist, model, out, **kw):
    base = dict(data=str(dist), model=str(model), out=str(out), target="verdict", epochs=1, per_device_batch_size=2,
                grad_accum=1, lora_r=4, lora_alpha=8, logging_steps=1, progress=False, dataloader_workers=0)
    return tc.TrainConfig(**{**base, **kw})


def test_train_resume_evaluate_merge(tiny_model, dist, tmp_path):
    from adaptrubric_local.distill.evaluate import evaluate, merge
    from adaptrubric_local.engine.base import Request
    from adaptrubric_local.engine.hf import HFEngine, HFEngineConfig

    out = tmp_path / "ckpt"
    first = tl.train(_cfg(dist, tiny_model, out, dataloader_workers=2))  # screenshots decoded in worker processes
    for name in ("adapter_config.json", "adapter_model.safetensors", "training_config.json", "loss_log.jsonl",
                 "README.md"):
        assert (out / name).is_file(), name
    assert json.loads((out / "adapter_config.json").read_text())["base_model_name_or_path"] == str(tiny_model)
    saved = tc.TrainConfig(**json.loads((out / "training_config.json").read_text()))
    assert saved.target == "verdict" and saved.tasks == ("verify",)
    again = tl.train(_cfg(dist, tiny_model, out, epochs=2, resume=True))
    assert again["resumed"] and again["optimizer_steps"] == 2 * first["optimizer_steps"]
    assert any("eval_loss" in json.loads(x) for x in (out / "loss_log.jsonl").read_text().splitlines())

    res = evaluate(dist, str(tiny_model), out, tmp_path / "ev", max_new_tokens=8, progress=False)
    assert set(res["table"]["agreement_with_teacher"]) == {"base", "adapter"}
    assert (tmp_path / "ev" / "adapter" / "metrics.json").is_file() and (tmp_path / "ev" / "comparison.md").is_file()
    card = (out / "README.md").read_text()
    manifest = json.loads((dist / "manifest.json").read_text())
    for needle in (str(tiny_model), "labels", manifest["bank_sha"], "verdict", "agreement_with_teacher"):
        assert needle in card, needle

    merged = merge(str(tiny_model), out, tmp_path / "merged")
    rec = json.loads((dist / "val.jsonl").read_text().splitlines()[0])
    req = Request(prompt=rec["verify"]["prompt"], images=[str(dist / p) for p in rec["verify"]["images"]],
                  suffix=rec["verify"]["suffix"], max_new_tokens=6)
    with_adapter = HFEngine(HFEngineConfig(model=str(tiny_model), adapter=str(out), max_new_tokens=6))
    alone = HFEngine(HFEngineConfig(model=str(merged), max_new_tokens=6))
    base = HFEngine(HFEngineConfig(model=str(tiny_model), max_new_tokens=6))
    probs = [e.next_token_probs([req], ["SCORE: "])[0]["1"] for e in (with_adapter, alone, base)]
    assert probs[0] == pytest.approx(probs[1], abs=1e-4) and probs[0] != pytest.approx(probs[2], abs=1e-6)
    for e in (with_adapter, alone, base):
        e.close()


def test_two_processes_make_one_adapter(tiny_model, dist, tmp_path):
    """Two CPU ranks (gloo) train one adapter, started the way a user starts them: a real
    `accelerate launch` (`--cpu --num_processes 2` would silently start one; `--multi_gpu` with
    ACCELERATE_USE_CPU gives two CPU processes)."""
    import os
    import subprocess
    import sys
    from dataclasses import asdict

    import yaml

    out = tmp_path / "ddp"
    cfg = {k: v for k, v in asdict(_cfg(dist, tiny_model, out)).items() if k != "data"}
    cfg_file = tmp_path / "train.yaml"
    cfg_file.write_text(yaml.safe_dump(cfg))
    env = {**os.environ, "ACCELERATE_USE_CPU": "true",
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
           "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
           "-m", "adaptrubric_local.distill.train", str(dist), "--config", str(cfg_file)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    info = [json.loads(p.read_text()) for p in (out / "processes").glob("rank-*.json")]
    assert sorted(i["rank"] for i in info) == [0, 1]
    assert all(i["world_size"] == 2 and i["optimizer_steps"] >= 1 for i in info)
    assert len({i["pid"] for i in info}) == 2
    assert (out / "adapter_model.safetensors").is_file() and len(list(out.glob("adapter_model*"))) == 1
    assert json.loads((out / "train_summary.json").read_text())["world_size"] == 2


def test_a_worse_later_epoch_does_not_replace_the_best(tiny_model, dist, tmp_path):
    """Validation each epoch; the adapter kept is the best epoch's, not the last one's."""
    from safetensors.torch import load_file

    scripted = iter([0.5, 0.9, 0.6])  # the second epoch is the best, the third worse

    def metrics(_pred):
        return {"selection": next(scripted), "agreement": 0.0}

    out = tmp_path / "best"
    summary = tl.train(_cfg(dist, tiny_model, out, epochs=3, learning_rate=5e-3, save_total_limit=3),
                       metrics_fn=metrics)
    assert summary["best_epoch"] == 2 and summary["best_metric"] == 0.9
    assert [round(m["epoch"]) for m in summary["per_epoch"]] == [1, 2, 3]
    best = Path(summary["best_checkpoint"])
    kept = load_file(out / "adapter_model.safetensors")
    at_best = load_file(best / "adapter_model.safetensors")
    last = load_file(sorted((out / "trainer").glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))[-1]
                     / "adapter_model.safetensors")
    assert kept.keys() == at_best.keys()
    assert all(kept[k].equal(at_best[k]) for k in kept)
    assert not all(kept[k].equal(last[k]) for k in kept)  # the last epoch moved on; its weights were not kept
    assert "kept epoch | 2" in (out / "README.md").read_text()


def test_class_weights_balance_the_teachers_scores():
    from adaptrubric_local.distill.examples import Example

    exs = [Example(str(i), "verify", "p", [], "", "t", teacher_score=int(i < 1)) for i in range(4)]
    exs.append(Example("r", "route", "p", [], "", "CATEGORY: general"))
    tl.class_weights(exs, "balanced")
    assert [e.weight for e in exs] == [2.0, 2 / 3, 2 / 3, 2 / 3, 1.0]  # 1 positive, 3 negatives: equal totals
    tl.class_weights(exs[:1], "none")


