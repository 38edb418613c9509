"""The review page's content without a browser: outcomes, the highlighted verdict block, the
screenshots the run selected (the same ones the verifier was sent) with reasons, frames left out,
thumbnails that are small files, trajectory text that travels only as escaped data, and the
`review` command. The page in a real browser: tests/test_review_browser.py."""
import json
from pathlib import Path

import pytest
from PIL import Image

from adaptrubric_local import AdaptRubric, FakeEngine, PipelineConfig, Verdict
from adaptrubric_local.cli import main
from adaptrubric_local.evaluation import review, review_page
from adaptrubric_local.scoring import score_file

from conftest import canonical_record, write_jsonl

XSS = '</script><script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'


def test_outcomes_and_error_confidence():
    cases = [(Verdict(score=1, label=0, p_success=0.9), "FP", 0.9),
             (Verdict(score=0, label=1, p_success=0.3), "FN", 0.7),
             (Verdict(score=1, label=1, p_success=0.8), "TP", pytest.approx(0.2)),
             (Verdict(score=0, label=0), "TN", None),
             (Verdict(status="unparsed", label=1, p_success=0.6), "unparsed", 0.4),
             (Verdict(status="error", label=0), "error", None), (Verdict(score=1), "unlabelled", None)]
    for v, out, conf in cases:
        assert review.outcome(v) == out
        assert review.error_confidence(v) == conf


def test_block_span_marks_the_block_the_parser_read():
    raw = ("SCORE: 0 was my first idea.\nLet me look again.\n**SCORE:** 1\nEVIDENCE_SUFFICIENT: yes\n"
           "MISSING_EVIDENCE: none\nThanks!")
    v = Verdict(status="ok", score=1, raw=raw)
    s, e = review.block_span(v)
    assert raw[s:e] == "**SCORE:** 1\nEVIDENCE_SUFFICIENT: yes\nMISSING_EVIDENCE: none"
    assert review.block_span(Verdict(status="unparsed", raw=raw)) is None
    assert review.block_span(Verdict(status="ok", score=1, raw=raw + "\n\n----- sample -----\n" + raw)) is None


@pytest.fixture
def scored(tmp_path):
    """12-step trajectories scored through the pipeline with a 4-screenshot budget, one with a hostile answer."""
    recs = [canonical_record(tmp_path, f"t{i}", 12, instruction=f"Add 'hello' to the top of note{i}.txt",
                             label=i % 2, platform="android" if i < 3 else "web") for i in range(4)]
    recs[1]["answer"] = XSS
    recs[1]["steps"][5].update(action="type('hello')", action_type="type", text="hello")
    recs[1]["steps"][6].update(action="tap(Save)", action_type="tap")
    data = write_jsonl(tmp_path / "d.jsonl", recs)
    sent = {}

    def script(req):
        if req.kind == "route":
            return "CATEGORY: create_modify"
        if req.kind == "cue":
            return "CUE_1: Check that hello is on the first line."
        sent[req.tag] = list(req.images)
        return "I checked <b>everything</b>.\nSCORE: 1\nEVIDENCE_SUFFICIENT: yes\nMISSING_EVIDENCE: none"

    vfile = tmp_path / "v.jsonl"
    score_file(AdaptRubric(FakeEngine(script=script), PipelineConfig(max_images=4)), data, vfile, progress=False)
    return data, vfile, sent


def test_cards_show_what_the_verifier_was_sent(scored, tmp_path):
    data, vfile, sent = scored
    from adaptrubric_local.evaluation.harness import run_review

    res = run_review(vfile, tmp_path / "r", data)
    assert res["confusion"] == {"tp": 2, "fp": 2, "tn": 0, "fn": 0}
    cards = _cards(tmp_path / "r")
    assert [c["id"] for c in cards] == ["t0", "t1", "t2", "t3"]
    for c in cards:
        assert [f["step"] for f in c["selected"]] == [_step(p) for p in sent[c["id"]]]  # the same frames, in order
        assert len(c["selected"]) == 4 and len(c["left_out"]) == 8 and not c["notes"]
        assert c["selected"][0]["reason"] == "first frame" and c["selected"][-1]["reason"] == "final frame"
        assert {f["why"] for f in c["left_out"]} == {"not selected"}
        assert c["family"] == "create_modify" and c["cues"] == ["Check that hello is on the first line."]
        assert c["outcome"] == ("TP" if c["label"] == 1 else "FP")
        s, e = c["block"]
        assert c["raw"][s:e].startswith("SCORE: 1") and c["raw"][:s] == "I checked <b>everything</b>.\n"
    t1 = cards[1]
    # create_modify keeps the frames after typing (step 6) and saving (step 7), with the selector's reasons
    assert [(f["step"], f["reason"]) for f in t1["selected"]][1:3] == [(7, "result of type"), (8, "result of submit")]
    assert t1["evidence"]["agent_answer"] == json.dumps(XSS)
    assert t1["platform"] == "android" and cards[3]["platform"] == "web"


