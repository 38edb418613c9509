"""Format detection (formats/__init__.py, formats/detect.py): the folder each project's user has is detected,
a folder no format detects names every format looked for and the nearest match, and a registered format
says whether its screenshots are taken before or after their actions."""
import json

import pytest
from agent_runs import androidworld_task, osworld_checkout, osworld_run, osworld_runtime_log, zerogui_run

from adaptrubric_local.formats import FORMATS, DataError, detect_format, register_format
from adaptrubric_local.formats.base import LoadResult
from adaptrubric_local.formats.detect import first_traj_row, nearest_format


def test_the_folders_users_have_are_detected(tmp_path):
    osworld_checkout(tmp_path / "OSWorld", "os", "t1", "Say hi.")
    osworld_run(tmp_path / "OSWorld", "os", "t1", actions=["pyautogui.click(1, 2)"])
    zerogui_run(tmp_path / "zg" / "eval_results", "t1", [("Action: wait()", ["WAIT"])], {"instruction": "Wait."})
    androidworld_task(tmp_path / "aw" / "run_20250101T000000000000", "T_0", "Go home.",
                      [{"action_type": "navigate_home"}], ["Home."])
    got = {p: detect_format(tmp_path / p) for p in ("OSWorld", "OSWorld/results", "zg/eval_results", "aw",
                                                      "aw/run_20250101T000000000000")}
    assert got == {"OSWorld": "osworld", "OSWorld/results": "osworld", "zg/eval_results": "zerogui",
                   "aw": "androidworld", "aw/run_20250101T000000000000": "androidworld"}
    assert first_traj_row(tmp_path / "nowhere") is None


def _osreward_androidworld(root):
    from test_formats_osreward import _aw

    (root / "results").mkdir(parents=True)
    (root / "results" / "aw-sample.jsonl").write_text(json.dumps(_aw(root, "ClockStopWatch", 1)) + "\n")


def _hf_dataset(root):
    pytest.importorskip("datasets")
    from test_formats_hf_dataset import build

    build(root, "disk")


def _build(project: str, root):
    """The folder a user of `project` has, made by the builders the format's own tests use (each cites its
    writer's code), under `root`; returns the folder a user would give."""
    if project == "osworld results/":
        osworld_checkout(root / "OSWorld", "os", "t1", "Say hi.")
        osworld_run(root / "OSWorld", "os", "t1", actions=["pyautogui.click(1, 2)"])
        return root / "OSWorld" / "results"
    if project == "osworld checkout":
        return _build("osworld results/", root).parent
    if project == "osreward osworld sample":
        run = osworld_run(root / "kimi-sample", "chrome", "t1", actions=["pyautogui.click(1, 2)"], result=None)
        osworld_runtime_log(run, "t1", "Say hi.", ["ok"])
        return root / "kimi-sample"
    if project == "zerogui eval folder":
        zerogui_run(root / "eval_results", "t1", [("Action: wait()", ["WAIT"])], {"instruction": "Wait."})
        return root / "eval_results"
    if project == "androidgen root":
        from test_formats_androidgen import _entry, _project

        return _project(root / "AndroidGen", ["111"], {"111": _entry("111", True)})
    if project == "androidworld run folder":
        androidworld_task(root / "run_20250101T000000000000", "T_0", "Go home.", [{"action_type": "navigate_home"}],
                          ["Home."])
        return root / "run_20250101T000000000000"
    if project == "clawgui-rl episode root":
        from test_formats_clawgui import CALLS, _evaluated, _rl_episode

        _rl_episode(root / "clawgui-rl" / "episode", "Contacts/Find Bob", "8f1c", CALLS, _evaluated(1.0))
        return root / "clawgui-rl" / "episode"
    if project == "clawgui phone-agent trace root":
        from test_formats_clawgui import AGENT_STEPS, _trace

        _trace(root / "traces", "ep1", AGENT_STEPS)
        return root / "traces"
    if project == "osreward trace folder":
        from test_formats_osreward import _trace

        _trace(root / "traces" / "a", "example_dark_mode_0")
        return root / "traces"
    if project == "osreward androidworld folder":
        _osreward_androidworld(root / "aw-sample")
        return root / "aw-sample"
    if project == "agentrewardbench trajectories/":
        from test_formats_agentrewardbench import write_arb

        write_arb(root / "trajectories")
        return root / "trajectories"
    if project == "online-mind2web folder":
        from test_formats_online_mind2web import human_labels, om2w_v1

        om2w_v1(root / "Online-Mind2Web")
        human_labels(root / "Online-Mind2Web")
        return root / "Online-Mind2Web" / "Browser_Use"
    _hf_dataset(root)
    return root / "bench"


USER_FOLDERS = {
    "osworld results/": "osworld", "osworld checkout": "osworld", "osreward osworld sample": "osworld",
    "zerogui eval folder": "zerogui", "androidgen root": "androidgen", "androidworld run folder": "androidworld",
    "clawgui-rl episode root": "clawgui", "clawgui phone-agent trace root": "clawgui-agent",
    "osreward trace folder": "osreward", "osreward androidworld folder": "osreward-androidworld",
    "agentrewardbench trajectories/": "agentrewardbench", "online-mind2web folder": "online-mind2web",
    "datasets save_to_disk folder": "hf-dataset",
}


