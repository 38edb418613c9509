"""A cascade run that streams its data (cascade/scorer.py `Cascade.iter_ready`, cli/cascade.py, the
`cascade` summary from verdict_file.iter_last_lines, `score --shard` with a judge and `merge-shards`):
the cascade takes trajectories as the student asks for them and holds only those in flight, the summary
and the resume's failed lines read line by line equal what the whole file gives, and two shards with a
judge merge into one run's lines. The command-line runs use test_cascade.py's scripted servers."""
import gc
import json
import weakref
from collections import Counter, deque

import pytest
from test_cascade import _fake, _lines, _score, make_data, start_servers

from adaptrubric_local.audit.verdict import wilson
from adaptrubric_local.cascade.report import agree, cascade_summary, estimate
from adaptrubric_local.cascade.scorer import Cascade
from adaptrubric_local.cli import main
from adaptrubric_local.cli.cascade import failed_lines
from adaptrubric_local.formats import load_trajectories
from adaptrubric_local.pipeline import AdaptRubric, PipelineConfig
from adaptrubric_local.verdict_file import iter_last_lines

from conftest import make_png, write_jsonl

BATCH_COSTS = ("cost_calls", "cost_tokens")  # shared out over a batch: a shard's batches are other ones


@pytest.fixture
def run(tmp_path):
    """test_cascade.py's six trajectories and its student and judge servers."""
    data = make_data(tmp_path)
    s, j = start_servers(data)
    yield data, s, j
    s.close()
    j.close()


def _trajs(tmp_path, n):
    recs = []
    for i in range(n):
        make_png(tmp_path / f"s{i}.png", seed=i)
        recs.append({"id": f"r{i}", "instruction": f"Open it (r{i}).", "steps": [{"screenshot": f"s{i}.png"}]})
    return load_trajectories(write_jsonl(tmp_path / "d.jsonl", recs)).trajectories


def _feed(trajs, refs: list, pulled: list):
    """The trajectories one at a time, the caller holding none of them (weak references only)."""
    left = deque(trajs)
    trajs.clear()
    while left:
        t = left.popleft()
        refs.append(weakref.ref(t))
        pulled[0] += 1
        yield t


def _cascade(spot_check: float, band=(0.0, 0.0)):
    truth = {f"r{i}": i % 2 for i in range(12)}
    cfg = PipelineConfig(router="rules", fine=False, trajectories_per_batch=2)
    return Cascade(AdaptRubric(_fake({**truth, "r0": 1}), cfg), AdaptRubric(_fake(truth), cfg), band, spot_check)


def test_the_cascade_takes_trajectories_as_the_student_asks_and_holds_only_those_in_flight(tmp_path):
    refs, pulled, alive, first = [], [0], [], None
    for _ in _cascade(0.0).iter_ready(_feed(_trajs(tmp_path, 12), refs, pulled)):  # nothing escalates
        first = pulled[0] if first is None else first
        gc.collect()
        alive.append(sum(r() is not None for r in refs))
    assert first == 2 and max(alive) <= 2  # one student batch, not the data

    for spot in (0.5, 1.0):  # escalated lines wait for the judge: the same lines as from a list, none kept after
        whole = {v.id: v for ready in _cascade(spot).iter_ready(_trajs(tmp_path, 12)) for v in ready}
        refs, pulled = [], [0]
        streamed = [v for ready in _cascade(spot).iter_ready(_feed(_trajs(tmp_path, 12), refs, pulled)) for v in ready]
        assert len(streamed) == 12 and {v.id: v for v in streamed} == whole
        assert Counter(v.decided_by for v in streamed)["judge"] == sum(1 for v in streamed if v.escalated) >= 5
        assert whole["r0"].score == (0 if whole["r0"].escalated else 1)  # the judge corrects the student's r0
        gc.collect()
        assert not any(r() is not None for r in refs)


def test_a_judge_slower_than_the_student_holds_it_back_so_the_waiting_trajectories_stay_few(tmp_path):
    import time

    cascade = _cascade(0.0, band=(0.0, 1.0))  # every verdict goes to the judge
    cascade.max_waiting = 4
    generate = cascade.judge.engine.generate

    def slow(requests, **kw):
        time.sleep(0.1)
        return generate(requests, **kw)

    cascade.judge.engine.generate = slow
    refs, pulled, alive = [], [0], []
    lines = []
    for ready in cascade.iter_ready(_feed(_trajs(tmp_path, 12), refs, pulled)):
        lines += ready
        gc.collect()
        alive.append(sum(r() is not None for r in refs))
    assert len(lines) == 12 and all(v.decided_by == "judge" for v in lines)
    assert max(alive) <= 4 + 2  # the judge's waiting trajectories and the student's batch, not the data


def test_iter_last_lines_gives_the_last_line_of_each_id(tmp_path):
    p = tmp_path / "v.jsonl"
    lines = [{"id": "a", "n": 1}, {"id": 7, "n": 2}, {"id": "b", "n": 3}, {"n": 4, "id": "a"}, {"id": "c", "n": 5},
             {"id": "b", "n": 6}, {"id": "é", "n": 7}, {"id": "b", "n": 8}]
    p.write_text("\n".join(json.dumps(d, ensure_ascii=False) for d in lines) + "\n\n" + '{"id": "d", "n"')  # torn
    assert [d["n"] for d in iter_last_lines(p)] == [4, 2, 8, 5, 7]
    once = tmp_path / "once.jsonl"
    once.write_text("".join(json.dumps(d) + "\n" for d in lines[:3]))
    assert list(iter_last_lines(once)) == lines[:3] and list(iter_last_lines(tmp_path / "none.jsonl")) == []
    (tmp_path / "bad.jsonl").write_text('{"id": "a"}\nnot json\n')
    with pytest.raises(ValueError, match="bad.jsonl: line 2"):
        list(iter_last_lines(tmp_path / "bad.jsonl"))


