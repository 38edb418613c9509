"""Shared fixtures: small generated screenshots and trajectory files in every supported format."""
import json
import locale
import os
from pathlib import Path

import pytest
from PIL import Image, ImageDraw

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


@pytest.fixture(scope="session")
def tiny_engine(tiny_model):
    """The transformers engine on the tiny model, loaded once per session through from_pretrained."""
    from adaptrubric_local.engine.hf import HFEngine, HFEngineConfig

    engine = HFEngine(HFEngineConfig(model=str(tiny_model), max_new_tokens=12, max_batch_size=8))
    yield engine
    engine.close()


@pytest.fixture(scope="session")
def synth_set(tmp_path_factory):
    """24 synthetic trajectories (8 tasks x 3 candidates, all 8 families), small screens."""
    from adaptrubric_local.synth import synthesize

    return synthesize(tmp_path_factory.mktemp("synth"), n_tasks=8, candidates=3, size=(180, 400))


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
