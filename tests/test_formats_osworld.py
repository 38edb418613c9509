"""The OSWorld loader (formats/osworld.py) on results laid out as OSWorld's run.py / lib_run_single.py write
them (tests/agent_runs.py cites the lines): instruction from the checkout's task JSON, screens after their
actions re-paired, a timed-out run, OpenCUA's file names, a Windows Agent Arena run, and detection."""
from pathlib import Path

import pytest
from agent_runs import osworld_checkout, osworld_run, osworld_runtime_log

from adaptrubric_local.formats import FORMATS, detect_format, load_trajectories, osworld
from adaptrubric_local.formats.runtime_log import instruction_from_runtime_log
from adaptrubric_local.formats.screens import FINAL_SCREEN
from adaptrubric_local.stages.context import select_context
from adaptrubric_local.stages.evidence import compile_evidence

ID = "bb5e4c0d-f964-439c-97b6-bdb9747de3f4"
ASK = "Can you make Bing the main search engine when I look stuff up on the internet?"


def _name(path):
    return Path(path).name if path else None


def test_a_run_with_every_field(tmp_path):
    osworld_checkout(tmp_path, "chrome", ID, ASK)
    run = osworld_run(tmp_path, "chrome", ID, step0=True, actions=[
        "pyautogui.click(960, 540)", "pyautogui.typewrite('bing.com')", "pyautogui.press('enter')", "DONE"],
        extra=[{"response": "I open the settings.", "natural_language_action": "Click Settings"},
               {"response": {"thought": "Now type the engine."}, "natural_language_action": "Type bing.com"},
               {"response": {"plan": ["x"]}}, {"response": ""}])
    assert detect_format(tmp_path / "results") == "osworld"
    assert detect_format(tmp_path) == "osworld"
    res = load_trajectories(tmp_path / "results")
    assert not res.errors and not res.warnings
    (t,) = res.trajectories
    assert (t.id, t.instruction, t.platform, t.task_id, t.label, t.answer) == (
        f"pyautogui/screenshot/gpt-4o/chrome/{ID}", ASK, "ubuntu", ID, 1, None)
    assert [(_name(s.screenshot), s.action_type, s.text) for s in t.steps] == [
        ("step_0.png", "tap", None), ("step_1_20250101@120000.png", "type", "bing.com"),
        ("step_2_20250101@120001.png", "key", None), ("step_3_20250101@120002.png", "done", None),
        ("step_4_20250101@120003.png", "observe", None)]
    assert t.steps[0].action == "Click Settings [pyautogui.click(960, 540)]"
    assert t.steps[-1].action == FINAL_SCREEN
    assert [s.thought for s in t.steps] == ["I open the settings.", "Now type the engine.", '{"plan": ["x"]}', None,
                                            None]
    assert run.is_dir() and FORMATS["osworld"].screens == "after"


def test_each_action_is_shown_with_the_screen_it_was_taken_on(tmp_path):
    """The verifier's evidence and context read step k's screenshot as the screen action k was taken on
    (paper §3: s_t before a_t); OSWorld saves step_k after action k, so step k's screen is step_{k-1}."""
    osworld_checkout(tmp_path, "os", ID, ASK)
    run = osworld_run(tmp_path, "os", ID, step0=True, actions=[
        "pyautogui.click(10, 10)", "pyautogui.typewrite('report.txt')", "pyautogui.hotkey('ctrl', 's')"])
    (t,) = load_trajectories(tmp_path).trajectories
    files = {s: str((run / s).resolve()) for s in ["step_0.png"] + [p.name for p in run.glob("step_[1-9]_*.png")]}
    typed = next(i for i, s in enumerate(t.steps) if s.action_type == "type")
    assert t.steps[typed].screenshot == files["step_1_20250101@120000.png"]  # the screen after the click
    trace = compile_evidence(t).action_trace.splitlines()
    assert trace[typed] == "Step 2: pyautogui.typewrite('report.txt')"
    # the next step's screen is the one the typing produced; the selector's first/final frames are the
    # initial screen and the screen the last action left
    assert _name(t.steps[typed + 1].screenshot) == "step_2_20250101@120001.png"
    sel = select_context(t, budget=3)
    assert [_name(p) for p in sel.paths(t)][::len(sel.indices) - 1] == ["step_0.png", "step_3_20250101@120002.png"]


