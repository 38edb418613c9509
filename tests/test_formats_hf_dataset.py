"""formats/hf_dataset.py on data sets built with the real `datasets` (save_to_disk and to_parquet)."""
from __future__ import annotations

import hashlib
import io
from pathlib import Path

import pytest

datasets = pytest.importorskip("datasets")
from PIL import Image  # noqa: E402

from adaptrubric_local.formats import DataError, detect_format, load_trajectories  # noqa: E402
from adaptrubric_local.formats.hf_dataset import CACHE_DIR, ColumnMapping, load_hf_dataset  # noqa: E402


def png(color: str) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (8, 6), color).save(buf, "PNG")
    return buf.getvalue()


# A benchmark whose columns are not the canonical names: the mapping file names them.
FEATURES = datasets.Features({
    "traj_id": datasets.Value("string"), "goal": datasets.Value("string"),
    "images": datasets.List(datasets.Image()), "steps_actions": datasets.List(datasets.Value("string")),
    "reasoning": datasets.List(datasets.Value("string")), "final": datasets.Value("string"),
    "human": datasets.Value("int64"), "os": datasets.Value("string"),
})
ROWS = {
    "traj_id": ["t1", "t2", "t3"],
    "goal": ["Type hello in the search box", "What is the price?", "Open settings"],
    "images": [[{"bytes": png("red"), "path": None}, {"bytes": png("blue"), "path": None}],
               [{"bytes": png("green"), "path": None}], [{"bytes": png("red"), "path": None}]],
    "steps_actions": [["pyautogui.write('hello')", "DONE"], ["answer('12 USD')"], ["tap(3)"]],
    "reasoning": [["type the word", "done"], ["read it"], ["tap"]],
    "final": [None, "12 USD", None], "human": [1, 0, 2], "os": ["ubuntu", "web", "android"],
}
MAPPING = """id: traj_id
instruction: goal
screenshots: images
actions: steps_actions
thoughts: reasoning
answer: final
label: human
platform: os
task_id: null
no_label: [2]
"""


def build(tmp_path: Path, kind: str) -> Path:
    ds = datasets.Dataset.from_dict(ROWS, features=FEATURES)
    if kind == "disk":
        out = tmp_path / "bench"
        ds.save_to_disk(str(out))
    else:
        out = tmp_path / "pq"
        out.mkdir()
        ds.to_parquet(str(out / "test-00000-of-00001.parquet"))
    (out / "adaptrubric-columns.yaml").write_text(MAPPING)
    return out


@pytest.mark.parametrize("kind", ["disk", "parquet"])
def test_every_field_through_the_mapping(tmp_path, kind):
    folder = build(tmp_path, kind)
    assert detect_format(folder) == "hf-dataset"
    res = load_trajectories(folder)
    assert not res.errors
    t1, t2, t3 = res.trajectories
    assert (t1.id, t1.instruction, t1.platform, t1.label) == ("t1", "Type hello in the search box", "ubuntu", 1)
    assert [s.action for s in t1.steps] == ["pyautogui.write('hello')", "DONE"]
    assert t1.steps[0].action_type == "type" and t1.steps[0].text == "hello" and t1.steps[0].thought == "type the word"
    assert t2.answer == "12 USD" and t2.label == 0 and t2.platform == "web"
    assert t3.label is None and any("label 2 means no label" in w for w in res.warnings)
    # image bytes became files in the cache, byte for byte, named by their hash; the same image is one file
    shot = Path(t1.steps[0].screenshot)
    assert shot.parent == (folder / CACHE_DIR).resolve() and shot.read_bytes() == png("red")
    assert shot.name == hashlib.sha256(png("red")).hexdigest() + ".png"
    assert t3.steps[0].screenshot == t1.steps[0].screenshot
    before = sorted(p.stat().st_mtime_ns for p in (folder / CACHE_DIR).iterdir())
    load_trajectories(folder)
    assert sorted(p.stat().st_mtime_ns for p in (folder / CACHE_DIR).iterdir()) == before


def test_parquet_file_given_directly_and_a_python_mapping(tmp_path):
    folder = build(tmp_path, "parquet")
    (folder / "adaptrubric-columns.yaml").unlink()
    m = ColumnMapping(id="traj_id", instruction="goal", screenshots="images", actions="steps_actions",
                      answer="final", label=None, platform=None, task_id=None, default_platform="desktop")
    res = load_hf_dataset(folder / "test-00000-of-00001.parquet", mapping=m, image_cache=tmp_path / "cache")
    assert len(res.trajectories) == 3 and res.trajectories[0].platform == "desktop"
    assert Path(res.trajectories[0].steps[0].screenshot).parent == (tmp_path / "cache").resolve()


