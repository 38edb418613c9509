"""Which teacher to ask (engine/teacher.py): exactly one of a local model and an endpoint, the key from
the environment only, and a description for manifests that holds no key."""
import pytest

from adaptrubric_local.engine.teacher import TeacherConfig


def test_exactly_one_teacher_and_a_name_for_an_endpoint():
    with pytest.raises(ValueError, match="--teacher-name"):
        TeacherConfig(teacher_url="http://judge:8000/v1")
    for cfg in (TeacherConfig(), TeacherConfig(teacher_model="m", teacher_url="http://j/v1", teacher_name="n")):
        with pytest.raises(ValueError, match="exactly one teacher"):
            cfg.build()
    assert TeacherConfig().kind is None and TeacherConfig(teacher_model="m").kind == "model"


def test_the_description_holds_no_key_and_says_what_images_were_sent(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-written")
    cfg = TeacherConfig(teacher_url="http://judge:8000/v1", teacher_name="big", teacher_max_visual_tokens=6144)
    desc = cfg.describe()
    assert "sk-never-written" not in repr(desc) and "sk-never-written" not in repr(cfg)
    assert desc["images"] == {"resized": True, "max_visual_tokens": 6144, "max_pixels": None}
    assert TeacherConfig(teacher_url="http://j/v1", teacher_name="n").describe()["images"] == {"resized": False}
    engine = cfg.build(check=False)  # no server here: the endpoint check is tested below
    try:
        assert engine.client.api_key == "sk-never-written" and engine.config.max_visual_tokens == 6144
        assert "sk-never-written" not in repr(engine.config)
    finally:
        engine.close()


def test_an_unreachable_or_wrong_endpoint_is_refused_before_any_record_naming_the_url():
    from openai_stub import Running, Stub

    with pytest.raises(ValueError, match=r"teacher at http://127\.0\.0\.1:9/v1 did not answer") as err:
        TeacherConfig(teacher_url="http://127.0.0.1:9/v1", teacher_name="big").build()
    assert "\n" not in str(err.value)
    server = Running(Stub({}, served="judge-xl"))
    try:
        with pytest.raises(ValueError, match=r"does not serve 'big' \(it serves: judge-xl\)"):
            TeacherConfig(teacher_url=server.url, teacher_name="big").build()
        assert server.stub.calls == []  # only GET /models was sent
        TeacherConfig(teacher_url=server.url, teacher_name="judge-xl").build().close()
    finally:
        server.close()