def _step(path):
    return int(Path(path).stem.split("_")[1]) + 1


def _cards(out):
    cards = []
    for f in sorted((out / "review_files" / "cards").glob("*.js")):
        text = f.read_text()
        body = text[text.index(",") + 1: text.rindex(")")]
        cards += json.loads(body)
    return cards


def test_trajectory_text_is_data_never_markup(scored, tmp_path):
    data, vfile, _ = scored
    from adaptrubric_local.evaluation.harness import run_review

    run_review(vfile, tmp_path / "r", data)
    files = tmp_path / "r" / "review_files"
    data_files = [files / "index.js", *(files / "cards").glob("*.js")]
    text = "".join(f.read_text() for f in data_files)
    assert "<" not in text  # JSON strings carry '<' as \u003c: nothing in them can close or open a tag
    assert "\\u003c/script>\\u003cscript>window.__pwned = 1" in text and "\\u003cb>everything" in text
    page = (tmp_path / "r" / "review.html").read_text()
    assert page.count("<script") == 3 and "script-src 'self'" in page and "window.__pwned" not in page
    own = ("index.js", "review_labels.js", "review.js")
    assert all(f'<script src="review_files/{n}"></script>' in page for n in own)
    for name in ("review.js", "review_labels.js"):
        js = (tmp_path / "r" / "review_files" / name).read_text()
        assert "innerHTML" not in js and "insertAdjacentHTML" not in js and "document.write" not in js


def test_thumbnails_are_small_files_and_missing_images_are_named(scored, tmp_path):
    data, vfile, _ = scored
    big = tmp_path / "img" / "t2_0.png"
    Image.new("RGB", (1080, 2400), (200, 10, 10)).save(big)
    (tmp_path / "img" / "t3_11.png").unlink()  # a screenshot removed after scoring
    assert main(["review", str(data), "--verdicts", str(vfile), "--out", str(tmp_path / "r"), "--quiet"]) == 0
    cards = {c["id"]: c for c in _cards(tmp_path / "r")}
    thumbs = list((tmp_path / "r" / "review_files" / "thumbs").glob("*.jpg"))
    assert len(thumbs) == 4 * 4 - 1
    for t in thumbs:
        with Image.open(t) as im:
            assert max(im.size) <= 240
    first = cards["t2"]["selected"][0]
    with Image.open(tmp_path / "r" / first["thumb"]) as im:
        assert im.size == (108, 240)  # 1080x2400 scaled into the 240 px box
    assert (tmp_path / "r" / first["href"]).resolve() == big.resolve()  # links to the original, page-relative
    last = cards["t3"]["selected"][-1]
    assert last["thumb"] is None and last["missing"] == "screenshot file not found"
    assert not list((tmp_path / "r").rglob("*.png"))  # no screenshot copied or inlined


def test_a_changed_selection_is_reported(scored, tmp_path):
    data, vfile, _ = scored
    cfg = json.loads((tmp_path / "v.config.json").read_text())
    (tmp_path / "v.config.json").write_text(json.dumps({**cfg, "max_images": 6}))
    from adaptrubric_local.evaluation.harness import run_review

    run_review(vfile, tmp_path / "r", data)
    note = _cards(tmp_path / "r")[0]["notes"][0]
    assert "saw 4 screenshot(s)" in note and "has 6" in note


def test_error_and_missing_verdicts_get_cards_and_extra_ids_are_refused(tmp_path):
    recs = [canonical_record(tmp_path, "a", 3, label=1), canonical_record(tmp_path, "b", 3, label=0)]
    data = write_jsonl(tmp_path / "d.jsonl", recs)
    verdicts = [Verdict(id="a", status="error", error="d.jsonl, record a: boom"), Verdict(id="ghost", score=1, raw="x")]
    vfile = write_jsonl(tmp_path / "v.jsonl", [json.dumps(v.to_dict()) for v in verdicts])
    from adaptrubric_local.evaluation.harness import run_review

    with pytest.raises(ValueError, match=r"verdicts for 1 id\(s\) that are not in .*d.jsonl \(first: ghost\)"):
        run_review(vfile, tmp_path / "r", data)
    res = run_review(vfile, tmp_path / "r", data, allow_extra=True)
    a, b = _cards(tmp_path / "r")  # the ghost is left out; b, which has no verdict, gets a card
    assert a["outcome"] == "error" and a["error"].endswith("boom") and len(a["selected"]) == 3
    assert "names no family" in a["notes"][0]
    assert b["id"] == "b" and b["outcome"] == "missing" and b["instruction"] == "Turn on Wi-Fi."
    assert "no verdict for this trajectory" in b["notes"][0] and len(b["selected"]) == 3
    assert res["counts"]["missing"] == 1 and res["coverage"]["extra"] == ["ghost"]


