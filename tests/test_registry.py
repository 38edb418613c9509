"""registry.py and the extension points built on it: an engine and a data format registered from a
user's file (the very files docs/architecture.md shows, read from the page) and used from the command
line (`--plugins`) and from `Verifier`, touching no package file; what registering refuses."""
import json
import re
from pathlib import Path

import pytest

from adaptrubric_local import Verifier, load_plugins, load_trajectories, register_engine
from adaptrubric_local.audit import perturbations as P
from adaptrubric_local.cli import main
from adaptrubric_local.engine.build import engines
from adaptrubric_local.engine.options import ENGINE_OPTIONS, ENGINES, unread
from adaptrubric_local.formats import FORMATS
from adaptrubric_local.registry import Registry, plugins_in

from conftest import make_png

PAGE = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def section(title: str) -> list[tuple[str, str]]:
    """(language, code) of each block of the page's section `title`, shell lines joined."""
    text = PAGE.read_text(encoding="utf-8")
    body = text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
    return [(lang, re.sub(r"\\\n\s*", " ", code)) for lang, code in FENCE.findall(body)]


@pytest.fixture
def restored():
    """The registries as they were before the test (a user's file registers into them)."""
    engines()
    saved = [(r, dict(r)) for r in (ENGINES, FORMATS, P.REGISTRY)]
    yield
    for reg, before in saved:
        reg.clear()
        reg.update(before)


def user_files(folder: Path) -> dict[str, Path]:
    """The page's plugin files, written where a user would keep them, by the name their first line gives."""
    out = {}
    for title in ("Adding an engine", "Adding a data format"):
        code = next(c for lang, c in section(title) if lang == "python" and c.startswith("# "))
        name = code.split("\n", 1)[0][2:].strip()
        out[name] = folder / name
        out[name].write_text(code, encoding="utf-8")
    return out


