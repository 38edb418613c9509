"""Context selection sigma(tau, c) (context.py): the screenshot budget, first and final frames, frames
around high-signal actions with the family bonuses, near-duplicate runs shown once by their settled
frame, and the thumbnail fingerprints that decide which screens are the same."""
import pytest
from PIL import Image

from adaptrubric_local import Step, Trajectory
from adaptrubric_local.stages.context import (
    _family_bonus,
    _Runs,
    _score_frames,
    select_context,
    thumbnail_fingerprint,
    thumbnails_close,
)

from conftest import make_png


def test_selection_on_25_steps(long_traj):
    sel = select_context(long_traj, "create_modify", 10, thumbnail_fingerprint, thumbnails_close)
    assert len(sel.indices) <= 10
    assert sel.indices[0] == 0 and sel.indices[-1] == 24
    assert sel.indices == sorted(sel.indices)
    assert {12, 13, 14} <= set(sel.indices)  # typing, the save, and the frame after it


def _kinds_traj(kinds, tmp_path, family_actions=None):
    steps = []
    for i, (atype, action) in enumerate(kinds):
        steps.append(Step(screenshot=make_png(tmp_path / f"f{i}.png", i + 1), action=action, action_type=atype,
                          text="x" if atype == "type" else None))
    return Trajectory(id="t", instruction="i", steps=steps)


def test_info_query_keeps_where_the_answer_was_read(tmp_path):
    kinds = [("tap", "tap(a)")] * 14 + [("read", "quote('25 people')"), ("tap", "tap(b)"), ("tap", "tap(c)"),
                                         ("answer", "finish(answer='25')"), ("tap", "tap(d)"), ("tap", "tap(e)")]
    t = _kinds_traj(kinds, tmp_path)
    sel = select_context(t, "info_query", 4)
    assert sel.indices[0] == 0 and sel.indices[-1] == 19 and 14 in sel.indices


def test_transfer_keeps_source_and_sink(tmp_path):
    kinds = ([("tap", "tap(x)")] * 3 + [("hotkey", "hotkey('ctrl','c')")] + [("tap", "tap(y)")] * 10
             + [("hotkey", "hotkey('ctrl','v')")] + [("tap", "tap(z)")] * 5)
    t = _kinds_traj(kinds, tmp_path)
    sel = select_context(t, "transfer", 5)
    assert {3, 14} <= set(sel.indices) and sel.indices[0] == 0 and sel.indices[-1] == len(kinds) - 1


def test_near_duplicate_neighbours_dropped(tmp_path):
    same = make_png(tmp_path / "same.png", 7)
    steps = [Step(screenshot=make_png(tmp_path / "a.png", 1), action="tap(a)")]
    steps += [Step(screenshot=same, action="wait()", action_type="wait") for _ in range(3)]
    steps += [Step(screenshot=make_png(tmp_path / "z.png", 9), action="finish()", action_type="answer")]
    t = Trajectory(id="d", instruction="i", steps=steps)
    sel = select_context(t, "general", 10, thumbnail_fingerprint, thumbnails_close)
    assert sel.indices == [0, 3, 4] and sel.dropped_duplicates == [1, 2]
    assert select_context(t, "general", 10).indices == [0, 1, 2, 3, 4]  # no fingerprint, no dedupe


def test_budget_validated(long_traj):
    with pytest.raises(ValueError):
        select_context(long_traj, "general", 1)


def test_info_query_frames_where_the_answer_is_read_and_the_frame_before():
    kinds = ["tap", "read", "tap", "answer"]
    assert _family_bonus("info_query", kinds, [0, 1, 2, 3]) == {
        1: (4, "answer read here"), 0: (3.5, "answer read here"),
        3: (4, "answer read here"), 2: (3.5, "answer read here")}
    # only candidate frames get a bonus: step 1 is not one, its previous candidate frame is
    assert _family_bonus("info_query", kinds, [0, 2, 3]) == {
        0: (3.5, "answer read here"), 3: (4, "answer read here"), 2: (3.5, "answer read here")}
    # a higher bonus is never lowered by a later, smaller one
    assert _family_bonus("info_query", ["tap", "read", "read"], [0, 1, 2]) == {
        1: (4, "answer read here"), 0: (3.5, "answer read here"), 2: (4, "answer read here")}