def test_a_timed_out_run(tmp_path):
    osworld_checkout(tmp_path, "gimp", ID, ASK)
    osworld_run(tmp_path, "gimp", ID, actions=["pyautogui.click(1, 2)", "pyautogui.scroll(-3)"], timed_out=True)
    res = load_trajectories(tmp_path / "results")
    assert not res.errors
    (t,) = res.trajectories
    assert t.label is None  # it never reached the evaluator: not a failed task
    assert [_name(s.screenshot) for s in t.steps] == [None, "step_1_20250101@120000.png", "step_2_20250101@120001.png"]
    assert [s.action_type for s in t.steps] == ["tap", "scroll", "observe"]
    (w,) = res.warnings
    assert "Time limit exceeded in gimp/" in w and "label is left empty (not 0)" in w


def test_opencua_runner_file_names(tmp_path):
    osworld_checkout(tmp_path, "vlc", ID, ASK)
    osworld_run(tmp_path, "vlc", ID, actions=["pyautogui.click(1, 2)", "pyautogui.write('x')"], opencua=True,
                extra=[{"natural_language_action": "Click Play", "response": "## Thought\nplay it"}, {}])
    res = load_trajectories(tmp_path)
    assert not res.errors
    (t,) = res.trajectories
    assert [_name(s.screenshot) for s in t.steps] == ["step_0.png", "step_1.png", "step_2.png"]
    assert (t.steps[0].action, t.steps[0].thought, t.steps[1].text) == (
        "Click Play [pyautogui.click(1, 2)]", "## Thought\nplay it", "x")
    (w,) = res.warnings  # one per run
    assert "step_num 1 names step_1_20250101@120000.png, which does not exist; read step_1.png" in w


def test_a_windows_agent_arena_run(tmp_path):
    """The same layout with Windows tasks: the platform comes from where the task JSON lies / what it says."""
    osworld_checkout(tmp_path, "msedge", ID, ASK, task_dir="evaluation_examples_windows")
    osworld_run(tmp_path, "msedge", ID, actions=["pyautogui.click(1, 2)"], result="0.0")
    (t,) = load_trajectories(tmp_path / "results").trajectories
    assert (t.platform, t.label, t.instruction) == ("windows", 0, ASK)
    other = tmp_path / "other"
    osworld_checkout(other, "excel", "x1", "Export the sheet.", config=[
        {"type": "open", "parameters": {"path": "c:\\users\\me\\a.xlsx"}}])
    osworld_run(other, "excel", "x1", actions=["pyautogui.click(1, 2)"])
    assert load_trajectories(other).trajectories[0].platform == "windows"
    osworld_checkout(other, "os", "x2", "Say hi.", platform="macos")
    osworld_run(other, "os", "x2", actions=["pyautogui.click(1, 2)"])
    got = {t.task_id: t.platform for t in load_trajectories(other).trajectories}
    assert got == {"x1": "windows", "x2": "macos"}
    forced = load_trajectories(other, options={"platform": "ubuntu"}).trajectories
    assert {t.platform for t in forced} == {"ubuntu"}


def test_tasks_from_elsewhere_and_errors(tmp_path):
    osworld_run(tmp_path / "copy", "chrome", ID, actions=["pyautogui.click(1, 2)"])
    osworld_run(tmp_path / "copy", "chrome", "no-task", actions=["pyautogui.click(1, 2)"])
    res = load_trajectories(tmp_path / "copy" / "results")
    assert not res.trajectories and len(res.errors) == 2
    assert "none was found above" in str(res.errors[0]) and res.errors[0].field == "instruction"
    examples = osworld_checkout(tmp_path / "osworld", "chrome", ID, ASK).parents[1]
    res = load_trajectories(tmp_path / "copy" / "results", options={"examples": examples})
    assert [t.instruction for t in res.trajectories] == [ASK]
    (err,) = res.errors
    assert err.record_id.endswith("chrome/no-task") and "no task JSON no-task.json" in err.problem
    with pytest.raises(ValueError, match="format 'osworld' takes no option 'png_dir'; its options: examples, "
                                         "platform"):
        load_trajectories(tmp_path / "copy" / "results", fmt="osworld", options={"png_dir": "x"})