def test_canonical_column_names_need_no_mapping_and_paths_resolve(tmp_path):
    (tmp_path / "img").mkdir()
    (tmp_path / "img" / "a.png").write_bytes(png("red"))
    (tmp_path / "img" / "b.png").write_bytes(png("blue"))
    ds = datasets.Dataset.from_dict({"id": ["x"], "instruction": ["Do it"], "screenshots": [["img/a.png", "img/b.png"]],
                                     "actions": [["click(1, 2)"]], "answer": [None], "label": ["SUCCESS"],
                                     "platform": ["web"], "task_id": ["k"]})
    ds.to_parquet(str(tmp_path / "d.parquet"))
    (t,) = load_trajectories(tmp_path / "d.parquet").trajectories
    assert [s.screenshot for s in t.steps] == [str((tmp_path / "img" / n).resolve()) for n in ("a.png", "b.png")]
    assert [s.action for s in t.steps] == ["click(1, 2)", "(final screen)"] and t.label == 1 and t.task_id == "k"


def test_screens_after_pairs_each_action_with_the_screen_before_it(tmp_path):
    ds = datasets.Dataset.from_dict({"id": ["x"], "instruction": ["Do it"], "actions": [["a1", "a2"]],
                                     "screenshots": [[{"bytes": png("red"), "path": None},
                                                      {"bytes": png("blue"), "path": None}]]},
                                    features=datasets.Features({"id": datasets.Value("string"),
                                                                "instruction": datasets.Value("string"),
                                                                "actions": datasets.List(datasets.Value("string")),
                                                                "screenshots": datasets.List(datasets.Image())}))
    ds.save_to_disk(str(tmp_path / "d"))
    m = ColumnMapping(answer=None, label=None, platform=None, task_id=None, screens="after")
    (t,) = load_hf_dataset(tmp_path / "d", mapping=m).trajectories
    assert [s.action for s in t.steps] == ["a1", "a2", "(final screen)"]
    assert t.steps[0].screenshot is None and Path(t.steps[1].screenshot).read_bytes() == png("red")


def test_a_datasetdict_reads_every_split_and_a_bad_row_keeps_its_id(tmp_path):
    good = {k: v[:2] for k, v in ROWS.items()}
    bad = {**{k: v[:1] for k, v in ROWS.items()}, "traj_id": ["b1"], "goal": [None]}
    dd = datasets.DatasetDict({"test": datasets.Dataset.from_dict(good, features=FEATURES),
                               "dev": datasets.Dataset.from_dict(bad, features=FEATURES)})
    dd.save_to_disk(str(tmp_path / "dd"))
    (tmp_path / "dd" / "adaptrubric-columns.yaml").write_text(MAPPING)
    res = load_trajectories(tmp_path / "dd")
    assert [t.id for t in res.trajectories] == ["t1", "t2"]
    (err,) = res.errors
    assert err.record_id == "b1" and err.field == "goal" and "row dev/0" in str(err)


def test_mapping_errors_name_the_file_key_and_columns(tmp_path):
    folder = build(tmp_path, "disk")
    (folder / "adaptrubric-columns.yaml").write_text(MAPPING + "screenshot_col: x\n")
    with pytest.raises(DataError, match="screenshot_col"):
        load_trajectories(folder)
    (folder / "adaptrubric-columns.yaml").unlink()
    with pytest.raises(DataError, match="has no column 'id'.*traj_id"):
        load_trajectories(folder)
    with pytest.raises(ValueError, match="screens"):
        ColumnMapping(screens="during")


def test_the_mapping_in_docs_data_md_reads_this_data_set(tmp_path):
    text = (Path(__file__).resolve().parents[1] / "docs" / "data.md").read_text(encoding="utf-8")
    block = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    folder = build(tmp_path, "parquet")
    (folder / "adaptrubric-columns.yaml").write_text(block)
    res = load_trajectories(folder)
    assert [t.id for t in res.trajectories] == ["t1", "t2", "t3"] and not res.errors
    assert ColumnMapping.from_file(folder / "adaptrubric-columns.yaml").no_label == (2,)
