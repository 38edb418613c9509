"""Synthetic labelled trajectories (synth.py): what `adaptrubric synth` and the demo write."""
from PIL import Image

from adaptrubric_local.formats import load_trajectories
from adaptrubric_local.synth import synthesize


def test_each_task_has_balanced_labels_and_loadable_screens(tmp_path):
    path = synthesize(tmp_path / "s", n_tasks=3, candidates=4, size=(90, 200), seed=1)
    res = load_trajectories(path)
    assert not res.errors and len(res.trajectories) == 12
    by_task = {}
    for t in res.trajectories:
        by_task.setdefault(t.task_id, []).append(t)
        assert t.platform == "android" and t.id.startswith(t.task_id) and len(t.steps) >= 2
        assert all(Image.open(s).size == (90, 200) for s in t.screenshots)
    assert len(by_task) == 3
    for trajs in by_task.values():
        assert sorted(t.label for t in trajs) == [0, 0, 1, 1] and len({t.instruction for t in trajs}) == 1


def test_the_same_seed_writes_the_same_data_and_the_outcome_banner_is_an_option(tmp_path):
    a = synthesize(tmp_path / "a", n_tasks=2, candidates=2, size=(90, 200), seed=3)
    b = synthesize(tmp_path / "b", n_tasks=2, candidates=2, size=(90, 200), seed=3)
    strip = [{k: v for k, v in t.to_dict().items() if k != "steps"} for t in load_trajectories(a).trajectories]
    assert strip == [{k: v for k, v in t.to_dict().items() if k != "steps"} for t in load_trajectories(b).trajectories]
    plain = load_trajectories(a).trajectories[0]
    banner = load_trajectories(synthesize(tmp_path / "c", n_tasks=2, candidates=2, size=(90, 200), seed=3,
                                          visible_outcome=True)).trajectories[0]
    assert Image.open(plain.screenshots[-1]).tobytes() != Image.open(banner.screenshots[-1]).tobytes()
    assert Image.open(plain.screenshots[0]).tobytes() == Image.open(banner.screenshots[0]).tobytes()


def test_synth_visible_outcome_draws_the_banner_the_answering_model_reads(tmp_path, capsys):
    """`synth --visible-outcome` writes what synthesize(visible_outcome=True) writes: each final screen below
    the status bar green for a success and red for a failure, every other screen as without the flag."""
    from adaptrubric_local.cli import main
    from adaptrubric_local.distill.answering import AnsweringSettings, answering_data

    args = ["synth", "--tasks", "2", "--candidates", "2", "--size", "96x192", "--seed", "4"]
    assert main([*args, "--out", str(tmp_path / "flag"), "--visible-outcome"]) == 0
    assert "outcome banner on the final screen" in capsys.readouterr().out
    assert main([*args, "--out", str(tmp_path / "plain")]) == 0
    flag = load_trajectories(tmp_path / "flag" / "trajectories.jsonl").trajectories
    plain = load_trajectories(tmp_path / "plain" / "trajectories.jsonl").trajectories
    same = load_trajectories(answering_data(tmp_path / "fn", AnsweringSettings(n_tasks=2, candidates=2),
                                            seed=4)).trajectories
    assert [t.label for t in flag] == [t.label for t in plain] == [t.label for t in same] and len(flag) == 4
    for f, p, s in zip(flag, plain, same):
        last = Image.open(f.screenshots[-1]).convert("RGB")
        r, g, b = last.getpixel((2, last.height // 2))
        assert (g > 2 * r) if f.label == 1 else (r > 2 * g), (f.id, f.label, (r, g, b))
        assert last.tobytes() == Image.open(s.screenshots[-1]).convert("RGB").tobytes()
        assert last.tobytes() != Image.open(p.screenshots[-1]).convert("RGB").tobytes()
        assert all(Image.open(a).tobytes() == Image.open(b).tobytes()
                   for a, b in zip(f.screenshots[:-1], p.screenshots[:-1]))