def test_transfer_source_and_sink_sides():
    kinds = ["tap", "transfer", "tap", "type", "tap"]
    assert _family_bonus("transfer", kinds, [0, 1, 2, 3, 4]) == {
        1: (4, "source side"), 3: (4, "sink side"), 4: (4, "sink side")}
    # one transfer action is both sides: the first reason given is kept on a tie
    assert _family_bonus("transfer", ["tap", "submit"], [0, 1]) == {1: (4, "source side")}
    assert _family_bonus("transfer", ["tap", "tap"], [0, 1]) == {}


def test_state_navigation_composite_and_result_frames():
    assert _family_bonus("state_navigation", ["tap"] * 5, [0, 1, 2, 3, 4]) == {
        2: (3, "final-state anchor"), 3: (3, "final-state anchor"), 4: (3, "final-state anchor")}
    assert _family_bonus("composite_workflow", ["tap"] * 8, list(range(8))) == {
        2: (2, "sub-goal coverage"), 4: (2, "sub-goal coverage"), 6: (2, "sub-goal coverage")}
    assert _family_bonus("composite_workflow", ["tap"], [0]) == {0: (2, "sub-goal coverage")}
    for family in ("communication", "delete_cleanup", "create_modify"):
        assert _family_bonus(family, ["tap", "type", "tap", "delete", "submit"], [0, 1, 2, 3, 4]) == {
            2: (2.5, "result of type"), 4: (2.5, "result of delete")}
    assert _family_bonus("other", ["read", "submit"], [0, 1]) == {}
    assert _family_bonus("info_query", ["tap"], [0]) == {}


def _representatives(screens: str) -> list[int]:
    """The representative frame of each frame, for frames whose screens are the given letters."""
    traj = Trajectory(id="t", instruction="x", steps=[Step(screenshot=f"{s}{i}", action="tap")
                                                       for i, s in enumerate(screens)])
    runs = _Runs(traj, list(range(len(screens))), fingerprint=lambda p: p[0], near_dup=None)
    return [runs.representative(f) for f in range(len(screens))]


def test_representative_of_a_middle_run_is_its_last_frame():
    assert _representatives("ABCCDDDE") == [0, 1, 3, 3, 6, 6, 6, 7]
    assert _representatives("AABCC") == [0, 0, 2, 4, 4]


def _typed(types):
    return Trajectory(id="t", instruction="x", steps=[
        Step(screenshot=f"s{i}.png", action=f"{t}('x')", action_type=t) for i, t in enumerate(types)])


def test_score_frames_before_and_after_high_signal_actions():
    assert _score_frames(_typed(["tap", "type", "tap", "read", "answer"]), "general", [0, 1, 2, 3, 4]) == {
        1: (4, "before type"), 2: (4.5, "after type"), 3: (3, "before read"), 4: (6, "before answer")}
    # a higher score is never lowered by a later action's smaller one
    assert _score_frames(_typed(["tap", "answer", "read", "tap"]), "general", [0, 1, 2, 3]) == {
        1: (6, "before answer"), 2: (6.5, "after answer"), 3: (3.5, "after read")}
    # only candidate frames are scored; the next candidate frame gets the "after" score
    assert _score_frames(_typed(["tap", "type", "tap", "tap"]), "general", [0, 2, 3]) == {2: (4.5, "after type")}


def test_score_frames_adds_the_family_bonus_with_its_reason():
    assert _score_frames(_typed(["tap", "read", "tap"]), "info_query", [0, 1, 2]) == {
        1: (7, "answer read here"), 0: (3.5, "answer read here"), 2: (3.5, "after read")}


def test_on_a_tie_the_first_action_names_the_frame():
    # steps 1 and 2 are not candidate frames; both actions put 4.5 on frame 3
    traj = _typed(["tap", "type", "toggle", "tap"])
    assert _score_frames(traj, "general", [0, 3]) == {3: (4.5, "after type")}


def test_composite_coverage_on_short_trajectories():
    assert _family_bonus("composite_workflow", ["tap"] * 2, [0, 1]) == {
        0: (2, "sub-goal coverage"), 1: (2, "sub-goal coverage")}
    assert _family_bonus("composite_workflow", ["tap"] * 3, [0, 1, 2]) == {
        0: (2, "sub-goal coverage"), 1: (2, "sub-goal coverage"), 2: (2, "sub-goal coverage")}


def test_one_repeated_screen_is_shown_by_its_final_frame():
    assert _representatives("AAAA") == [3, 3, 3, 3]


