"""A reward model's options (reward_config.py): one flat mapping split into the reward, pipeline and engine
configs, an unknown key an error naming the file, and the engine's default model."""
import json

import pytest

from adaptrubric_local.engine.hf_config import DEFAULT_MODEL
from adaptrubric_local.rewards.config import RewardConfig, split_options
from adaptrubric_local.rewards.model import RewardModel


def test_config_file_covers_every_option(tmp_path):
    cfg = tmp_path / "reward.yaml"
    cfg.write_text("model: /nowhere/model\nload_in_4bit: true\nmax_batch_size: 4\nrouter: model\nmax_images: 6\n"
                   "reward: p_success\nunparsed_reward: -1\ndata_root: /data\nimage_roots: [/imgs]\n"
                   "service_url: null\n")
    rm = RewardModel.from_config(cfg, max_images=5)
    assert rm.engine_options["model"] == "/nowhere/model" and rm.engine_options["load_in_4bit"] is True
    assert rm.engine_options["max_batch_size"] == 4
    assert rm.pipeline_config.router == "model" and rm.pipeline_config.max_images == 5
    assert rm.config.reward == "p_success" and rm.config.unparsed_reward == -1.0 and rm.config.image_roots == ["/imgs"]
    (tmp_path / "bad.json").write_text(json.dumps({"modle": "x"}))
    with pytest.raises(ValueError, match=r"bad.json: unknown option 'modle'"):
        RewardModel.from_config(tmp_path / "bad.json")
    assert RewardModel().engine_options["model"] == DEFAULT_MODEL == "Qwen/Qwen3-VL-4B-Instruct"
    r, p, e = split_options({"votes": 3, "fine": False, "reward": "binary"})
    assert (r, p, e) == ({"reward": "binary"}, {"fine": False}, {"votes": 3})


def test_reward_config_validates():
    assert RewardConfig(reward="soft").reward == "p_success"
    assert RewardConfig(image_roots="/one").image_roots == ["/one"]
    for bad in ({"reward": "log"}, {"max_batch_trajectories": 0}, {"max_pending": 0}, {"max_image_pixels": 0}):
        with pytest.raises(ValueError):
            RewardConfig(**bad)
