"""The answering tiny model (distill/answering.py): built offline from the package's own distillation,
merged into one checkpoint that loads with --model alone. Here at the smallest size (seconds), for what
it writes and that it loads; that the full-size one answers every verifier prompt with a parsed verdict
and an unsaturated p_success is asserted where engines are compared on it (test_engine_vllm_engine.py)."""
import json

from adaptrubric_local.distill.answering import (
    AnsweringSettings,
    answering_data,
    answering_model,
    no_outcome_copies,
)
from adaptrubric_local.distill.collect import label_teacher
from adaptrubric_local.engine.base import Request


def test_the_unsure_teacher_is_right_and_as_sure_as_told(synth_set):
    from adaptrubric_local.formats import load_trajectories

    trajs = load_trajectories(synth_set).trajectories[:4]
    teacher = label_teacher(trajs, sure=0.8)
    outs = teacher.generate([Request(prompt="p", tag=t.id, watch=("0", "1")) for t in trajs])
    for t, o in zip(trajs, outs):
        assert o.text.startswith(f"SCORE: {t.label}\n")
        assert abs(o.token_probs[0].probs["1"] - (0.8 if t.label == 1 else 0.2)) < 1e-9


def test_no_outcome_copies_end_each_success_on_an_earlier_screen_labelled_0(tmp_path):
    from adaptrubric_local.formats import load_trajectories

    trajs = load_trajectories(answering_data(tmp_path / "d", AnsweringSettings(n_tasks=4, candidates=2,
                                                                                size=(64, 128)))).trajectories
    copies = no_outcome_copies(trajs, seed=0)
    ones = {t.id: t for t in trajs if t.label == 1}
    assert len(copies) == len(ones) == 4 and all(c.label == 0 for c in copies)
    kinds = set()
    for c in copies:
        o = ones[c.id.removesuffix("~no-outcome")]
        assert c.id.endswith("~no-outcome") and c.task_id == o.task_id and c.instruction == o.instruction
        assert c.answer == o.answer and len(c.steps) == len(o.steps)
        # the final screen is an earlier one of the same trajectory, never the outcome banner
        assert c.steps[-1].screenshot != o.steps[-1].screenshot
        assert c.steps[-1].screenshot in [s.screenshot for s in o.steps[:-1]]
        kinds.add(o.steps[-1].screenshot in [s.screenshot for s in c.steps])  # moved earlier, or replaced
    assert kinds == {True, False}  # both ways of ending elsewhere
    assert all(t.label == ones[t.id].label for t in trajs if t.id in ones)  # the originals are left as they were
    assert len({c.id for c in copies} | {t.id for t in trajs}) == len(copies) + len(trajs)


def test_a_small_answering_model_is_a_checkpoint_with_its_record(tmp_path):
    from adaptrubric_local.engine.hf import HFEngine, HFEngineConfig

    s = AnsweringSettings(n_tasks=2, candidates=2, epochs=1, size=(64, 128))
    out = answering_model(tmp_path / "m", s, work=tmp_path / "work", keep_adapter=True, log=lambda *_: None)
    rec = json.loads((out / "answering.json").read_text())
    assert rec["settings"]["n_tasks"] == 2 and rec["held_out"] >= 1 and "--router rules --no-fine" in rec["use"]
    # what it was trained on, how to draw data like it, and what it does on other data
    assert "synth --visible-outcome --size 64x128 --tasks 2 --candidates 2 --seed 0" in rec["trained_on"]
    assert "--visible-outcome --size 64x128" in rec["matching_data"] and "answering_data" in rec["matching_data"]
    assert "unparseable" in rec["elsewhere"] and "real screenshots" in rec["elsewhere"]
    assert "scores 0" in rec["elsewhere"] and "without the banner, labelled 0" in rec["trained_on"]
    train = [json.loads(x) for x in (tmp_path / "work" / "synth" / "train.jsonl").read_text().splitlines()]
    assert sum(r["id"].endswith("~no-outcome") for r in train) == 2 and len(train) == 6  # 2 x 2 and a copy per success
    assert rec["trained_on"] in (out / "README.md").read_text()
    assert (out / "adapter" / "adapter_config.json").is_file() and (out / "README.md").is_file()
    assert not (out / "adapter_config.json").exists()  # merged: loads with --model alone
    eng = HFEngine(HFEngineConfig(model=str(out), max_new_tokens=4))
    try:
        assert eng.generate([Request(prompt="hello")])[0].completion_tokens >= 1
    finally:
        eng.close()


def test_make_tiny_model_help_says_what_the_answering_model_was_trained_on_and_does_elsewhere(capsys):
    import pytest

    from adaptrubric_local.cli import main

    with pytest.raises(SystemExit):
        main(["make-tiny-model", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "synth --visible-outcome --size 96x192" in text and "12 x 4 synthetic trajectories" in text
    assert "real screenshots" in text and "unparseable verdicts" in text
