"""The settings of a training run (distill/config.py): a config file overridden by the flags given, unknown
keys refused with the file's name, and the ready configs in training/."""
from pathlib import Path

import pytest

from adaptrubric_local.distill import config as tc
from adaptrubric_local.distill import train as tl


def _cfg(dist, model, out, **kw):
    return tc.TrainConfig(**{**dict(data=str(dist), model=str(model), out=str(out)), **kw})


def test_config_file_and_flags(dist, tmp_path):
    import argparse

    cfg_file = tmp_path / "cfg.yaml"
    cfg_file.write_text("model: some/model\nepochs: 2\nlora-r: 4\ntasks: verify,route\n")
    ap = argparse.ArgumentParser()
    tl.add_train_args(ap)
    cfg = tc.config_from_args(ap.parse_args([str(dist), "--config", str(cfg_file), "--out", "x", "--epochs", "5"]))
    assert (cfg.model, cfg.epochs, cfg.lora_r, cfg.tasks) == ("some/model", 5.0, 4, ("verify", "route"))
    cfg_file.write_text("model: m\nlearning_rat: 1\n")
    with pytest.raises(ValueError, match="learning_rat"):
        tc.config_from_args(ap.parse_args([str(dist), "--config", str(cfg_file), "--out", "x"]))
    with pytest.raises(ValueError, match="tasks"):
        _cfg(dist, "m", "x", tasks="verify,judge")


def test_training_folder_configs_are_valid(dist):
    """training/*.yaml are TrainConfig files (unknown keys would be refused) for the models they name."""
    import yaml

    root = Path(__file__).resolve().parents[1] / "training"
    configs = sorted(root.glob("qwen3vl-*.yaml"))
    assert [p.name for p in configs] == ["qwen3vl-4b-lora.yaml", "qwen3vl-4b-qlora.yaml", "qwen3vl-8b-lora.yaml",
                                         "qwen3vl-8b-qlora.yaml"]
    for p in configs:
        cfg = tc.TrainConfig(data=str(dist), out="x", **tc.load_config_file(p))
        assert cfg.model.startswith("Qwen/Qwen3-VL-") and cfg.load_in_4bit == ("qlora" in p.name)
    acc = yaml.safe_load((root / "accelerate-4gpu.yaml").read_text())
    assert acc["distributed_type"] == "MULTI_GPU" and acc["num_processes"] == 4


def test_a_ready_config_named_outside_the_checkout_says_where_it_lives(tmp_path, monkeypatch, capsys):
    from pathlib import Path

    from adaptrubric_local.cli import main

    assert (Path(__file__).resolve().parents[1] / "training" / "qwen3vl-4b-lora.yaml").is_file()  # in the checkout
    monkeypatch.chdir(tmp_path)  # as after `pip install`, anywhere else
    assert main(["distill", "plan", "runs/distill", "--config", "training/qwen3vl-4b-lora.yaml"]) == 2
    err = capsys.readouterr().err
    assert "--config training/qwen3vl-4b-lora.yaml: no such file" in err and "source checkout" in err
    assert main(["distill", "plan", "runs/distill", "--config", "mine.yaml"]) == 2
    err = capsys.readouterr().err
    assert "--config mine.yaml: no such file" in err and "source checkout" not in err