def test_selection_reasons_and_dropped_duplicates_are_exact():
    import pytest

    steps = [Step(screenshot=f"{s}{i}", action=f"{t}('x')", action_type=t)
             for i, (s, t) in enumerate(zip("ABBBCD", ["tap", "type", "tap", "tap", "tap", "tap"]))]
    traj = Trajectory(id="t", instruction="x", steps=steps)
    sel = select_context(traj, budget=4, fingerprint=lambda p: p[0])
    # frame 1 (typed) stands for the run 1-3, shown by its settled frame 3; frame 2 ("after type")
    # is dropped as a duplicate; frame 4 fills the budget on coverage alone
    assert sel.indices == [0, 3, 4, 5]
    assert sel.reasons == {0: "first frame", 3: "after type (settled frame of a repeated screen)",
                           4: "coverage", 5: "final frame"}
    assert sel.dropped_duplicates == [1, 2]
    # without dedupe: the default family adds no bonus, and the budget defaults to 10
    assert select_context(traj).indices == [0, 1, 2, 3, 4, 5]
    with pytest.raises(ValueError) as ei:
        select_context(traj, budget=1)
    assert str(ei.value) == "budget must be at least 2 (first and final frame), got 1"


def test_result_frames_after_submit_delete_and_type():
    for family in ("communication", "delete_cleanup", "create_modify"):
        assert _family_bonus(family, ["submit", "tap"], [0, 1]) == {1: (2.5, "result of submit")}
        assert _family_bonus(family, ["delete", "tap"], [0, 1]) == {1: (2.5, "result of delete")}


def _named_screens(screens):
    return Trajectory(id="t", instruction="x", steps=[Step(screenshot=s, action="tap") for s in screens])


def test_exact_fingerprints_merge_only_equal_screens():
    # positions 3-4 show the same screen (exact fingerprint equality, no near_dup given)
    t = _named_screens(["a", "b", "c", "d", "d", "e"])
    sel = select_context(t, budget=4, fingerprint=lambda p: p)
    assert sel.indices == [0, 2, 4, 5] and sel.dropped_duplicates == [3]
    assert select_context(t, budget=4).indices == [0, 3, 4, 5]


def test_near_dup_decides_instead_of_equality():
    t = _named_screens(["10", "20", "30", "40", "41", "70"])
    fp = int
    close = select_context(t, budget=4, fingerprint=fp, near_dup=lambda a, b: abs(a - b) <= 1)
    assert close.indices == [0, 2, 4, 5] and close.dropped_duplicates == [3]
    exact = select_context(t, budget=4, fingerprint=fp)
    assert exact.indices == [0, 3, 4, 5] and exact.dropped_duplicates == []


def test_thumbnail_fingerprint_is_a_32px_box_averaged_grey_thumbnail(tmp_path):
    im = Image.new("RGB", (64, 64), (255, 255, 255))
    for x in range(0, 64, 2):
        for y in range(64):
            im.putpixel((x, y), (0, 0, 0))
    im.putpixel((1, 1), (0, 0, 0))
    path = tmp_path / "a.png"
    im.save(path)
    fp = thumbnail_fingerprint(str(path))
    assert len(fp) == 32 * 32
    assert fp == im.convert("L").resize((32, 32), Image.BOX).tobytes()
    assert fp[0] == 64 and fp[1] == 128  # a 2x2 box average, not a resampling filter's
    assert len(thumbnail_fingerprint(str(path), size=8)) == 64


def test_thumbnails_close_threshold():
    assert thumbnails_close(b"", b"") is True
    assert thumbnails_close(bytes([10, 20]), bytes([16, 14])) is True
    assert thumbnails_close(bytes([10, 20]), bytes([17, 20])) is False
    assert thumbnails_close(bytes([10]), bytes([10, 10])) is False
    assert thumbnails_close(bytes([10, 20]), bytes([17, 20]), tol=7) is True


DEDUPE = (thumbnail_fingerprint, thumbnails_close)


def _shaded(tmp_path, shades, actions=None, types=None):
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
    t = _shaded(tmp_path, [*range(1, 14), *[50] * 12],
              types={i: "wait" for i in range(13, 25)})
    sel = select_context(t, "state_navigation", 10, *DEDUPE)
    assert len(sel.indices) == 10
    assert sel.indices[0] == 0 and sel.indices[-1] == 24 and sel.indices == sorted(sel.indices)
    # exactly one frame of the idle run (the final one), all others distinct screens
    assert [i for i in sel.indices if i >= 13] == [24]
    assert len({open(p, "rb").read() for p in _screens(t, sel)}) == 10
    assert set(sel.dropped_duplicates) <= set(range(13, 24)) and sel.dropped_duplicates


