"""Screenshot selection sigma(tau, c) with near-duplicate runs: the budget is filled with distinct
screens, first and final frame are always in, order is kept, a run is shown once by its settled frame."""
import pytest

from adaptrubric_local import Step, Trajectory
from adaptrubric_local.context import select_context, thumbnail_fingerprint, thumbnails_close

from conftest import make_png

DEDUPE = (thumbnail_fingerprint, thumbnails_close)


def _traj(tmp_path, shades, actions=None, types=None):
    """One step per shade; equal shades give pixel-identical screenshots (distinct files)."""
    steps = []
    for i, shade in enumerate(shades):
        steps.append(Step(screenshot=make_png(tmp_path / f"s{i}.png", shade), action=(actions or {}).get(i, "tap(x)"),
                          action_type=(types or {}).get(i, "tap")))
    return Trajectory(id="t", instruction="Turn on Wi-Fi.", steps=steps)


def _screens(t, sel):
    return [t.steps[i].screenshot for i in sel.indices]


def test_idle_tail_is_refilled_to_the_budget(tmp_path):
    # 25 steps, the last 12 identical: 13 + 1 = 14 distinct screens, so the budget of 10 is filled
    t = _traj(tmp_path, [*range(1, 14), *[50] * 12],
              types={i: "wait" for i in range(13, 25)})
    sel = select_context(t, "state_navigation", 10, *DEDUPE)
    assert len(sel.indices) == 10
    assert sel.indices[0] == 0 and sel.indices[-1] == 24 and sel.indices == sorted(sel.indices)
    # exactly one frame of the idle run (the final one), all others distinct screens
    assert [i for i in sel.indices if i >= 13] == [24]
    assert len({open(p, "rb").read() for p in _screens(t, sel)}) == 10
    assert set(sel.dropped_duplicates) <= set(range(13, 24)) and sel.dropped_duplicates


def test_idle_tail_is_refilled_whatever_the_family(tmp_path):
    t = _traj(tmp_path, [*range(1, 14), *[50] * 12])
    for family in ("general", "info_query", "transfer", "composite_workflow", "create_modify"):
        sel = select_context(t, family, 10, *DEDUPE)
        assert len(sel.indices) == 10 and sel.indices[0] == 0 and sel.indices[-1] == 24, family
        assert [i for i in sel.indices if i >= 13] == [24], family


def test_short_trajectory_keeps_every_frame(tmp_path):
    t = _traj(tmp_path, [1, 2, 3, 4])
    assert select_context(t, "general", 10, *DEDUPE).indices == [0, 1, 2, 3]
    assert select_context(t, "general", 10).indices == [0, 1, 2, 3]


def test_fewer_distinct_screens_than_budget_gives_all_distinct(tmp_path):
    # screens: A A B B B C C D -> 4 distinct; first frame stands for its run, other runs by their last frame
    t = _traj(tmp_path, [1, 1, 2, 2, 2, 3, 3, 4])
    sel = select_context(t, "general", 10, *DEDUPE)
    assert sel.indices == [0, 4, 6, 7]
    assert sel.dropped_duplicates == [1, 2, 3, 5]


def test_run_is_shown_by_its_settled_frame_with_the_candidate_reason(tmp_path):
    # the submit happens at step 3; its result screen appears at 4 and settles over 4-6
    t = _traj(tmp_path, [1, 2, 3, 4, 9, 9, 9, 5, 6], actions={3: "tap(Save)"})
    sel = select_context(t, "general", 4, *DEDUPE)
    assert sel.indices[0] == 0 and sel.indices[-1] == 8 and len(sel.indices) == 4
    assert 6 in sel.indices and 4 not in sel.indices and 5 not in sel.indices
    assert "after submit" in sel.reasons[6]


def test_first_and_final_always_in_and_order_kept(tmp_path):
    # a long trajectory whose high-signal actions sit in the middle
    shades = list(range(1, 31))
    t = _traj(tmp_path, shades, actions={10: "tap(Send)", 20: "tap(Save)"},
              types={15: "type"})
    for budget in (2, 3, 5, 10):
        for fp in (DEDUPE, ()):
            sel = select_context(t, "communication", budget, *fp)
            assert sel.indices[0] == 0 and sel.indices[-1] == 29
            assert sel.indices == sorted(set(sel.indices)) and len(sel.indices) == budget
    sel = select_context(t, "communication", 10, *DEDUPE)
    assert {10, 11, 15, 20, 21} <= set(sel.indices)  # high-signal actions and their results kept


def test_first_and_final_kept_when_all_frames_identical(tmp_path):
    t = _traj(tmp_path, [7] * 6)
    sel = select_context(t, "general", 10, *DEDUPE)
    assert sel.indices == [0, 5] and sel.dropped_duplicates == [1, 2, 3, 4]


def test_first_frame_repeats_are_not_shown_twice(tmp_path):
    t = _traj(tmp_path, [1, 1, 1, 2, 3])
    sel = select_context(t, "general", 10, *DEDUPE)
    assert sel.indices == [0, 3, 4] and sel.dropped_duplicates == [1, 2]


def test_same_screen_apart_in_time_is_kept(tmp_path):
    # A B A: returning to a screen is evidence; only consecutive repeats are merged
    t = _traj(tmp_path, [1, 2, 1, 3])
    assert select_context(t, "general", 10, *DEDUPE).indices == [0, 1, 2, 3]


def test_only_needed_frames_are_fingerprinted(tmp_path):
    t = _traj(tmp_path, list(range(1, 41)))
    seen = []

    def fp(path):
        seen.append(path)
        return thumbnail_fingerprint(path)

    sel = select_context(t, "general", 5, fp, thumbnails_close)
    assert len(sel.indices) == 5
    assert len(seen) == len(set(seen)) < 20  # each decoded once, and far fewer than all 40


def test_without_fingerprint_nothing_is_merged(tmp_path):
    t = _traj(tmp_path, [*range(1, 14), *[50] * 12], types={i: "wait" for i in range(13, 25)})
    sel = select_context(t, "general", 10)
    assert len(sel.indices) == 10 and sel.dropped_duplicates == []


def test_unreadable_frame_is_an_error(tmp_path):
    t = _traj(tmp_path, [1, 2, 3])
    t.steps[1].screenshot = str(tmp_path / "missing.png")
    with pytest.raises(OSError):
        select_context(t, "general", 10, *DEDUPE)
