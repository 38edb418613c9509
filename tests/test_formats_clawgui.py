"""The ClawGUI-RL and ClawGUI phone-agent loaders (formats/clawgui.py, formats/clawgui_agent.py) on output laid
out as ZJU-REAL/ClawGUI d990d3e writes it: every field, the moved-run re-rooting, evaluation failures, and
the errors."""
import json
import shutil
from pathlib import Path

from adaptrubric_local import detect_format, load_trajectories
from adaptrubric_local.formats import FORMATS, clawgui, clawgui_agent, tool_calls

from conftest import make_png

GOAL = "Find Bob's phone number and tell me."


def _response(thinking: str, args: dict) -> str:
    """A model response in the prompt's format (prompts/mobileworld.py L4-12)."""
    return (f"<thinking>\n{thinking}\n</thinking>\n<tool_call>\n"
            f"{json.dumps({'name': 'mobile_use', 'arguments': args})}\n</tool_call>")


def _rl_episode(save_dir: Path, task_name: str, episode_id: str, calls: list[dict], result: dict | None) -> Path:
    """One episode as `save_episode_to_json` (utils.py L254-327) writes it step by step, then
    `update_episode_result` (L352-375): absolute image paths, images/step_0000.png."""
    save_dir = save_dir.resolve()
    ep = save_dir / task_name.replace(" ", "_").replace("/", "_") / episode_id
    data = {"meta_data": {"task_name": task_name, "task_goal": GOAL, "episode_id": episode_id,
                          "created_at": "2026-06-01T10:00:00"}, "episode": []}
    for i, args in enumerate(calls):
        img = ep / "images" / f"step_{i:04d}.png"
        make_png(img, i)
        data["episode"].append({"step": i, "image_path": str(img), "model_response": _response(f"plan {i}", args),
                                "timestamp": "2026-06-01T10:00:01"})
    if result is not None:
        data["meta_data"].update(result)
    (ep / "episode.json").write_text(json.dumps(data, indent=2, ensure_ascii=False))
    return ep


CALLS = [{"action": "open", "text": "Contacts"}, {"action": "type", "text": "Bob"},
         {"action": "click", "coordinate": [500, 300]}, {"action": "answer", "text": "+1 555 0100"}]


def _evaluated(score, reason=""):
    return {"success": score > 0, "eval_score": float(score), "eval_reason": reason, "episode_reward": float(score),
            "episode_length": 4, "finished_at": "2026-06-01T10:05:00"}


def test_clawgui_rl_episode_every_field(tmp_path):
    root = tmp_path / "clawgui-rl" / "episode"
    ep = _rl_episode(root, "Contacts/Find Bob", "8f1c", CALLS, _evaluated(1.0, "ok"))
    assert ep.parent.name == "Contacts_Find_Bob"
    assert detect_format(root) == "clawgui"
    res = load_trajectories(root)
    assert res.errors == [] and res.warnings == []
    (t,) = res.trajectories
    assert (t.id, t.instruction, t.task_id, t.platform, t.label, t.answer) == (
        "8f1c", GOAL, "Contacts/Find Bob", "android", 1, "+1 555 0100")
    assert [s.screenshot for s in t.steps] == [str(ep / "images" / f"step_{i:04d}.png") for i in range(4)]
    assert [s.action_type for s in t.steps] == ["open_app", "type", "tap", "answer"]
    assert [s.text for s in t.steps] == [None, "Bob", None, None]
    assert [s.thought for s in t.steps] == ["plan 0", "plan 1", "plan 2", "plan 3"]
    assert t.steps[2].action == "click(coordinate=[500, 300])"
    assert FORMATS["clawgui"].screens == "before"


def test_the_verifier_prompt_holds_the_answer_tool_call_and_each_screen(tmp_path, capsys):
    """`prompt` (what `score` sends the verifier) on a ClawGUI-RL episode root: the `answer` tool call's
    text is the submitted answer, the typed text is key text, and each action is shown with its own
    screenshot (ClawGUI stores the screen the action was taken on)."""
    from adaptrubric_local.cli import main

    ep = _rl_episode(tmp_path / "episode", "Contacts/Find Bob", "8f1c", CALLS, _evaluated(1.0, "ok"))
    rc = main(["prompt", str(tmp_path / "episode"), "--id", "8f1c", "--router", "rules", "--no-fine"])
    out = capsys.readouterr().out
    assert rc == 0 and f"TASK: {GOAL}" in out
    assert "- Agent's submitted answer: \"+1 555 0100\"" in out and "- Key text entered by agent: \"Bob\"" in out
    assert "Step 3: click(coordinate=[500, 300])\n" in out
    shots = [line.split(": ", 1)[1].split("  (")[0] for line in out.splitlines() if line.startswith("  step ")]
    assert shots == [str(ep / "images" / f"step_{i:04d}.png") for i in range(4)]


