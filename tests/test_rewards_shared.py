"""One RewardModel per process for the RL adapters (shared_reward.py): built once from the environment,
replaced (and the old one closed) by configure."""
from adaptrubric_local import FakeEngine
from adaptrubric_local.rewards import shared as shared_reward


def test_built_once_from_the_environment_and_replaced_by_configure(monkeypatch, tmp_path):
    monkeypatch.setattr(shared_reward, "_SHARED", {"rm": None})
    cfg = tmp_path / "reward.yaml"
    cfg.write_text("reward: p_success\nmax_images: 6\n")
    monkeypatch.setenv(shared_reward.CONFIG_ENV, str(cfg))
    monkeypatch.setenv(shared_reward.URL_ENV, "http://127.0.0.1:9")
    rm = shared_reward.shared()
    assert rm is shared_reward.shared()  # once per process
    assert rm.config.reward == "p_success" and rm.pipeline_config.max_images == 6
    assert rm.config.service_url == "http://127.0.0.1:9" and rm.loads == 0  # a service client: nothing loaded
    closed = []
    monkeypatch.setattr(rm, "close", lambda: closed.append(True))
    new = shared_reward.configure(engine=FakeEngine(), router="rules")
    assert shared_reward.shared() is new and closed == [True]


def test_one_model_per_router_address_with_the_files_method_options(monkeypatch, tmp_path):
    monkeypatch.setattr(shared_reward, "_ROUTED", {})
    cfg = tmp_path / "reward.yaml"
    cfg.write_text("reward: p_success\nmax_images: 6\nmodel: Qwen/Qwen3-VL-8B-Instruct\n"
                   "service_url: http://127.0.0.1:9\n")
    monkeypatch.setenv(shared_reward.CONFIG_ENV, str(cfg))
    rm = shared_reward.for_router("10.0.0.7:8000")
    assert rm is shared_reward.for_router("http://10.0.0.7:8000") is shared_reward.for_router("http://10.0.0.7:8000/v1")
    assert rm.engine_options["openai_url"] == "http://10.0.0.7:8000/v1" and rm.loads == 0  # nothing built yet
    assert rm.config.service_url is None  # the router verl gave does the verifying
    assert rm.config.reward == "p_success" and rm.pipeline_config.max_images == 6
    assert rm.engine_options["model"] == "Qwen/Qwen3-VL-8B-Instruct"  # no served name given: the file's
    other = shared_reward.for_router("10.0.0.8:8000", served_name="/ckpt/verifier")
    assert other is not rm and other.engine_options["model"] == "/ckpt/verifier"  # as verl serves it
