"""Verifier, the Python front door: score, stream, rewards, close and the context manager on the fake
engine and on the tiny model; an option the chosen engine does not read is an error naming what to use;
every argument of Verifier and RewardModel is typed, keyword-only and documented under Args:; every
public name is importable and documented, and importing the package loads no torch."""
import dataclasses
import inspect
import json
import pydoc
import re
import subprocess
import sys

import pytest

import adaptrubric_local
from adaptrubric_local import (
    FakeEngine,
    HFEngineConfig,
    PipelineConfig,
    RemoteConfig,
    RewardConfig,
    RewardModel,
    Verdict,
    Verifier,
    VLLMOptions,
    load_trajectories,
)
from adaptrubric_local.engine.options import readers
from adaptrubric_local.evaluation.calibration import Calibration
from adaptrubric_local.verifier import KEYWORDS, NAMED_OPTIONS

from conftest import canonical_record, write_jsonl

RULES = PipelineConfig(router="rules", fine=False, trajectories_per_batch=4)


@pytest.fixture
def trajs(synth_set):
    return load_trajectories(synth_set).trajectories[:10]


def scripted(ids_failing=()):
    """SCORE 1 unless the trajectory's id is in `ids_failing` (then an answer that does not parse)."""
    def script(req):
        if req.kind == "verify" and req.tag in ids_failing:
            return "I cannot tell."
        return "SCORE: 1\nEVIDENCE_SUFFICIENT: yes\nMISSING_EVIDENCE: none"
    return script


def args_section(doc: str) -> dict[str, str]:
    """The `Args:` entries of a Google-style docstring: name -> its text."""
    body = doc.split("Args:", 1)[1]
    entries, name = {}, None
    for line in body.splitlines()[1:]:
        m = re.match(r"^ {4}(\w+): (.+)$", line)
        if m:
            name = m.group(1)
            entries[name] = m.group(2)
        elif line.startswith(" " * 8) and name:
            entries[name] += " " + line.strip()
        elif line.strip():
            break
    return entries


# ---------------------------------------------------------------------- the fake engine
def test_score_stream_and_rewards_on_the_fake_engine(trajs):
    eng = FakeEngine(script=scripted({trajs[2].id}), p_score=lambda req, digit: 0.8 if digit == "1" else 0.2)
    with Verifier(engine=eng, pipeline=RULES) as v:
        verdicts = v.score(trajs)
        assert [x.id for x in verdicts] == [t.id for t in trajs]
        assert [x.status for x in verdicts].count("unparsed") == 1 and verdicts[2].status == "unparsed"
        rewards = v.rewards(verdicts)
        assert rewards[2] is None and set(rewards[:2] + rewards[3:]) == {1.0}  # never a silent 0 for unparsed
        assert v.rewards(verdicts, unparsed=0.0)[2] == 0.0
        assert v.rewards(verdicts, reward="p_success")[0] == pytest.approx(0.8)
        cal = Calibration(method="temperature", a=0.5)
        assert v.rewards(verdicts, reward="p_success", calibration=cal)[0] == pytest.approx(cal.apply(0.8))
        with pytest.raises(ValueError, match="reward must be"):
            v.rewards(verdicts, reward="score2")
        streamed = v.stream(iter(trajs))
        first = next(streamed)  # lazily: one batch of 4 is scored, not all 10
        assert first.id == trajs[0].id and sum(r.kind == "verify" for b in eng.batches for r in b) == 10 + 4
        assert [x.id for x in [first, *streamed]] == [t.id for t in trajs]
        assert v.stats["trajectories"] == 20
    assert v.closed
    with pytest.raises(RuntimeError, match="closed"):
        v.score(trajs)


def test_a_load_result_is_scored_with_its_unreadable_records_as_errors(tmp_path):
    good = canonical_record(tmp_path, "good", 3)
    path = write_jsonl(tmp_path / "d.jsonl", [good, {"id": "bad", "steps": []}])
    loaded = load_trajectories(path)
    assert len(loaded.trajectories) == 1 and len(loaded.errors) == 1
    with Verifier(engine=FakeEngine(), pipeline=RULES) as v:
        verdicts = v.score(loaded)
    assert [(x.id, x.status) for x in verdicts] == [("good", "ok"), ("bad", "error")]
    assert "d.jsonl" in verdicts[1].error and verdicts[1].model == "fake"