def test_clawgui_rl_run_moved_to_another_folder_is_rerooted(tmp_path):
    old = tmp_path / "old_disk" / "episode"
    _rl_episode(old, "Find Bob", "e1", CALLS, _evaluated(0.0, "wrong number"))
    new = tmp_path / "new_disk" / "copy"
    shutil.copytree(old, new)
    shutil.rmtree(tmp_path / "old_disk")
    res = load_trajectories(new)
    assert res.errors == []
    (t,) = res.trajectories
    assert t.label == 0
    assert t.steps[1].screenshot == str((new / "Find_Bob" / "e1" / "images" / "step_0001.png").resolve())
    # copied, the old copy still there: the one inside the data folder is read
    _rl_episode(old, "Find Bob", "e1", CALLS, _evaluated(0.0))
    again = load_trajectories(new).trajectories[0]
    assert again.steps[0].screenshot.startswith(str(new.resolve()))


def test_clawgui_rl_path_that_matches_nothing_still_escapes(tmp_path):
    root = tmp_path / "episode"
    ep = _rl_episode(root, "Find Bob", "e1", CALLS[:2], _evaluated(1.0))
    outside = tmp_path / "elsewhere" / "secret.png"
    make_png(outside, 9)
    doc = json.loads((ep / "episode.json").read_text())
    doc["episode"][0]["image_path"] = str(outside)
    (ep / "episode.json").write_text(json.dumps(doc))
    (err,) = load_trajectories(root).errors
    assert "escapes the dataset folder" in err.problem and err.field == "episode[0].image_path"
    assert err.record_id == "e1"


def test_clawgui_rl_failed_evaluation_is_no_label(tmp_path):
    root = tmp_path / "episode"
    _rl_episode(root, "A", "e1", CALLS, _evaluated(0.0, "eval_failed_all_retries"))  # envs.py L555-560
    _rl_episode(root, "A", "e2", CALLS, _evaluated(0.0, "eval_exception: timeout"))  # env_manager.py L1034-1038
    _rl_episode(root, "A", "e3", CALLS, None)  # never evaluated (update_episode_result did not run)
    _rl_episode(root, "A", "e4", CALLS, _evaluated(0.0, "the number is wrong"))
    # a device error after step 2: no eval_score of its own, the rollout keeps step 1's 0.0 and "" (envs.py
    # L480-503, L583-590; rollout_loop.py L616-622)
    _rl_episode(root, "A", "e5", CALLS[:2], _evaluated(0.0, ""))
    _rl_episode(root, "A", "e6", [*CALLS[:2], {"action": "terminate", "status": "success"}], _evaluated(0.0, ""))
    res = load_trajectories(root)
    assert {t.id: t.label for t in res.trajectories} == {"e1": None, "e2": None, "e3": None, "e4": 0, "e5": None,
                                                         "e6": 0}
    assert sum("the evaluation failed" in w for w in res.warnings) == 2
    assert sum("ended without an evaluation" in w for w in res.warnings) == 1


def test_clawgui_rl_null_image_and_unparsed_response(tmp_path):
    root = tmp_path / "episode"
    ep = _rl_episode(root, "A", "e1", CALLS[:3], _evaluated(1.0))
    doc = json.loads((ep / "episode.json").read_text())
    doc["episode"][0]["image_path"] = None  # utils.py L303-307: the image could not be saved
    doc["episode"][1]["model_response"] = "I will tap it"
    (ep / "episode.json").write_text(json.dumps(doc))
    res = load_trajectories(root)
    (t,) = res.trajectories
    assert t.steps[0].screenshot is None and (t.steps[1].action, t.steps[1].action_type) == ("I will tap it", None)
    assert any("1 step(s) have no image" in w for w in res.warnings)


def test_clawgui_rl_errors_name_file_field_and_id(tmp_path):
    root = tmp_path / "episode"
    ep = _rl_episode(root, "A", "e1", CALLS[:2], {"success": "yes"})
    ep2 = _rl_episode(root, "A", "e2", CALLS[:2], _evaluated(1.0))
    (ep2 / "images" / "step_0001.png").unlink()
    res = clawgui.load(root)
    got = sorted((e.record_id, e.field, e.problem.split(":")[0]) for e in res.errors)
    assert got == [("e1", "meta_data.success", "expected true or false, got 'yes'"),
                   ("e2", "episode[1].image_path", "image not found")]
    assert sorted(e.file for e in res.errors) == [str(ep / "episode.json"), str(ep2 / "episode.json")]