def test_a_task_under_another_domain_folder_is_found_by_id(tmp_path):
    osworld_checkout(tmp_path, "Windows/excel", ID, ASK)  # pkueecszc/OSWorld keeps examples/Windows/{app}/
    osworld_run(tmp_path, "excel", ID, actions=["pyautogui.click(1, 2)"])
    (t,) = load_trajectories(tmp_path).trajectories
    assert (t.instruction, t.platform) == (ASK, "windows")


def test_bad_result_and_rows(tmp_path):
    osworld_checkout(tmp_path, "os", ID, ASK)
    run = osworld_run(tmp_path, "os", ID, actions=["pyautogui.click(1, 2)"], result="oops")
    (err,) = osworld.load(tmp_path).errors
    assert (Path(err.file).name, err.field) == ("result.txt", "result.txt")
    (run / "result.txt").write_text("0.4\n")
    with open(run / "traj.jsonl", "a") as fh:
        fh.write("[1, 2]\n")
    (err,) = osworld.load(run).errors
    assert (err.field, err.record_id) == ("line 2", ID)


def test_a_copied_run_without_its_checkout(tmp_path):
    """A run copied out of its checkout, as OSReward's committed samples are (raw/windows/<agent>-sample/
    {domain}/{id}/): an agent that writes the instruction in its rows gives it; the folders name Windows;
    a response dict's `reasoning_content` is the thought."""
    root = tmp_path / "raw" / "windows" / "agent-sample"
    run = osworld_run(root, "chrome", "t-wos", actions=["pyautogui.click(1, 2)"], result=None, extra=[
        {"instruction": "Add the soundtrack to my cart.",
         "response": {"content": "## Action: click", "reasoning_content": "The search box is at the top."}}])
    res = load_trajectories(tmp_path / "raw" / "windows")
    assert not res.errors
    (t,) = res.trajectories
    assert (t.instruction, t.platform, t.label, t.steps[0].thought) == (
        "Add the soundtrack to my cart.", "windows", None, "The search box is at the top.")
    assert load_trajectories(run).trajectories[0].platform == "ubuntu"  # nothing below the folder given says so


def test_the_instruction_from_runtime_log_of_a_run_without_its_checkout(tmp_path):
    """OSReward's committed OSWorld samples (raw/osworld/kimi-sample/{domain}/{id}/): traj.jsonl, the
    screenshots and runtime.log, no task JSON and no instruction in the rows: the runtime.log the run's
    logger wrote gives it (the first block; the agent logs it again with every prediction)."""
    root = tmp_path / "raw" / "osworld" / "kimi-sample"
    run = osworld_run(root, "chrome", ID, actions=["pyautogui.click(1, 2)", "DONE"], result=None)
    osworld_runtime_log(run, ID, ASK + "\nKeep my other settings.", ["{'role': 'assistant'}", "DONE"])
    assert detect_format(tmp_path / "raw" / "osworld") == "osworld"
    res = load_trajectories(tmp_path / "raw" / "osworld")
    assert not res.errors
    (t,) = res.trajectories
    assert (t.instruction, t.platform, t.label, t.task_id) == (ASK + "\nKeep my other settings.", "ubuntu", None, ID)
    assert [s.action_type for s in t.steps] == ["tap", "done", "observe"]
    # a checkout that does not hold the task: the log still gives it; one that does wins over the log
    osworld_checkout(tmp_path, "os", "another-task", "Something else.")
    assert load_trajectories(tmp_path / "raw").trajectories[0].instruction.startswith(ASK)
    osworld_checkout(tmp_path, "chrome", ID, "From the task JSON.")
    assert load_trajectories(tmp_path / "raw").trajectories[0].instruction == "From the task JSON."


def test_runtime_log_forms(tmp_path):
    assert instruction_from_runtime_log(tmp_path) is None  # no runtime.log
    (tmp_path / "runtime.log").write_text("Instruction: Open the file.\nStep 1: click\n")
    assert instruction_from_runtime_log(tmp_path) == "Open the file."
    (tmp_path / "runtime.log").write_text("Reward: 0.00\nDone: False\n")
    assert instruction_from_runtime_log(tmp_path) is None
    osworld_run(tmp_path / "x", "chrome", ID, actions=["pyautogui.click(1, 2)"], result=None)
    (err,) = load_trajectories(tmp_path / "x" / "results").errors
    assert err.field == "instruction" and "no runtime.log holds an 'Instruction:' block" in err.problem