def test_an_option_the_engine_does_not_read_names_the_one_to_use():
    with pytest.raises(ValueError, match=r"max_batch_size is an option of engine='transformers', not read by "
                                         r"engine='vllm': use max_num_seqs"):
        Verifier("m", engine="vllm", max_batch_size=4)
    with pytest.raises(ValueError, match=r"max_num_seqs is an option of engine='vllm', not read by "
                                         r"engine='transformers': use max_batch_size"):
        Verifier("m", max_num_seqs=4)
    with pytest.raises(ValueError, match=r"max_batch_size is an option of .*, not read by engine='openai'"):
        Verifier("m", openai_url="http://127.0.0.1:9/v1", max_batch_size=4)
    with pytest.raises(ValueError, match="load_in_4bit is an option of engine='transformers', not read by "
                                         "engine='vllm'"):
        Verifier("m", engine="vllm", load_in_4bit=True)
    with pytest.raises(ValueError, match="engine_config is a VLLMOptions.*engine='vllm'"):
        Verifier("m", engine_config=VLLMOptions(max_num_seqs=8))
    with pytest.raises(ValueError, match="FakeEngine.*does not read dtype"):
        Verifier(engine=FakeEngine(), dtype="bf16")
    with pytest.raises(ValueError, match="engine must be one of"):
        Verifier("m", engine="tensorrt")
    with pytest.raises(ValueError, match="needs openai_url"):
        Verifier("m", engine="openai")
    with pytest.raises(ValueError, match="max_batch_size is an option of .*, not read by"):  # RewardModel: the same
        RewardModel("m", engine="vllm", max_batch_size=4)
    with pytest.raises(ValueError, match="max_batch_size is an option of .*, not read by"):  # and so does a reward.yaml
        RewardModel.from_options({"engine": "vllm", "max_batch_size": 4})


def test_options_reach_the_engine_and_the_config_object_fills_the_rest():
    rm = RewardModel("m", engine="vllm", max_num_seqs=8, engine_config=VLLMOptions(enforce_eager=True, max_num_seqs=2))
    assert rm.engine_options["max_num_seqs"] == 8 and rm.engine_options["enforce_eager"] is True  # named wins
    assert rm.engine_options["engine"] == "vllm" and rm.engine_options["model"] == "m"
    rm = RewardModel(max_batch_size=3, engine_config=HFEngineConfig(compile=True))
    assert rm.engine_options["max_batch_size"] == 3 and rm.engine_options["compile"] is True
    assert rm.engine_options["model"] == HFEngineConfig().model
    rm = RewardModel("served", engine_config=RemoteConfig(openai_url="http://127.0.0.1:9/v1", openai_concurrency=2))
    assert rm.engine_name == "openai" and rm.engine_options["openai_concurrency"] == 2


# ---------------------------------------------------------------------- the tiny model
def test_score_stream_rewards_and_close_on_the_tiny_model(tiny_model, synth_set):
    loaded = load_trajectories(synth_set)
    pipe = PipelineConfig(router="rules", fine=False, verify_max_new_tokens=8, trajectories_per_batch=2)
    with Verifier(str(tiny_model), pipeline=pipe, max_batch_size=2, max_visual_tokens=64) as v:
        engine = v.pipeline.engine
        assert engine.config.max_batch_size == 2 and engine.config.max_visual_tokens == 64
        verdicts = v.score(loaded.trajectories[:3])
        assert [x.id for x in verdicts] == [t.id for t in loaded.trajectories[:3]]
        assert all(x.status in ("ok", "unparsed") and x.model == str(tiny_model) for x in verdicts)
        assert all(x.n_images > 0 and x.prompt_tokens > 0 for x in verdicts)
        rewards = v.rewards(verdicts)
        assert [r is None for r in rewards] == [x.status != "ok" for x in verdicts]
        streamed = list(v.stream(iter(loaded.trajectories[:3])))
        assert [(x.id, x.raw) for x in streamed] == [(x.id, x.raw) for x in verdicts]  # greedy: the same answers
    assert v.pipeline.engine is None  # the model is let go