def test_idle_tail_is_refilled_whatever_the_family(tmp_path):
    t = _shaded(tmp_path, [*range(1, 14), *[50] * 12])
    for family in ("general", "info_query", "transfer", "composite_workflow", "create_modify"):
        sel = select_context(t, family, 10, *DEDUPE)
        assert len(sel.indices) == 10 and sel.indices[0] == 0 and sel.indices[-1] == 24, family
        assert [i for i in sel.indices if i >= 13] == [24], family


def test_short_trajectory_keeps_every_frame(tmp_path):
    t = _shaded(tmp_path, [1, 2, 3, 4])
    assert select_context(t, "general", 10, *DEDUPE).indices == [0, 1, 2, 3]
    assert select_context(t, "general", 10).indices == [0, 1, 2, 3]


def test_fewer_distinct_screens_than_budget_gives_all_distinct(tmp_path):
    # screens: A A B B B C C D -> 4 distinct; first frame stands for its run, other runs by their last frame
    t = _shaded(tmp_path, [1, 1, 2, 2, 2, 3, 3, 4])
    sel = select_context(t, "general", 10, *DEDUPE)
    assert sel.indices == [0, 4, 6, 7]
    assert sel.dropped_duplicates == [1, 2, 3, 5]


def test_run_is_shown_by_its_settled_frame_with_the_candidate_reason(tmp_path):
    # the submit happens at step 3; its result screen appears at 4 and settles over 4-6
    t = _shaded(tmp_path, [1, 2, 3, 4, 9, 9, 9, 5, 6], actions={3: "tap(Save)"})
    sel = select_context(t, "general", 4, *DEDUPE)
    assert sel.indices[0] == 0 and sel.indices[-1] == 8 and len(sel.indices) == 4
    assert 6 in sel.indices and 4 not in sel.indices and 5 not in sel.indices
    assert "after submit" in sel.reasons[6]


def test_first_and_final_always_in_and_order_kept(tmp_path):
    # a long trajectory whose high-signal actions sit in the middle
    shades = list(range(1, 31))
    t = _shaded(tmp_path, shades, actions={10: "tap(Send)", 20: "tap(Save)"},
              types={15: "type"})
    for budget in (2, 3, 5, 10):
        for fp in (DEDUPE, ()):
            sel = select_context(t, "communication", budget, *fp)
            assert sel.indices[0] == 0 and sel.indices[-1] == 29
            assert sel.indices == sorted(set(sel.indices)) and len(sel.indices) == budget
    sel = select_context(t, "communication", 10, *DEDUPE)
    assert {10, 11, 15, 20, 21} <= set(sel.indices)  # high-signal actions and their results kept


def test_first_and_final_kept_when_all_frames_identical(tmp_path):
    t = _shaded(tmp_path, [7] * 6)
    sel = select_context(t, "general", 10, *DEDUPE)
    assert sel.indices == [0, 5] and sel.dropped_duplicates == [1, 2, 3, 4]


def test_first_frame_repeats_are_not_shown_twice(tmp_path):
    t = _shaded(tmp_path, [1, 1, 1, 2, 3])
    sel = select_context(t, "general", 10, *DEDUPE)
    assert sel.indices == [0, 3, 4] and sel.dropped_duplicates == [1, 2]


def test_same_screen_apart_in_time_is_kept(tmp_path):
    # A B A: returning to a screen is evidence; only consecutive repeats are merged
    t = _shaded(tmp_path, [1, 2, 1, 3])
    assert select_context(t, "general", 10, *DEDUPE).indices == [0, 1, 2, 3]


def test_only_needed_frames_are_fingerprinted(tmp_path):
    t = _shaded(tmp_path, list(range(1, 41)))
    seen = []

    def fp(path):
        seen.append(path)
        return thumbnail_fingerprint(path)

    sel = select_context(t, "general", 5, fp, thumbnails_close)
    assert len(sel.indices) == 5
    assert len(seen) == len(set(seen)) < 20  # each decoded once, and far fewer than all 40


def test_without_fingerprint_nothing_is_merged(tmp_path):
    t = _shaded(tmp_path, [*range(1, 14), *[50] * 12], types={i: "wait" for i in range(13, 25)})
    sel = select_context(t, "general", 10)
    assert len(sel.indices) == 10 and sel.dropped_duplicates == []


def test_unreadable_frame_is_an_error(tmp_path):
    t = _shaded(tmp_path, [1, 2, 3])
    t.steps[1].screenshot = str(tmp_path / "missing.png")
    with pytest.raises(OSError):
        select_context(t, "general", 10, *DEDUPE)