@pytest.mark.parametrize("project", USER_FOLDERS)
def test_each_projects_user_folder_is_detected_and_loads(tmp_path, project):
    """Given the folder a user of each project has, detection names the project's format, and that folder
    loads with no error (so detection did not just match a file name)."""
    from adaptrubric_local.formats import load_trajectories

    folder = _build(project, tmp_path)
    assert detect_format(folder) == USER_FOLDERS[project]
    res = load_trajectories(folder)
    assert res.trajectories and not res.errors


def test_an_unreadable_folder_names_what_was_looked_for_and_the_nearest_match(tmp_path):
    run = tmp_path / "copied" / "chrome" / "t1"
    run.mkdir(parents=True)
    (run / "traj.json").write_text("[]")  # renamed by hand: no format reads it
    (run / "step_1_20250101@000000.png").write_bytes(b"")
    with pytest.raises(DataError) as ei:
        detect_format(tmp_path / "copied")
    msg = str(ei.value)
    assert "could not detect the format: looked for */record.jsonl or episodes/*/record.jsonl (AndroidGen), " in msg
    assert all(spec.shape in msg for spec in FORMATS.values())  # every format it looked for, by its shape
    assert msg.endswith("; nearest match: zerogui (traj.jsonl + config.json (ZeroGUI): found chrome/t1/traj.json, "
                        "but not the layout it reads)")
    (tmp_path / "pickles").mkdir()
    (tmp_path / "pickles" / "run.pkl").write_bytes(b"")
    assert nearest_format(tmp_path / "pickles", [("a", "*.jsonl (A)"), ("aw", "*.pkl.gz (AndroidWorld)")]) == (
        "; nearest match: aw (*.pkl.gz (AndroidWorld): found run.pkl, but not the layout it reads)")


def test_register_format_records_what_its_screens_show():
    assert {n: s.screens for n, s in FORMATS.items() if s.screens == "after"} == {"zerogui": "after",
                                                                                   "osworld": "after"}

    def load(path, check_images=True, image_roots=()):
        return LoadResult()

    try:
        register_format("mine", detect=lambda p: False, looked_for="x", shape="x (mine)", screens="after")(load)
        assert FORMATS["mine"].screens == "after"
        with pytest.raises(ValueError, match="screens must be one of before, after, got 'during'"):
            register_format("bad", detect=lambda p: False, looked_for="x", shape="x", screens="during")(load)
    finally:
        FORMATS.pop("mine", None)
    assert "bad" not in FORMATS


def test_loader_options_in_the_format_name(tmp_path):
    from adaptrubric_local.formats import load_trajectories, split_format
    from adaptrubric_local.formats.stream import stream_trajectories

    assert split_format("osworld,examples=/a/b,platform=windows") == (
        "osworld", {"examples": "/a/b", "platform": "windows"})
    assert split_format("auto") == ("auto", {})
    with pytest.raises(ValueError, match="format option 'oops' in 'osworld,oops': write NAME,KEY=VALUE"):
        split_format("osworld,oops")
    examples = osworld_checkout(tmp_path / "OSWorld", "os", "t1", "Say hi.").parents[1]
    osworld_run(tmp_path / "copy", "os", "t1", actions=["pyautogui.click(1, 2)"])
    fmt = f"osworld,examples={examples},platform=windows"
    (t,) = load_trajectories(tmp_path / "copy", fmt=fmt).trajectories
    assert (t.instruction, t.platform) == ("Say hi.", "windows")
    (t,) = [x for _, x in stream_trajectories(tmp_path / "copy", fmt=f"auto,examples={examples}").items()]
    assert (t.instruction, t.platform) == ("Say hi.", "ubuntu")
    with pytest.raises(ValueError, match="format 'osworld' takes no option 'png_dir'"):
        load_trajectories(tmp_path / "copy", fmt="auto,png_dir=x")


def test_the_cli_reads_a_loaders_options_and_shows_each_action_with_its_screen(tmp_path, capsys):
    """`prompt` (what `score` sends) on an OSWorld run copied away from its checkout, its task JSON given
    with --format osworld,examples=DIR: step k's screenshot is the screen action k was taken on."""
    from adaptrubric_local.cli import main

    examples = osworld_checkout(tmp_path / "OSWorld", "os", "t1", "Save the file as report.txt.").parents[1]
    run = osworld_run(tmp_path / "copy", "os", "t1", step0=True, actions=[
        "pyautogui.click(10, 10)", "pyautogui.typewrite('report.txt')", "pyautogui.press('enter')"])
    rc = main(["prompt", str(tmp_path / "copy" / "results"), "--format", f"osworld,examples={examples}",
               "--id", "pyautogui/screenshot/gpt-4o/os/t1", "--router", "rules", "--no-fine"])
    out = capsys.readouterr().out
    assert rc == 0 and "Save the file as report.txt." in out and '"report.txt"' in out
    assert "Step 2: pyautogui.typewrite('report.txt')" in out
    assert "- Agent's submitted answer: (none)" in out  # OSWorld's pyautogui actions submit no answer
    assert f"step 2: {(run / 'step_1_20250101@120000.png').resolve()}  (before type)" in out
    assert f"step 4: {(run / 'step_3_20250101@120002.png').resolve()}  (final frame)" in out
