"""One RewardModel per process for the RL adapters (shared_reward.py): built once from the environment,
replaced (and the old one closed) by configure."""
from adaptrubric_local import FakeEngine, shared_reward


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
