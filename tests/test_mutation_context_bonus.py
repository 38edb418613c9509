"""Exact values of the family bonuses that steer frame selection (§4.3: frames around high-signal
actions), and of the representative frame of a run of repeated screens."""
from adaptrubric_local.context import (
    _family_bonus,
    _Runs,
    _score_frames,
    select_context,
)
from adaptrubric_local.types import Step, Trajectory


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


def _traj(types):
    return Trajectory(id="t", instruction="x", steps=[
        Step(screenshot=f"s{i}.png", action=f"{t}('x')", action_type=t) for i, t in enumerate(types)])


def test_score_frames_before_and_after_high_signal_actions():
    assert _score_frames(_traj(["tap", "type", "tap", "read", "answer"]), "general", [0, 1, 2, 3, 4]) == {
        1: (4, "before type"), 2: (4.5, "after type"), 3: (3, "before read"), 4: (6, "before answer")}
    # a higher score is never lowered by a later action's smaller one
    assert _score_frames(_traj(["tap", "answer", "read", "tap"]), "general", [0, 1, 2, 3]) == {
        1: (6, "before answer"), 2: (6.5, "after answer"), 3: (3.5, "after read")}
    # only candidate frames are scored; the next candidate frame gets the "after" score
    assert _score_frames(_traj(["tap", "type", "tap", "tap"]), "general", [0, 2, 3]) == {2: (4.5, "after type")}


def test_score_frames_adds_the_family_bonus_with_its_reason():
    assert _score_frames(_traj(["tap", "read", "tap"]), "info_query", [0, 1, 2]) == {
        1: (7, "answer read here"), 0: (3.5, "answer read here"), 2: (3.5, "after read")}


def test_on_a_tie_the_first_action_names_the_frame():
    # steps 1 and 2 are not candidate frames; both actions put 4.5 on frame 3
    traj = _traj(["tap", "type", "toggle", "tap"])
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