def read_last_lines(path) -> dict:
    return {str(d["id"]): d for d in iter_last_lines(path)}


def _whole_file_summary(lines) -> dict:
    """The cascade section as it was made before it streamed: every line held, then counted."""
    lines = [d for d in lines if d.get("decided_by")]
    n = len(lines)
    sent = [d for d in lines if d.get("escalated")]
    by_judge = sum(d["decided_by"] == "judge" for d in lines)
    failed = [d for d in lines if d.get("judge_error")]
    judged = [d["judge"] for d in sent if d.get("judge")]
    answered = [j for j in judged if j.get("status") == "ok"]
    why = Counter(r for d in lines for r in d.get("escalated") or [])

    def spots(only):
        return [agree(d) for d in lines if "spot_check" in (d.get("escalated") or [])
                and (not only or d["escalated"] == ["spot_check"]) and agree(d) is not None]

    per = {k: sum(j.get(k) or 0.0 for j in answered) / len(answered) if answered else None
           for k in BATCH_COSTS}
    spot_all = spots(False)
    return {"trajectories": n, "decided_by": {"student": n - by_judge, "judge": by_judge}, "sent_to_judge": len(sent),
            "judge_share": len(sent) / n if n else None,
            "why": {r: why[r] for r in ("error", "unparsed", "evidence_insufficient", "band", "spot_check") if why[r]},
            "judge_failed": len(failed), "judge_failed_by": dict(Counter(d["judge_error"].split(":", 1)[0]
                                                                         for d in failed)),
            "judge_calls": sum(j.get("cost_calls") or 0.0 for j in judged),
            "judge_tokens": sum(j.get("cost_tokens") or 0.0 for j in judged),
            "judge_only_calls_est": per["cost_calls"] * n if answered else None,
            "judge_only_tokens_est": per["cost_tokens"] * n if answered else None,
            "spot_checks": {"n": len(spot_all), "agree": sum(spot_all),
                            "student_agreement": sum(spot_all) / len(spot_all) if spot_all else None,
                            "ci95": wilson(sum(spot_all), len(spot_all))},
            "cascade_agreement_est": estimate(n, n - by_judge, spots(True))}


def test_the_summary_and_the_failed_lines_read_line_by_line_equal_the_whole_files(run, tmp_path):
    (path, final, _, _), s, j = run
    j.stub.down = {final["t20"], final["t01"]}
    out = tmp_path / "v.jsonl"
    flags = ("--escalate-band", "0.15", "0.25", "--spot-check", "0.5")
    assert _score(path, s, j, out, *flags) == 0
    whole = read_last_lines(out)
    assert [d["id"] for d in failed_lines(out)] == [i for i, d in whole.items() if d.get("judge_error")] != []
    c = json.loads(out.with_suffix(".summary.json").read_text())["cascade"]
    assert c.pop("judge_retried_this_run") == 0 and c == _whole_file_summary(whole.values())
    assert c["judge_failed"] == 2 and c["spot_checks"]["n"] >= 1

    j.stub.down = {final["t01"]}  # the resume asks again: one answered, one failing still
    assert _score(path, s, j, out, *flags, "--resume") == 0
    whole = read_last_lines(out)
    assert sum(1 for _ in open(out)) == len(whole) + 2  # both asked again: two more lines
    assert [d["id"] for d in failed_lines(out)] == ["t01"]
    c = json.loads(out.with_suffix(".summary.json").read_text())["cascade"]
    assert c.pop("judge_retried_this_run") == 2 and c == _whole_file_summary(whole.values())
    assert c == cascade_summary(read_last_lines(out).values()) and c["judge_failed"] == 1


def _no_batch_costs(d: dict) -> dict:
    out = {k: v for k, v in d.items() if k not in BATCH_COSTS}
    for side in ("student", "judge"):
        if out.get(side):
            out[side] = _no_batch_costs(out[side])
    return out


COUNTED = ("trajectories", "decided_by", "sent_to_judge", "why", "judge_failed", "spot_checks",
           "cascade_agreement_est")


def test_two_shards_with_a_judge_merge_into_the_lines_of_one_run(run, tmp_path, capsys):
    (path, _, _, _), s, j = run
    flags = ("--escalate-band", "0.15", "0.25", "--spot-check", "0.5")
    one = tmp_path / "one.jsonl"
    assert _score(path, s, j, one, *flags) == 0
    parts = [tmp_path / f"s{i}.jsonl" for i in (1, 2)]
    for i, p in enumerate(parts, start=1):
        assert _score(path, s, j, p, *flags, "--shard", f"{i}/2") == 0
        assert json.loads(p.with_suffix(".config.json").read_text())["shard"] == f"{i}/2"
    assert sorted(len(_lines(p)) for p in parts) == [3, 3]
    capsys.readouterr()
    merged = tmp_path / "m.jsonl"
    assert main(["merge-shards", str(path), "--shards", *map(str, parts), "--out", str(merged)]) == 0
    printed = json.loads(capsys.readouterr().out)
    want = {i: _no_batch_costs(d) for i, d in _lines(one).items()}
    assert {i: _no_batch_costs(d) for i, d in _lines(merged).items()} == want
    assert sum(d["decided_by"] == "judge" for d in want.values()) >= 2  # the shards drew the same spot checks
    c_one = json.loads(one.with_suffix(".summary.json").read_text())["cascade"]
    c_merged = json.loads(merged.with_suffix(".summary.json").read_text())["cascade"]
    assert c_merged == printed["cascade"] and {k: c_merged[k] for k in COUNTED} == {k: c_one[k] for k in COUNTED}
