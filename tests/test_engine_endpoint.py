"""engine/endpoint.py: the one description of a server that the verifier on a server, a teacher, a judge
and the OpenAI engine share; its checks name the flag or key of the config the user wrote."""
import pytest

from adaptrubric_local.cascade.config import CascadeConfig
from adaptrubric_local.engine.endpoint import Endpoint, api_key_from_env
from adaptrubric_local.engine.openai_engine import OpenAIEngineConfig
from adaptrubric_local.engine.remote import RemoteConfig
from adaptrubric_local.engine.teacher import TeacherConfig


def test_each_config_makes_the_same_endpoint_from_its_own_fields():
    url = "http://127.0.0.1:9/v1"
    expected = Endpoint(url, "judge", "MY_KEY", 12.0, 1, 4)
    assert RemoteConfig(openai_url=url, openai_api_key_env="MY_KEY", openai_timeout=12.0, openai_max_retries=1,
                        openai_concurrency=4).endpoint("judge") == expected
    assert TeacherConfig(teacher_url=url, teacher_name="judge", api_key_env="MY_KEY", timeout=12.0, max_retries=1,
                         concurrency=4).endpoint() == expected
    judge = CascadeConfig(judge_url=url, judge_name="judge", judge_api_key_env="MY_KEY", judge_timeout=12.0,
                          judge_max_retries=1, judge_concurrency=4)
    assert judge.endpoint() == expected and judge.teacher(64).endpoint() == expected


@pytest.mark.parametrize("make, said", [
    (lambda: RemoteConfig(openai_url="host:8000"), "openai_url must start with http:// or https://"),
    (lambda: RemoteConfig(openai_concurrency=0), "openai_concurrency must be >= 1, openai_timeout > 0"),
    (lambda: TeacherConfig(teacher_url="http://h/v1", teacher_name="n", timeout=0), "--concurrency must be >= 1, "
                                                                                    "--timeout > 0"),
    (lambda: CascadeConfig(judge_url="http://h/v1", judge_name="n", judge_max_retries=-1),
     "--judge-max-retries >= 0, got 8, 300.0, -1"),
    (lambda: CascadeConfig(judge_api_key_env=""), "--judge-api-key-env must name an environment variable"),
])
def test_a_bad_field_is_named_as_its_config_names_it(make, said):
    with pytest.raises(ValueError, match=said.replace("(", r"\(").replace(".", r"\.")):
        make()


def test_the_settings_record_holds_the_variable_never_the_key(monkeypatch):
    monkeypatch.setenv("MY_KEY", "s3cret")
    cfg = OpenAIEngineConfig(endpoint=Endpoint("http://h/v1", "m", "MY_KEY"), max_new_tokens=64)
    record = cfg.settings()
    assert list(record)[:6] == ["base_url", "model", "api_key_env", "timeout", "max_retries", "concurrency"]
    assert record["api_key_env"] == "MY_KEY" and "s3cret" not in repr(record) and "endpoint" not in record
    assert api_key_from_env("MY_KEY") == "s3cret" and api_key_from_env("UNSET_VARIABLE_HERE") == "EMPTY"