def tsv_data(folder: Path) -> Path:
    """FOLDER/tasks.tsv in the page's format, screenshots beside it: two good lines and a bad one."""
    for k in range(3):
        make_png(folder / "shots" / f"{k}.png", k)
    rows = ["t1\tOpen the settings app\tshots/0.png\tshots/1.png", "t2\tTurn on wifi\tshots/2.png",
            "bad\tNo screenshot here"]
    (folder / "tasks.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return folder / "tasks.tsv"


def test_the_page_s_engine_and_format_work_from_a_user_s_file_on_the_command_line(tmp_path, monkeypatch, restored,
                                                                                 capsys):
    monkeypatch.chdir(tmp_path)
    user_files(tmp_path)
    tsv_data(tmp_path / "runs")
    assert "echo" not in ENGINES and "tsv" not in FORMATS  # nothing of the package knows them
    engine_cmd = next(c for lang, c in section("Adding an engine") if lang == "sh").split()
    # the page's command, on the page's data format (DATA swapped for the .tsv file; both plugins given)
    argv = [engine_cmd[1], "runs/tasks.tsv", *engine_cmd[3:], "--plugins", "tsv_format.py", "--quiet"]
    assert main(argv) == 0, capsys.readouterr().err
    lines = [json.loads(x) for x in Path("runs/echo.jsonl").read_text().splitlines()]
    by_id = {v["id"]: v for v in lines}
    assert by_id["t1"]["status"] == by_id["t2"]["status"] == "ok" and by_id["t1"]["score"] == 1
    assert by_id["t1"]["model"] == "echo:any"
    assert by_id["bad"]["status"] == "error" and "line 3, field 'screenshots'" in by_id["bad"]["error"]
    # the format's own command: detected, scored by the tiny-model-free rules router and the echo engine
    fmt_cmd = next(c for lang, c in section("Adding a data format") if lang == "sh").split()
    argv = [*fmt_cmd[1:fmt_cmd.index("--model")], "--plugins", "echo_engine.py", "--engine", "echo", "--model",
            "any", *fmt_cmd[fmt_cmd.index("--model") + 2:], "--quiet"]
    assert main(argv) == 0, capsys.readouterr().err
    assert len(Path("runs/tsv.jsonl").read_text().splitlines()) == 3
    # an option the table says the engine does not read is refused, naming the engines that read it
    assert main([*engine_cmd[1:], "--out", "runs/x.jsonl", "--dtype", "bf16"]) == 2
    err = capsys.readouterr().err
    assert "--dtype is an option of --engine transformers and --engine vllm, not read by --engine echo" in err


def test_the_page_s_python_blocks_run_beside_the_user_s_files(tmp_path, monkeypatch, restored, capsys):
    monkeypatch.chdir(tmp_path)
    user_files(tmp_path)
    tsv_data(tmp_path / "runs")
    synth = tmp_path / "runs" / "synth"  # the engine's block scores runs/synth/trajectories.jsonl: canonical
    load_plugins(["tsv_format.py"])     # data, written here from the page's format
    records = [{**t.to_dict(), "steps": [{"screenshot": Path(s.screenshot).relative_to(synth).as_posix(),
                                          "action": ""} for s in t.steps]}
               for t in load_trajectories(tsv_data(synth)).trajectories]
    (synth / "trajectories.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    scopes = []
    for title in ("Adding an engine", "Adding a data format"):
        for lang, code in section(title):
            if lang == "python" and not code.startswith("# "):
                scopes.append({"__name__": "__main__"})
                exec(compile(code, f"{PAGE.name}: {title}", "exec"), scopes[-1])
    verdicts = scopes[0]["verdicts"]
    assert [v.status for v in verdicts] == ["ok", "ok"], [v.error for v in verdicts]
    assert {v.model for v in verdicts} == {"echo:any"}
    assert len(scopes[1]["loaded"].trajectories) == 2 and "2 trajectories, 1 bad records" in capsys.readouterr().out
    with pytest.raises(ValueError, match="dtype is an option of engine='transformers' and engine='vllm', not read "
                                         "by engine='echo': leave it out"):
        Verifier("any", engine="echo", dtype="bf16")
    assert engines()["echo"].reads == {"max_visual_tokens"}


def test_a_registry_refuses_a_second_entry_and_names_the_registered_ones():
    reg: Registry[tuple] = Registry("widget", lambda name, function, **fields: (name, function(), fields))
    assert reg.register("a", size=1)(lambda: 1)() == 1  # the decorator returns the function
    with pytest.raises(ValueError, match="a widget named 'a' is already registered"):
        reg.register("a")(lambda: 2)
    reg.register("a", replace=True, size=3)(lambda: 3)
    assert reg.lookup("a") == ("a", 3, {"size": 3})
    with pytest.raises(ValueError, match=r"unknown widget 'b'; registered: a \(a Python file given with --plugins"):
        reg.lookup("b")


def test_an_engine_reads_only_options_of_the_table(restored):
    with pytest.raises(ValueError, match="max_vision_tokens is not among them"):
        register_engine("typo", reads=("max_vision_tokens",))(lambda model, **kw: None)
    register_engine("quiet", reads=("votes",))(lambda model, **kw: None)
    assert unread("quiet", ["votes", "max_new_tokens"]) is None  # read, and read by every engine
    assert "device_map is an option of engine='transformers'" in unread("quiet", ["device_map"])
    assert "quiet" not in unread("vllm", ["device_map"]) and "device_map" in ENGINE_OPTIONS


def test_plugins_are_read_from_the_command_line_before_it_is_parsed(tmp_path, capsys):
    assert plugins_in(["score", "D", "--plugins", "a.py", "--plugins=b"]) == ["a.py", "b"]
    assert main(["score", "D", "--plugins", str(tmp_path / "none.py")]) == 2
    assert f"--plugins {tmp_path / 'none.py'}: no such file" in capsys.readouterr().err
    assert main(["score", "D", "--plugins", "no_such_module_here"]) == 2
    assert "No module named 'no_such_module_here'" in capsys.readouterr().err