def test_tool_calls_shapes():
    assert tool_calls.arguments_of('<tool_call>{"name": "mobile_use", "arguments": "{\\"action\\": \\"wait\\"}"}'
                                   "</tool_call>") == {"action": "wait"}
    assert tool_calls.arguments_of('<tool_call>\uff5b"action": "answer", "text": "x"\uff5d</tool_call>') == {
        "action": "answer", "text": "x"}
    assert tool_calls.arguments_of("no call") is None
    assert tool_calls.describe({"action": "system_button", "button": "Back"})[1] == "back"
    assert tool_calls.describe({"action": "terminate", "status": "success"}) == (
        'terminate(status="success")', "terminate", None, None)
    assert tool_calls.thought_before("Thought: look\nAction: tap it\n<tool_call>{}</tool_call>") == "look"


# ---------------------------------------------------------------- the phone agent (tracer.py)
def _trace(trace_dir: Path, episode_id: str, steps: list[tuple[str, dict]]) -> Path:
    """One episode as GUITracer writes it (tracer.py L49-61, L68-114): images/step{k}.png for k from 1
    (agent.py L361), episode.json at end_task."""
    ep = trace_dir.resolve() / episode_id
    rows = []
    for k, (output, action) in enumerate(steps, start=1):
        make_png(ep / "images" / f"step{k}.png", k)
        rows.append({"step": k, "model_output": output, "action": action,
                     "finished": action.get("_metadata") == "finish"})
    (ep / "episode.json").write_text(json.dumps({"task_name": GOAL, "timestamp": "2026-06-01T10:00:00+00:00",
                                                 "episode": rows}, ensure_ascii=False, indent=2))
    return ep


AGENT_STEPS = [
    ('<think>Open contacts first.</think><answer>do(action="Launch", app="Contacts")</answer>',
     {"_metadata": "do", "action": "Launch", "app": "Contacts"}),
    ('<think>Search Bob.</think><answer>do(action="Type", text="Bob")</answer>',
     {"_metadata": "do", "action": "Type", "text": "Bob"}),
    ("Thought: the number is shown\nAction: answer\n<tool_call>{}</tool_call>",
     {"_metadata": "do", "action_type": "click", "coordinate": [10, 20]}),
    ('<think>Done.</think><answer>finish(message="+1 555 0100")</answer>',
     {"_metadata": "finish", "message": "+1 555 0100"}),
]


def test_clawgui_agent_trace_every_field(tmp_path):
    trace_dir = tmp_path / "gui_trace"
    ep = _trace(trace_dir, "a1b2c3d4", AGENT_STEPS)
    assert detect_format(trace_dir) == "clawgui-agent" and detect_format(ep / "episode.json") == "clawgui-agent"
    res = load_trajectories(trace_dir)
    assert res.errors == []
    (t,) = res.trajectories
    assert (t.id, t.instruction, t.platform, t.label, t.answer) == ("a1b2c3d4", GOAL, "android", None, "+1 555 0100")
    assert [s.screenshot for s in t.steps] == [str(ep / "images" / f"step{k}.png") for k in range(1, 5)]
    assert [s.action_type for s in t.steps] == ["open_app", "type", "tap", "answer"]
    assert [s.text for s in t.steps] == [None, "Bob", None, None]
    assert [s.thought for s in t.steps] == ["Open contacts first.", "Search Bob.", "the number is shown", "Done."]
    assert t.steps[0].action == 'Launch(app="Contacts")'
    assert FORMATS["clawgui-agent"].screens == "before"


def test_clawgui_formats_skip_each_others_episodes(tmp_path):
    _trace(tmp_path / "mixed", "a1", AGENT_STEPS)
    _rl_episode(tmp_path / "mixed", "T", "r1", CALLS, _evaluated(1.0))
    rl, agent = clawgui.load(tmp_path / "mixed"), clawgui_agent.load(tmp_path / "mixed")
    assert [t.id for t in rl.trajectories] == ["r1"] and [t.id for t in agent.trajectories] == ["a1"]
    assert any("--format clawgui-agent" in w for w in rl.warnings)
    assert any("--format clawgui" in w for w in agent.warnings)


def test_clawgui_agent_missing_image_names_the_step(tmp_path):
    ep = _trace(tmp_path, "a1", AGENT_STEPS[:2])
    (ep / "images" / "step2.png").unlink()
    (err,) = clawgui_agent.load(tmp_path).errors
    assert (err.record_id, err.field) == ("a1", "episode[1] (images/step2.png)")
    assert clawgui_agent.load(tmp_path, check_images=False).errors == []
