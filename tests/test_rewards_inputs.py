"""What a reward call may be given (reward_inputs.py): relative screenshots resolve against data_root, then
image_roots, never against /; paths escaping a root are refused; the service confines absolute paths."""
import pytest

from adaptrubric_local import FakeEngine, load_trajectories
from adaptrubric_local.rewards.config import RewardConfig
from adaptrubric_local.rewards.inputs import to_trajectory, traj_key
from adaptrubric_local.rewards.model import RewardModel


@pytest.fixture
def trajs(synth_set):
    return load_trajectories(synth_set).trajectories[:2]


def test_relative_screenshots_resolve_against_data_root_not_slash(trajs, tmp_path, monkeypatch):
    t = trajs[0]
    root = tmp_path / "data"
    rel_steps = []
    for i, s in enumerate(t.steps):
        dst = root / "shots" / f"{i}.png"
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_bytes(open(s.screenshot, "rb").read())
        rel_steps.append({"screenshot": f"shots/{i}.png", "action": s.action})
    rec = {"id": "r", "instruction": t.instruction, "steps": rel_steps}
    rm = RewardModel(engine=FakeEngine(), data_root=str(root))
    assert rm.score([rec])[0].status == "ok"
    monkeypatch.chdir(tmp_path)  # default root: the current directory
    v = RewardModel(engine=FakeEngine()).score([rec])[0]
    assert v.status == "error" and str(tmp_path / "shots" / "0.png") in v.error
    assert RewardModel(engine=FakeEngine(), image_roots=[str(root)]).score([rec])[0].status == "ok"
    escape = {**rec, "steps": [{"screenshot": "../../etc/passwd", "action": "a"}]}
    assert "escapes" in RewardModel(engine=FakeEngine(), data_root=str(root)).score([escape])[0].error


def test_forms_and_confinement(trajs, tmp_path):
    t = trajs[0]
    cfg = RewardConfig(data_root=str(tmp_path))
    assert to_trajectory(t, cfg) is t
    assert traj_key(to_trajectory(t.to_dict(), cfg)) == traj_key(t)  # a dict with absolute paths: as they are
    import json

    assert traj_key(to_trajectory(json.dumps(t.to_dict()), cfg)) == traj_key(t)
    with pytest.raises(ValueError, match="lies outside the service's data_root and image_roots"):
        to_trajectory(t.to_dict(), cfg, confine=True)  # the service reads only inside its folders
    with pytest.raises(ValueError, match="not valid JSON"):
        to_trajectory("{nope", cfg)
    with pytest.raises(TypeError, match="expected a Trajectory"):
        to_trajectory(3, cfg)