def test_index_rows_and_chunks(tmp_path):
    cards = [{"id": f"x{i}", "instruction": "do it", "platform": None, "family": "general", "status": "ok",
              "outcome": "TN", "p_success": 0.1, "error_confidence": 0.1, "label": 0, "score": 0, "selected": [],
              "left_out": [], "p_success_calibrated": None} for i in range(60)]
    review_page.write_review(tmp_path, cards)
    chunks = sorted((tmp_path / "review_files" / "cards").glob("*.js"))
    assert [c.name for c in chunks] == ["00000.js", "00001.js", "00002.js"]
    index = json.loads((tmp_path / "review_files" / "index.js").read_text().split("=", 1)[1].rstrip().rstrip(";"))
    assert index["n"] == 60 and index["counts"]["TN"] == 60 and index["rows"][59][index["columns"].index("chunk")] == 2
    assert index["rows"][0][index["columns"].index("platform")] == "unknown"
    review_page.write_review(tmp_path, cards[:10])  # rewriting leaves no stale chunk behind
    assert len(list((tmp_path / "review_files" / "cards").glob("*.js"))) == 1


def test_the_prompt_on_a_card_is_the_one_the_engine_was_sent(tmp_path):
    """Rubric, meta rule, cue block (cues written, or the writer abstaining) and evidence: the card's
    prompt, rebuilt from the page's files (shared paragraphs stored once), is the request's text."""
    from adaptrubric_local.evaluation.harness import run_review

    def prompt_text(prompt: dict, parts: list[str]) -> tuple[str, str]:  # (text, suffix) as the page rebuilds them
        def part(x):
            return parts[x] if isinstance(x, int) else x

        return "\n\n".join(part(x) for x in prompt["text"]), part(prompt["suffix"])

    recs = [canonical_record(tmp_path, f"t{i}", 5, instruction=f"Add 'hello' to note{i}.txt", label=1)
            for i in range(3)]
    data = write_jsonl(tmp_path / "d.jsonl", recs)
    sent = {}

    def script(req):
        if req.kind == "route":
            return "CATEGORY: create_modify"
        if req.kind == "cue":
            return "NO_HINT" if "note1" in req.prompt else "CUE_1: Check that hello is on the first line."
        sent[req.tag] = (req.prompt, req.suffix)
        return "SCORE: 1\nEVIDENCE_SUFFICIENT: yes\nMISSING_EVIDENCE: none"

    vfile = tmp_path / "v.jsonl"
    score_file(AdaptRubric(FakeEngine(script=script), PipelineConfig(max_images=3)), data, vfile, progress=False)
    run_review(vfile, tmp_path / "r", data)
    text = (tmp_path / "r" / "review_files" / "index.js").read_text()
    parts = json.loads(text[text.index("=") + 1:].rstrip().rstrip(";"))["prompt_parts"]
    assert parts and any("META RULE" in x for x in parts)  # the shared rubric paragraphs are stored once
    cards = _cards(tmp_path / "r")
    for c in cards:
        assert prompt_text(c["prompt"], parts) == sent[c["id"]], c["id"]
        assert c["prompt"]["images"] == 3 and c["answer"] is None
    assert "hello is on the first line" in sent["t0"][0] and "hello is on the first line" not in sent["t1"][0]
    cfg = json.loads((tmp_path / "v.config.json").read_text())
    cfg["prompts_sha"] = "0" * 16  # a run scored with another prompt set: the page says so
    (tmp_path / "v.config.json").write_text(json.dumps(cfg))
    run_review(vfile, tmp_path / "r2", data)
    text = (tmp_path / "r2" / "review_files" / "index.js").read_text()
    assert any("prompt set had sha 0000000000000000" in n
               for n in json.loads(text[text.index("=") + 1:].rstrip().rstrip(";"))["notes"])


def test_review_prints_the_pages_own_counts(tmp_path, capsys):
    """Nothing parsed: the page shows unparsed 10 and no FN/TN, and so does the terminal (the headline,
    which counts unparsed verdicts as SCORE 0, is printed apart and named as such)."""
    recs = [canonical_record(tmp_path, f"t{i}", 2, label=int(i < 9)) for i in range(10)]
    data = write_jsonl(tmp_path / "d.jsonl", recs)
    verdicts = [Verdict(id=f"t{i}", status="unparsed", raw="noise") for i in range(10)]
    vfile = write_jsonl(tmp_path / "v.jsonl", [json.dumps(v.to_dict()) for v in verdicts])
    assert main(["review", str(data), "--verdicts", str(vfile), "--out", str(tmp_path / "r"), "--quiet"]) == 0
    first, second = capsys.readouterr().out.splitlines()[:2]
    index = json.loads((tmp_path / "r" / "review_files" / "index.js").read_text().split("=", 1)[1].rstrip().rstrip(";"))
    printed = dict(kv.split("=") for kv in first.split("(")[0].split()[2:])
    assert printed == {k: str(v) for k, v in index["counts"].items() if k not in ("missing", "unlabelled")}
    assert first.startswith("10 cards: TP=0 FP=0 FN=0 TN=0 unparsed=10 error=0 ")
    assert second.startswith("eval's headline counts unparsed") and second.endswith("FN=9 TN=1")