# ---------------------------------------------------------------------- the documented surface
@pytest.mark.parametrize("cls", [Verifier, RewardModel])
def test_every_argument_is_typed_keyword_only_and_documented(cls):
    params = list(inspect.signature(cls).parameters.values())
    assert params[0].name == "model" and params[0].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params[1:])
    assert all(p.annotation is not inspect.Parameter.empty for p in params)
    documented = args_section(inspect.getdoc(cls))
    assert list(documented) == [p.name for p in params]  # each once, in the signature's order
    for name, text in documented.items():
        assert len(text.split()) >= 4 and text.rstrip().endswith((".", ")")), (name, text)
    page = pydoc.render_doc(cls, renderer=pydoc.plaintext)  # what help() prints
    for p in params:
        assert re.search(rf"\b{p.name}: ", page), p.name


def keyword_drift(cls, table) -> list[str]:
    """Where `cls`'s signature or `Args:` entries differ from the one table of front-door keywords."""
    params = inspect.signature(cls).parameters
    doc = args_section(inspect.getdoc(cls))
    out = [] if [n for n in params if n in table] == list(table) else ["order or presence"]
    for name, (kind, sentence) in table.items():
        p = params.get(name)
        if p is None or (p.kind, p.annotation, p.default) != (inspect.Parameter.KEYWORD_ONLY, kind, None):
            out.append(f"{name}: signature")
        if doc.get(name) != sentence:
            out.append(f"{name}: docstring")
    return out


@pytest.mark.parametrize("cls", [Verifier, RewardModel])
def test_the_front_door_keywords_are_the_one_table(cls):
    assert keyword_drift(cls, KEYWORDS) == []
    assert set(NAMED_OPTIONS) == set(KEYWORDS) - {"openai_url"}
    drifted = dict(KEYWORDS, votes=("int | None", "Samples per call."),
                   max_pixels=("int", KEYWORDS["max_pixels"][1]))
    assert keyword_drift(cls, drifted) == ["max_pixels: signature", "votes: docstring"]


def test_a_keyword_s_sentence_names_the_one_engine_that_reads_it_as_the_table_does():
    for name, (_, sentence) in KEYWORDS.items():
        only = re.search(r"\((\w+) engine only", sentence)
        by = readers(name)
        assert (only and only.group(1)) == (by[0] if len(by) == 1 else None), (name, by)


def test_the_documented_defaults_are_the_engines():
    doc = args_section(inspect.getdoc(Verifier))
    for name, cls in (("max_batch_size", HFEngineConfig), ("votes", HFEngineConfig), ("device_map", HFEngineConfig),
                      ("max_num_seqs", VLLMOptions), ("gpu_memory_utilization", VLLMOptions)):
        default = {f.name: f.default for f in dataclasses.fields(cls)}[name]
        said = re.search(r"None: ([^,;. ]+(?:\.\d+)?)", doc[name]).group(1).strip('"')
        assert said == str(default), (name, said, default)
    sig = inspect.signature(RewardModel).parameters
    for f in dataclasses.fields(RewardConfig):  # RewardModel's own options default as RewardConfig does
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        assert (list(sig[f.name].default) if f.name == "image_roots" else sig[f.name].default) == default, f.name


def test_every_public_name_is_importable_and_documented():
    expected = {"Verifier", "RewardModel", "load_trajectories", "Trajectory", "Step", "Verdict", "PipelineConfig",
                "HFEngineConfig", "VLLMOptions", "RemoteConfig", "RewardConfig", "score_file", "run_eval", "evaluate",
                "load_verdicts"}
    assert expected <= set(adaptrubric_local.__all__)
    for name in adaptrubric_local.__all__:
        obj = getattr(adaptrubric_local, name)
        if callable(obj):
            assert (obj.__doc__ or "").strip(), name


def test_importing_the_package_loads_no_model_library():
    code = ("import sys, adaptrubric_local; from adaptrubric_local import Verifier, RewardModel; "
            "print([m for m in ('torch', 'transformers', 'vllm', 'peft', 'matplotlib') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out.replace("'", '"')) == []


def test_the_package_is_typed():
    from pathlib import Path

    assert (Path(adaptrubric_local.__file__).parent / "py.typed").is_file()


def test_verdict_built_by_the_pipeline_is_frozen(trajs):
    with Verifier(engine=FakeEngine(), pipeline=RULES) as v:
        verdict = v.score(trajs[:1])[0]
    assert isinstance(verdict, Verdict)
    with pytest.raises(dataclasses.FrozenInstanceError):
        verdict.score = 0
