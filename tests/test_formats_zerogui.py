"""The ZeroGUI loader (formats/zerogui.py) on task folders laid out as ZeroGUI's vllm_agent_engine.py writes
them (tests/agent_runs.py cites the lines): the answer from `finished(content=...)` in output_text, the
thought and action type from the reply's parts, result.txt -1, AndroidLab tasks, and detection."""
from pathlib import Path

from agent_runs import uitars_code, zerogui_run

from adaptrubric_local.formats import FORMATS, detect_format, load_trajectories, zerogui
from adaptrubric_local.formats.screens import FINAL_SCREEN
from adaptrubric_local.stages.evidence import compile_evidence

ASK = "How many rows does the sheet have? Answer with the number."
OSWORLD_TASK = {"id": "ex-3", "snapshot": "libreoffice_calc", "instruction": ASK, "config": [], "evaluator": {}}
REPLIES = [
    ("Thought: The sheet is open; I should scroll down later, but first click cell A1.\n"
     "Action: click(start_box='(100,200)')",
     [uitars_code("The sheet is open; I should scroll down later, but first click cell A1.",
                  "pyautogui.click(100.0, 200.0, button='left')")]),
    ("Thought: Type the formula.\nAction: type(content='=ROWS(A:A)\\n')",
     [uitars_code("Type the formula.", "pyautogui.write('=ROWS(A:A)')\npyautogui.press('enter')")]),
    ("Thought: It shows 3.\nAction: finished(content='3')", ["DONE"]),
]


def _name(path):
    return Path(path).name if path else None


def test_a_task_folder_with_every_field(tmp_path):
    run = zerogui_run(tmp_path / "eval", "ex-3", REPLIES, OSWORLD_TASK)
    assert detect_format(tmp_path / "eval") == "zerogui" and FORMATS["zerogui"].screens == "after"
    res = load_trajectories(tmp_path / "eval")
    assert not res.errors and not res.warnings
    (t,) = res.trajectories
    assert (t.id, t.instruction, t.platform, t.task_id, t.label, t.answer) == (
        run.name, ASK, "ubuntu", "ex-3", 1, "3")
    assert [(_name(s.screenshot), s.action_type, s.text) for s in t.steps] == [
        ("step_0.png", "tap", None), ("step_1.png", "type", "=ROWS(A:A)\n"), ("step_2.png", "answer", None),
        ("step_3.png", "observe", None)]
    assert [s.action for s in t.steps] == ["click(start_box='(100,200)')", "type(content='=ROWS(A:A)\\n')",
                                           "finished(content='3')", FINAL_SCREEN]
    assert [s.thought for s in t.steps] == [
        "The sheet is open; I should scroll down later, but first click cell A1.", "Type the formula.",
        "It shows 3.", None]
    ev = compile_evidence(t)
    assert ev.agent_answer == '"3"' and ev.typed_texts == '"=ROWS(A:A)"'


def test_minus_one_is_not_a_failure(tmp_path):
    zerogui_run(tmp_path / "eval", "ex-3", REPLIES[:1], OSWORLD_TASK, result="-1")
    zerogui_run(tmp_path / "eval", "ex-4", REPLIES[:1], {**OSWORLD_TASK, "id": "ex-4"}, result="0.0")
    res = zerogui.load(tmp_path / "eval")
    assert not res.errors
    assert {t.task_id: t.label for t in res.trajectories} == {"ex-3": None, "ex-4": 0}
    (w,) = res.warnings
    assert "-1 (ZeroGUI writes -1 when a step or the evaluation failed): label left empty, not 0" in w


def test_several_actions_of_one_reply_are_one_step(tmp_path):
    reply = ("Thought: Select all and copy.\nAction: hotkey(key='ctrl a')\n\nhotkey(key='ctrl c')",
             [uitars_code("Select all and copy.", "pyautogui.hotkey('ctrl', 'a')"), "pyautogui.hotkey('ctrl', 'c')"])
    zerogui_run(tmp_path, "ex-5", [reply], {**OSWORLD_TASK, "id": "ex-5"})
    (t,) = zerogui.load(tmp_path).trajectories
    assert [(_name(s.screenshot), s.action_type) for s in t.steps] == [("step_0.png", "hotkey"),
                                                                      ("step_1.png", "observe")]


def test_an_androidlab_task(tmp_path):
    task = {"task_id": "calendar_1", "instruction": "Add an event named Lunch tomorrow."}
    zerogui_run(tmp_path, "calendar_1", [("Thought: Done.\nAction: press_home()", ["pyautogui.hotkey('home')"])],
                task)
    (t,) = zerogui.load(tmp_path).trajectories
    assert (t.platform, t.task_id, t.steps[0].action_type) == ("android", "calendar_1", "press_home")
    assert zerogui.load(tmp_path, platform="ubuntu").trajectories[0].platform == "ubuntu"


def test_a_task_whose_reset_failed_is_named(tmp_path):
    zerogui_run(tmp_path, "ex-3", REPLIES[:1], OSWORLD_TASK)
    failed = tmp_path / "20250102030405_ex-9"  # vllm_agent_engine.py L95-105: only result.txt
    failed.mkdir()
    (failed / "result.txt").write_text("Env reset failed.")
    res = zerogui.load(tmp_path)
    assert len(res.trajectories) == 1 and not res.errors
    assert res.warnings == [f"{failed / 'result.txt'}: 'Env reset failed.' and no traj.jsonl: the task never "
                            "ran; not loaded"]


def test_errors_keep_the_folder_id(tmp_path):
    bad = zerogui_run(tmp_path, "ex-6", REPLIES[:1], OSWORLD_TASK, result="Env reset failed.")
    none = zerogui_run(tmp_path, "ex-7", REPLIES[:1], OSWORLD_TASK)
    (none / "config.json").unlink()
    res = zerogui.load(tmp_path)
    assert sorted((e.record_id, e.field) for e in res.errors) == [(bad.name, "result.txt"),
                                                                 (none.name, "instruction")]


def test_the_verifier_prompt_pairs_actions_with_their_screens_and_holds_the_answer(tmp_path, capsys):
    """`prompt` (what `score` sends the verifier) on a ZeroGUI eval folder: the answer of
    `finished(content='3')` is the submitted answer, and step k's screenshot is the screen action k was
    taken on (ZeroGUI saves step_k after action k, so action 2 is shown with step_1.png)."""
    from adaptrubric_local.cli import main

    run = zerogui_run(tmp_path / "eval", "ex-3", REPLIES, OSWORLD_TASK)
    rc = main(["prompt", str(tmp_path / "eval"), "--id", run.name, "--router", "rules", "--no-fine"])
    out = capsys.readouterr().out
    assert rc == 0 and f"TASK: {ASK}" in out
    assert "- Agent's submitted answer: \"3\"" in out
    assert "Step 2: type(content='=ROWS(A:A)\\n')\nStep 3: finished(content='3')\n" in out
    shots = [line.split(": ", 1)[1].split("  (")[0] for line in out.splitlines() if line.startswith("  step ")]
    assert shots == [str((run / f"step_{k}.png").resolve()) for k in range(4)]
