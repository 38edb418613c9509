"""One image policy from training to reward: an adapter records the visual-token budget, pixel cap and
screenshot budget it was trained with, and `score --adapter` / RewardModel adopt them unless told
otherwise (an explicit different value wins, with a warning)."""
import json

import pytest

from adaptrubric_local.distill.image_policy import adopt, read_policy, write_policy


@pytest.fixture(scope="module")
def student(tiny_model, tmp_path_factory):
    """A tiny student trained at a 64-token visual budget on data collected with 4 screenshots."""
    from adaptrubric_local.distill.collect import CollectConfig, collect, label_teacher, teacher_pipeline
    from adaptrubric_local.distill.config import TrainConfig
    from adaptrubric_local.distill.train import train
    from adaptrubric_local.formats import load_trajectories
    from adaptrubric_local.synth import synthesize

    root = tmp_path_factory.mktemp("policy")
    data = synthesize(root / "synth", n_tasks=2, candidates=2, size=(64, 128), visible_outcome=True)
    collect(data, root / "dist", label_teacher(load_trajectories(data).trajectories),
            teacher_pipeline("labels", max_images=4), CollectConfig(val_fraction=0.0), progress=False)
    out = root / "ckpt"
    train(TrainConfig(data=str(root / "dist"), model=str(tiny_model), out=str(out), target="verdict", epochs=1,
                      lora_r=4, lora_alpha=8, grad_accum=1, max_visual_tokens=64, progress=False,
                      dataloader_workers=0))
    return data, out


def _score(data, tiny_model, adapter, out, *flags):
    from adaptrubric_local.cli import main

    assert main(["score", str(data), "--model", str(tiny_model), "--adapter", str(adapter), "--out", str(out),
                 "--router", "rules", "--no-fine", "--verify-max-new-tokens", "4", "--quiet", *flags]) == 0
    return json.loads(out.with_suffix(".config.json").read_text())


def test_the_adapter_records_what_it_was_trained_to_see(student):
    _, adapter = student
    assert read_policy(adapter) == {"max_visual_tokens": 64, "max_pixels": None, "max_images": 4}


def test_score_adopts_the_adapters_budget_and_an_explicit_one_warns(student, tiny_model, tmp_path, capsys):
    data, adapter = student
    cfg = _score(data, tiny_model, adapter, tmp_path / "a.jsonl")
    assert cfg["max_visual_tokens"] == 64 and cfg["engine"]["max_visual_tokens"] == 64 and cfg["max_images"] == 4
    assert "warning" not in capsys.readouterr().err
    cfg = _score(data, tiny_model, adapter, tmp_path / "b.jsonl", "--max-visual-tokens", "128")
    err = capsys.readouterr().err
    assert cfg["max_visual_tokens"] == 128 and "max_visual_tokens=128 differs from the 64" in err
    cfg = _score(data, tiny_model, adapter, tmp_path / "c.jsonl", "--max-visual-tokens", "none", "--max-images", "10")
    err = capsys.readouterr().err
    assert cfg["max_visual_tokens"] is None and cfg["max_images"] == 10
    assert "max_visual_tokens=None differs" in err and "max_images=10 differs from the 4" in err


def test_reward_model_adopts_the_adapters_images(student, tiny_model, capsys):
    from adaptrubric_local import PipelineConfig, RewardModel

    _, adapter = student
    rules = PipelineConfig(router="rules", fine=False)
    rm = RewardModel(model=str(tiny_model), adapter=str(adapter), pipeline=rules)
    assert rm.engine_options["max_visual_tokens"] == 64 and rm.pipeline_config.max_images == 4
    rm = RewardModel(model=str(tiny_model), adapter=str(adapter), pipeline=rules, max_visual_tokens=256)
    assert rm.engine_options["max_visual_tokens"] == 256
    assert "max_visual_tokens=256 differs from the 64" in capsys.readouterr().err


def test_adopt_without_a_policy_changes_nothing(tmp_path):
    assert adopt(None, {"max_visual_tokens": 7}, {"max_images": 3}) == ({"max_visual_tokens": 7}, {"max_images": 3})
    assert adopt(tmp_path, {"a": 1}, {}) == ({"a": 1}, {})  # a folder trained before policies were recorded
    with pytest.raises(ValueError, match="unknown image policy"):
        write_policy(tmp_path, {"resolution": 3})
    (tmp_path / "image_policy.json").write_text("{nope")
    with pytest.raises(ValueError, match="image_policy.json: not valid JSON"):
        read_policy(tmp_path)
