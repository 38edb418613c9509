"""A trajectory path given to the reward service (rewards/inputs.py, what /score and /openrlhf read for a
path item): a canonical JSONL file is read up to its first good record, never loaded whole."""
import json

import pytest

from adaptrubric_local import FakeEngine
from adaptrubric_local.formats import canonical
from adaptrubric_local.rewards.config import RewardConfig
from adaptrubric_local.rewards.inputs import to_trajectory
from adaptrubric_local.rewards.model import RewardModel

from conftest import canonical_record, write_jsonl


def _refuse(*a, **kw):
    raise AssertionError("the whole file was loaded")


@pytest.fixture
def big(tmp_path):
    recs = [canonical_record(tmp_path, f"r{i}", 2, label=i % 2) for i in range(40)]
    lines = [json.dumps({"id": "bad0", "steps": []}), *map(json.dumps, recs)]
    path = tmp_path / "rollouts.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_path_reads_up_to_its_first_good_record(big, tmp_path, monkeypatch):
    monkeypatch.setattr("adaptrubric_local.formats.load_trajectories", _refuse)
    parsed = []
    parse = canonical.parse_record
    monkeypatch.setattr(canonical, "parse_record", lambda obj, *a, **kw: parsed.append(obj.get("id")) or
                        parse(obj, *a, **kw))
    cfg = RewardConfig(data_root=str(tmp_path))
    assert to_trajectory(str(big), cfg, "item 0", confine=True).id == "r0"
    assert parsed == ["bad0", "r0"]  # the bad record before it, then the first good one; no further
    rm = RewardModel(engine=FakeEngine(), data_root=str(tmp_path))
    [v] = rm.score([big.name])  # as the service scores a path item
    assert v.id == "r0" and v.status == "ok"


def test_a_file_without_a_good_record_names_its_bad_ones(tmp_path):
    path = write_jsonl(tmp_path / "bad.jsonl", [{"id": "b1", "steps": []}, {"id": "b2"}])
    with pytest.raises(ValueError, match="no trajectory in .*b1.*b2"):
        to_trajectory(str(path), RewardConfig(data_root=str(tmp_path)), "item 0", confine=True)
