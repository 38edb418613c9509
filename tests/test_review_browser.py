"""The review page in a real browser: the system's headless Chromium (Debian `chromium`, never a
downloaded browser) driven by playwright, on the page of a real `adaptrubric eval` run and on the
page `make demo` writes. Checks that cards and thumbnails render (no broken image), that the outcome
filters show as many cards as metrics.json counts, that `review.html#id=...` links open their card,
that the keyboard moves between cards, that an answer holding `<script>` stays text, that 10,000
trajectories stay responsive, and the labelling: keys and clicks, a note that stays text, labels
kept over a reload and a closed tab, exported as labels.jsonl (read back by the package's strict
reader) and imported into a fresh copy of the page, whose import refuses what that reader refuses;
a card fits a laptop's screen at 1280 px with no sideways scroll; the lightbox shows the original
screenshots; the verifier prompt is the one the engine was sent.

Without Chromium or playwright these tests skip with a message; `.ci/run` installs Chromium and sets
ADAPTRUBRIC_REQUIRE_BROWSER=1 so that CI runs them instead.
"""
import json
import os
import shutil
import time
from pathlib import Path

import pytest
from browser_support import chromium

from adaptrubric_local import AdaptRubric, FakeEngine, PipelineConfig, load_trajectories
from adaptrubric_local.cli import main
from adaptrubric_local.scoring import score_file

from conftest import make_png, write_jsonl

REQUIRED = os.environ.get("ADAPTRUBRIC_REQUIRE_BROWSER") == "1"
DEMO_PAGE = Path(os.environ.get("ADAPTRUBRIC_DEMO_REVIEW", Path(__file__).resolve().parents[1] / "runs" / "demo" /
                                "eval" / "adapter" / "review.html"))
XSS = '</script><script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
HOSTILE_ID = 'hostile "id" <&>#1'
SENT: dict = {}  # id -> (prompt, suffix) the scripted engine of `run` received for the verifier call


def _skip(why: str):
    if REQUIRED:
        pytest.fail(f"{why} (ADAPTRUBRIC_REQUIRE_BROWSER=1)")
    pytest.skip(why)


@pytest.fixture(scope="module")
def browser():
    yield from chromium(_skip)


class Page:
    """A browser tab on a review page, recording script errors."""

    def __init__(self, browser, path: Path, fragment: str = ""):
        """`browser`: a Browser (a new context of its own, 1280x900) or a BrowserContext (its settings)."""
        self.tab = (browser.new_page(viewport={"width": 1280, "height": 900}) if hasattr(browser, "new_context")
                    else browser.new_page())
        self.errors = []
        self.tab.on("pageerror", lambda e: self.errors.append(str(e)))
        self.tab.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.tab.goto(path.resolve().as_uri() + fragment)
        self.ready()

    def ready(self):
        self.tab.wait_for_selector('#cards[data-state="ready"]', timeout=20_000)
        self.tab.wait_for_function("() => Array.from(document.images).every(i => i.complete)",
                                    timeout=20_000)

    def click(self, selector: str):
        self.tab.click(selector)
        self.ready()

    def ids(self):
        return self.tab.eval_on_selector_all(".card", "cs => cs.map(c => c.dataset.id)")

    def broken_images(self):
        return self.tab.evaluate("Array.from(document.images).filter(i => i.id !== 'lb-img' || i.getAttribute('src'))"
                                 ".filter(i => !i.complete || i.naturalWidth === 0).map(i => i.getAttribute('src'))")

    def foreign_scripts(self):
        """Script elements that are not the page's own files."""
        return self.tab.evaluate("Array.from(document.scripts).map(s => s.getAttribute('src') || 'INLINE: ' + "
                                 "s.textContent.slice(0, 80)).filter(s => !s.startsWith('review_files/'))")

    def close(self):
        assert not self.errors, self.errors
        self.tab.close()


# ----------------------------------------------------------------------------- a real eval run
@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """Synthetic trajectories scored through the pipeline by a scripted verifier that is wrong on some,
    unparsed on some, and a hostile record; then `adaptrubric eval`, which writes review.html."""
    from adaptrubric_local.synth import synthesize

    root = tmp_path_factory.mktemp("review_run")
    data = synthesize(root / "synth", n_tasks=8, candidates=4, size=(180, 400))
    make_png(root / "synth" / "x.png", seed=7)
    extra = [{"id": HOSTILE_ID, "instruction": "Open <b>Notes</b> & write it", "answer": XSS, "label": 0,
              "platform": "android", "steps": [{"screenshot": "x.png", "action": "tap('<i>x</i>')"},
                                               {"screenshot": "x.png", "action": "answer()", "action_type": "answer"}]}]
    with open(data, "a") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in extra)
    labels = {t.id: t.label for t in load_trajectories(data).trajectories}
    order = sorted(labels)

    def script(req):
        if req.kind != "verify":
            return FakeEngine().script(req)
        SENT[req.tag] = (req.prompt, req.suffix)
        k = order.index(req.tag)
        if k % 7 == 3:
            return "I cannot decide from these screens."
        wrong = k % 5 == 0 or req.tag == HOSTILE_ID
        s = 1 - labels[req.tag] if wrong else labels[req.tag]
        return (f"Looked at it: <script>window.__pwned = 3</script>\nSCORE: {s}\nEVIDENCE_SUFFICIENT: yes\n"
                "MISSING_EVIDENCE: none")

    vfile = root / "verdicts.jsonl"
    score_file(AdaptRubric(FakeEngine(script=script, p_score=lambda r, d: 0.85 if d == "1" else 0.2),
                           PipelineConfig(router="rules", fine=False, max_images=5)), data, vfile, progress=False)
    assert main(["eval", str(data), "--verdicts", str(vfile), "--out", str(root / "eval"), "--quiet"]) == 0
    metrics = json.loads((root / "eval" / "metrics.json").read_text())
    return root / "eval" / "review.html", metrics, data


def test_cards_and_images_render(browser, run):
    page, metrics, _data = run
    p = Page(browser, page)
    n = metrics["overall"]["n"]
    assert n == 33 and p.tab.text_content("#matches") == f"{n} of {n} trajectories match"
    assert p.tab.locator(".card").count() == 25 and "page 1 of 2" in p.tab.text_content("#pager-top")
    assert p.tab.locator(".frames img").count() >= 25 * 4 and p.broken_images() == []
    first = p.tab.locator(".card").first
    assert first.locator(".badge").text_content() == "FP"  # false positives first
    left_out = p.tab.locator(".card details.left-out")  # frames beyond the 5-screenshot budget, collapsed
    assert left_out.count() > 0 and p.tab.locator(".card details.left-out[open]").count() == 0
    assert first.locator(".frames figcaption .reason").first.text_content() == "first frame"
    assert "SCORE: " in first.locator("pre.raw-text mark").text_content()
    p.click("#pager-top button:last-child")
    assert p.tab.locator(".card").count() == n - 25 and p.broken_images() == []
    p.close()


def test_outcome_filters_count_what_metrics_json_counts(browser, run):
    page, metrics, data = run
    o = metrics["overall"]
    c = o["scored_only"]["confusion"]  # the page's TP/FP/FN/TN are parsed verdicts; unparsed ones have their own
    assert c["fp"] == o["confusion"]["fp"]  # an unanswered verdict is never a false positive
    p = Page(browser, page)
    assert c["fp"] > 0 and c["fn"] > 0 and o["unparsed"] > 0
    for outcome, expected in (("FP", c["fp"]), ("FN", c["fn"]), ("TP", c["tp"]), ("unparsed", o["unparsed"])):
        p.click(f'#outcomes button[data-outcome="{outcome}"]')
        assert p.tab.locator(".card").count() == expected, outcome
        assert set(p.tab.locator(".card .badge").all_text_contents()) == {outcome}
        assert p.tab.text_content("#matches") == f"{expected} of {o['n']} trajectories match"
    p.click('#outcomes button[data-outcome=""]')
    p.tab.select_option("#platform", "android")
    p.ready()
    assert p.tab.locator(".card").count() == min(25, o["n"])
    p.tab.select_option("#platform", "")
    word = p.tab.locator(".card .instruction").first.text_content().split()[-1].lower()
    expected = sum(word in t.instruction.lower() or word in t.id.lower() for t in load_trajectories(data).trajectories)
    p.tab.fill("#search", word.upper())
    p.tab.wait_for_function(f"() => document.querySelector('#matches').textContent.startsWith('{expected} of')")
    p.ready()
    assert 0 < expected < o["n"] and p.tab.locator(".card").count() == min(25, expected)
    assert all(word in t.lower() for t in p.tab.locator(".card .instruction").all_text_contents())
    p.close()


def test_id_links_and_keyboard(browser, run):
    page, _, _ = run
    p = Page(browser, page)
    ids = p.ids()
    p.click("#pager-top button:last-child")
    target = p.ids()[-1]  # last card of the last page
    p.close()
    from urllib.parse import quote

    p = Page(browser, page, "#id=" + quote(target, safe=""))
    card = p.tab.locator(f'.card[data-id="{target}"]')
    assert card.count() == 1 and "current" in card.get_attribute("class")
    assert "page 2 of 2" in p.tab.text_content("#pager-top")
    box, view = card.bounding_box(), p.tab.viewport_size
    assert 0 <= box["y"] < view["height"]  # scrolled into view
    p.tab.keyboard.press("k")
    prev = p.tab.locator(".card.current")
    assert prev.get_attribute("data-id") != target and p.tab.evaluate("location.hash") == "#id=" + quote(
        prev.get_attribute("data-id"), safe="")
    p.close()
    p = Page(browser, page)
    p.tab.locator(".card").nth(2).locator("a.permalink").click()
    p.ready()
    assert p.tab.locator(".card.current").get_attribute("data-id") == ids[2]
    p.tab.keyboard.press("j")
    assert p.tab.locator(".card.current").get_attribute("data-id") == ids[3]
    assert p.tab.evaluate("location.hash") == "#id=" + quote(ids[3], safe="")
    p.close()


def test_script_in_an_answer_stays_text(browser, run):
    page, _, _ = run
    from urllib.parse import quote

    p = Page(browser, page, "#id=" + quote(HOSTILE_ID, safe=""))
    card = p.tab.locator(".card.current")
    assert card.locator(".card-id").text_content() == HOSTILE_ID
    assert card.locator(".instruction").text_content() == "Open <b>Notes</b> & write it"
    answer = card.locator("dl.evidence dd").first.text_content()
    assert answer == json.dumps(XSS)  # shown as the characters the agent wrote
    assert "<script>window.__pwned = 3</script>" in card.locator("pre.raw-text").text_content()
    # no element was made from trajectory text: no script, no <b> in the instruction, no <img src=x>, no <i>
    assert card.locator("script").count() == 0 and card.locator(".instruction *, dl.evidence dd *, i").count() == 0
    assert p.tab.evaluate("window.__pwned") is None
    assert p.foreign_scripts() == [] and p.tab.locator('img[src="x"]').count() == 0
    # the page's Content-Security-Policy refuses inline scripts too
    p.tab.evaluate("(() => { const s = document.createElement('script'); s.textContent = 'window.__pwned = 4';"
                   " document.body.appendChild(s); })()")
    assert p.tab.evaluate("window.__pwned") is None
    p.errors.clear()  # the refused inline script is reported on the console
    p.close()


# ----------------------------------------------------------------------------- the page `make demo` writes
def test_demo_page(browser):
    if not DEMO_PAGE.is_file():
        if os.environ.get("ADAPTRUBRIC_REQUIRE_DEMO_REVIEW") == "1":
            pytest.fail(f"{DEMO_PAGE} is missing: `make demo` writes it")
        pytest.skip(f"{DEMO_PAGE} not there: run `make demo` first (CI does)")
    metrics = json.loads((DEMO_PAGE.parent / "metrics.json").read_text())
    o = metrics["overall"]
    p = Page(browser, DEMO_PAGE)
    assert p.tab.locator(".card").count() == min(25, o["n"]) and p.broken_images() == []
    assert p.tab.locator(".frames img").count() >= p.tab.locator(".card").count() * 2  # first and final frame at least
    c = o["scored_only"]["confusion"]
    for outcome, expected in (("FP", c["fp"]), ("TP", c["tp"]), ("TN", c["tn"]), ("unparsed", o["unparsed"])):
        p.click(f'#outcomes button[data-outcome="{outcome}"]')
        assert p.tab.text_content("#matches") == f"{expected} of {o['n']} trajectories match", outcome
        assert p.tab.locator(".card").count() == min(25, expected)
    ids = p.tab.evaluate("REVIEW_INDEX.rows.map(r => r[0])")
    p.close()
    from urllib.parse import quote

    p = Page(browser, DEMO_PAGE, "#id=" + quote(ids[-1], safe=""))
    assert p.tab.locator(".card.current").get_attribute("data-id") == ids[-1]
    assert p.foreign_scripts() == [] and p.tab.evaluate("window.__pwned") is None
    p.close()


# ----------------------------------------------------------------------------- scale
def test_ten_thousand_trajectories_stay_responsive(browser, tmp_path):
    from adaptrubric_local.evaluation.review_page import folder_bytes, write_review

    shots = [make_png(tmp_path / "img" / f"{k}.png", seed=k) for k in range(10)]
    outcomes = ["FP", "FN", "TP", "TN", "TP", "TN", "TN", "unparsed"]
    cards = []
    for i in range(10_000):
        o = outcomes[i % len(outcomes)]
        raw = "The final screen shows it.\nSCORE: 1\nEVIDENCE_SUFFICIENT: yes\nMISSING_EVIDENCE: none"
        cards.append({"id": f"traj-{i:05d}", "instruction": f"Task number {i}: turn on setting {i % 97}",
                      "platform": ["android", "web", "desktop"][i % 3], "family": "general", "route_parsed": True,
                      "cues": [], "dropped_cues": [], "status": "unparsed" if o == "unparsed" else "ok", "score": 1,
                      "p_success": (i % 100) / 100, "p_success_calibrated": None, "label": 0, "outcome": o,
                      "error_confidence": (i % 100) / 100, "evidence_sufficient": True, "missing_evidence": "none",
                      "raw": raw, "block": [27, len(raw)], "parse_error": None, "error": None, "n_images": 4,
                      "hit_cap": False, "task_id": None, "notes": [], "source": None,
                      "selected": [{"step": s + 1, "path": shots[(i + s) % 10], "action": "tap", "reason": "coverage"}
                                   for s in range(4)],
                      "left_out": [{"step": 5, "path": shots[0], "action": "tap", "why": "not selected"}],
                      "evidence": {"agent_answer": "(none)", "typed_texts": "(none)", "key_actions": "(none)",
                                   "action_trace": "Step 1: tap"}})
    t0 = time.perf_counter()
    page = write_review(tmp_path / "big", cards)
    written = time.perf_counter() - t0
    timings = {}
    t0 = time.perf_counter()
    p = Page(browser, page)
    timings["open"] = time.perf_counter() - t0
    assert p.tab.text_content("#matches") == "10000 of 10000 trajectories match"
    t0 = time.perf_counter()
    p.click('#outcomes button[data-outcome="FN"]')
    timings["filter"] = time.perf_counter() - t0
    assert p.tab.text_content("#matches") == "1250 of 10000 trajectories match"
    t0 = time.perf_counter()
    p.tab.select_option("#sort", "p_asc")
    p.ready()
    timings["sort"] = time.perf_counter() - t0
    assert p.tab.locator(".card").first.get_attribute("data-id") == "traj-00001"  # p 0.01, the lowest FN
    t0 = time.perf_counter()
    p.tab.goto(page.resolve().as_uri() + "#id=traj-09999")
    p.ready()
    timings["link"] = time.perf_counter() - t0
    assert p.tab.locator(".card.current").get_attribute("data-id") == "traj-09999"
    p.close()
    size = folder_bytes(tmp_path / "big")
    print(f"10,000 cards: written in {written:.1f} s, {size / 1e6:.1f} MB; browser: "
          + ", ".join(f"{k} {v:.2f} s" for k, v in timings.items()))
    assert max(timings.values()) < 5.0, timings  # each measured under 1 s on 2 CPU cores


# ----------------------------------------------------------------------------- labelling
NOTE = "toggle off in the last frame <script>window.__pwned = 5</script> & <b>no</b>"


def _labels_on_page(p: Page) -> dict:
    """id -> the mark each rendered card shows (aria-pressed button), '' for none."""
    return p.tab.evaluate("Object.fromEntries(Array.from(document.querySelectorAll('.card')).map(c => [c.dataset.id, "
                          "(c.querySelector('.labeller button.mark[aria-pressed=\"true\"]') || {dataset: {mark: ''}})"
                          ".dataset.mark]))")


def test_labelling_session_keys_clicks_reload_export_import(browser, run, tmp_path):
    """The issue's check: 6 cards labelled by keys and 2 by clicks, a note holding <script>, a reload,
    an export whose labels.jsonl has exactly those 8 lines, an import into a fresh copy of the page."""
    from adaptrubric_local.labels import read_labels

    page, _metrics, data = run
    ctx = browser.new_context(viewport={"width": 1280, "height": 800}, accept_downloads=True)
    p = Page(ctx, page)
    ids = p.ids()
    expected = {}
    for k, key in enumerate(["1", "0", "1", "u", "0", "1"]):  # keys: j moves on, then the label key
        p.tab.keyboard.press("j")
        assert p.tab.locator(".card.current").get_attribute("data-id") == ids[k]
        p.tab.keyboard.press(key)
        expected[ids[k]] = {"1": 1, "0": 0, "u": None}[key]
    for k, mark in ((8, "0"), (10, "1")):  # clicks on two other cards' buttons
        p.tab.locator(".card").nth(k).locator(f'.labeller button[data-mark="{mark}"]').click()
        expected[ids[k]] = int(mark)
    assert p.tab.locator(".card.current").get_attribute("data-id") == ids[10]  # a click selects its card
    note = p.tab.locator(".card").nth(1).locator("textarea.note")
    note.fill(NOTE)
    p.tab.keyboard.press("Escape")  # leaves the note (saved), keys act on cards again
    assert p.tab.text_content("#label-counts").startswith("labelled 8 of 33 (1 unsure)")
    p.tab.reload()
    p.ready()
    shown = _labels_on_page(p)
    assert {i: m for i, m in shown.items() if m} == {i: {1: "1", 0: "0", None: "u"}[v] for i, v in expected.items()}
    assert p.ids() == ids
    card = p.tab.locator(".card").nth(1)  # ids[1] is the hostile id: a selector by id would not even parse
    assert card.locator("textarea.note").input_value() == NOTE  # kept, as text
    assert p.tab.locator(".labeller script, .my-label *").count() == 0 and p.tab.evaluate("window.__pwned") is None
    assert p.tab.text_content("#label-counts").startswith("labelled 8 of 33 (1 unsure)")
    p.close()  # a closed tab: a new one in the same browser profile finds them too
    p = Page(ctx, page)
    assert {i: m for i, m in _labels_on_page(p).items() if m} == {i: {1: "1", 0: "0", None: "u"}[v]
                                                                  for i, v in expected.items()}
    # filters over my labels
    for value, n in (("labelled", 8), ("unlabelled", 25), ("unsure", 1)):
        p.tab.select_option("#labelled", value)
        p.ready()
        assert p.tab.text_content("#matches") == f"{n} of 33 trajectories match", value
    p.tab.select_option("#labelled", "disagree")
    p.ready()
    index = p.tab.evaluate("Object.fromEntries(REVIEW_INDEX.rows.map(r => [r[0], r]))")
    cols = p.tab.evaluate("REVIEW_INDEX.columns")
    score, status = cols.index("score"), cols.index("status")
    disagree = sorted(i for i, v in expected.items() if v is not None and index[i][status] == "ok"
                      and index[i][score] != v)
    assert sorted(p.ids()) == disagree
    with p.tab.expect_download() as dl:
        p.tab.click("#export")
    saved = tmp_path / "labels.jsonl"
    dl.value.save_as(saved)
    assert dl.value.suggested_filename == "labels.jsonl"
    lines = [json.loads(x) for x in saved.read_text(encoding="utf-8").splitlines()]
    assert len(lines) == 8 and {x["id"]: x["label"] for x in lines} == expected
    by_id = {x["id"]: x for x in lines}
    assert by_id[ids[1]]["note"] == NOTE and all(x["note"] is None for i, x in by_id.items() if i != ids[1])
    p_col = cols.index("p_success")
    for i, x in by_id.items():  # the verdict as it stood when labelled, and the page's files
        assert x["score"] == index[i][score] and x["p_success"] == index[i][p_col] and x["time"]
        assert x["data"] == str(data) and x["verdicts"].endswith("verdicts.jsonl")
    read = read_labels(saved)  # the package's strict reader takes what the page writes
    assert {i: r.label for i, r in read.records.items()} == expected
    p.close()
    ctx.close()
    # a fresh copy of the page (another folder at the same depth: its links still reach the screenshots)
    copy = page.parent.parent / "copy-for-import"
    shutil.copytree(page.parent, copy)
    fresh = browser.new_context(viewport={"width": 1280, "height": 800})
    q = Page(fresh, copy / "review.html")
    assert not any(_labels_on_page(q).values()) and q.tab.text_content("#label-counts").startswith("labelled 0 of 33")
    q.tab.set_input_files("#import-file", str(saved))
    q.tab.wait_for_function("() => document.querySelector('#label-counts').dataset.labelled === '8'")
    q.ready()
    assert "imported 8 label(s)" in q.tab.text_content("#label-message")
    assert {i: m for i, m in _labels_on_page(q).items() if m} == {i: {1: "1", 0: "0", None: "u"}[v]
                                                                  for i, v in expected.items()}
    assert q.ids() == ids and q.tab.locator(".card").nth(1).locator("textarea.note").input_value() == NOTE
    q.close()
    fresh.close()


def test_import_refuses_a_malformed_file_naming_its_line(browser, run, tmp_path):
    page, _, _ = run
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x", "label": 1}\n{"id": "y", "label": 1, "colour": "red"}\n{"id": "z", "label": 2}\n')
    ctx = browser.new_context()
    p = Page(ctx, page)
    p.tab.set_input_files("#import-file", str(bad))
    p.tab.wait_for_function("() => document.querySelector('#label-message').textContent.length > 0")
    msg = p.tab.text_content("#label-message")
    assert "import refused" in msg and "line 2: unknown key 'colour'" in msg and "line 3, field 'label'" in msg
    assert p.tab.text_content("#label-counts").startswith("labelled 0 of")
    p.close()
    ctx.close()


def test_prompt_as_sent_is_on_the_card(browser, run):
    page, _, _ = run
    p = Page(browser, page)
    for card in p.tab.locator(".card").all()[:6]:
        tid = card.get_attribute("data-id")
        prompt, suffix = SENT[tid]
        details = card.locator("details.prompt")
        assert details.get_attribute("open") is None  # collapsed
        assert card.locator("pre.prompt-text").text_content() == prompt
        assert card.locator("pre.prompt-suffix").text_content() == suffix
        assert "META RULE" in prompt  # rubric and meta rule are in what was sent
    p.close()


# ----------------------------------------------------------------------------- a reviewer's screen
def _phone_page(tmp_path: Path, n: int = 3) -> Path:
    """A page of worst-case cards: ten phone-sized frames, a long instruction, two long cues, a long
    unbroken token in the answer, the task id the harness makes from an instruction."""
    from adaptrubric_local.evaluation.review_page import write_review

    shots = [make_png(tmp_path / "img" / f"{k}.png", seed=k, size=(540, 1200)) for k in range(12)]
    instr = ("Open the Settings app, turn off Wi-Fi, then enable Bluetooth, open Connected devices and pair the "
             "headset named 'Jabra Elite 85t' before going back to the home screen")
    cards = []
    for i in range(n):
        raw = ("The final screen shows the toggles. " * 12
               + "\nSCORE: 1\nEVIDENCE_SUFFICIENT: yes\nMISSING_EVIDENCE: none")
        cards.append({"id": f"phone-{i}", "instruction": instr, "platform": "android", "family": "composite_workflow",
                      "route_parsed": True, "cues": ["Check that the Bluetooth toggle is on in the final frame and "
                                                     "that the headset is listed as connected."] * 2,
                      "dropped_cues": [], "status": "ok", "score": 1, "p_success": 0.91,
                      "p_success_calibrated": None, "label": None, "outcome": "unlabelled", "error_confidence": None,
                      "evidence_sufficient": True, "missing_evidence": "none", "raw": raw,
                      "block": [raw.index("SCORE"), len(raw)], "parse_error": None, "error": None, "n_images": 10,
                      "hit_cap": False, "task_id": f"instruction: {instr}", "notes": [], "source": None,
                      "answer": "done: https://example.invalid/" + "x" * 300,
                      "selected": [{"step": s + 1, "path": shots[s], "action": f"tap(element {s} 'Bluetooth')",
                                    "reason": "coverage"} for s in range(10)],
                      "left_out": [{"step": 11, "path": shots[10], "action": "tap", "why": "not selected"},
                                   {"step": 12, "path": shots[11], "action": "home()", "why": "not selected"}],
                      "evidence": {"agent_answer": '"done"', "typed_texts": "(none)", "key_actions": "(none)",
                                   "action_trace": "Step 1: tap"},
                      "prompt": {"text": "You are evaluating a GUI task.\n\nTASK: " + instr, "suffix": "End.",
                                 "images": 10}})
    return write_review(tmp_path / "phone", cards)


def test_a_card_fits_a_laptop_screen_without_sideways_scroll(browser, tmp_path):
    page = _phone_page(tmp_path)
    p = Page(browser, page)
    p.tab.set_viewport_size({"width": 1280, "height": 800})
    p.ready()
    wide = p.tab.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert wide[0] <= wide[1], f"the page scrolls sideways at 1280 px: {wide}"
    cards = p.tab.evaluate("Array.from(document.querySelectorAll('.card')).map(c => [c.scrollWidth, c.clientWidth, "
                           "c.getBoundingClientRect().height])")
    bar = p.tab.evaluate("document.getElementById('bar').getBoundingClientRect().height")
    for sw, cw, h in cards:
        assert sw <= cw, "a card scrolls sideways"
        assert h <= 800 - bar, f"a card ({h:.0f} px) is taller than the screen below the bar ({800 - bar:.0f} px)"
    p.tab.keyboard.press("j")
    p.tab.keyboard.press("j")  # the second card, scrolled to the top under the bar
    cur = p.tab.locator(".card.current")
    for part in (".instruction", ".cues", ".answer", ".verdict", ".labeller", ".frames img"):
        box = cur.locator(part).first.bounding_box()
        assert box["y"] >= bar - 1 and box["y"] + box["height"] <= 800, f"{part} is not on screen: {box}"
    p.close()


def test_lightbox_shows_the_original_frames_left_and_right(browser, tmp_path):
    page = _phone_page(tmp_path, n=1)
    p = Page(browser, page)
    p.tab.set_viewport_size({"width": 1280, "height": 800})
    p.tab.locator(".frames img").nth(2).click()
    lb = p.tab.locator("#lightbox")
    assert lb.is_visible()
    p.tab.wait_for_function("() => document.getElementById('lb-img').complete")
    img = p.tab.locator("#lb-img")
    assert p.tab.evaluate("document.getElementById('lb-img').naturalWidth") == 540  # the file, not a thumbnail
    assert (tmp_path / "img" / "2.png").resolve().as_uri() == p.tab.evaluate("document.getElementById('lb-img').src")
    assert "step 3 (3 of 12 frames)" in p.tab.text_content("#lb-caption")
    p.tab.keyboard.press("ArrowRight")
    assert "step 4 (4 of 12 frames)" in p.tab.text_content("#lb-caption")
    for _ in range(10):
        p.tab.keyboard.press("ArrowRight")
    assert "step 12 (12 of 12 frames) · not shown to the verifier" in p.tab.text_content("#lb-caption")
    # the last frame's file is decoded before its size is read (a slower Chromium was still loading it)
    p.tab.wait_for_function("() => { const i = document.getElementById('lb-img');"
                            " return i.src.endsWith('/11.png') && i.complete && i.naturalWidth > 0; }")
    box = img.bounding_box()
    assert box["height"] <= 800 and box["height"] >= 600  # fitted to the window: a phone's status bar readable
    p.tab.keyboard.press("z")
    # actual pixels, once the browser has laid the zoomed frame out (fails after 5 s if it never is)
    p.tab.wait_for_function("() => Math.abs(document.getElementById('lb-img').getBoundingClientRect().width"
                            " - 540) < 1", timeout=5000)
    assert "actual" in p.tab.get_attribute("#lb-stage", "class")
    p.tab.keyboard.press("1")  # labels the card the lightbox shows
    p.tab.keyboard.press("Escape")
    assert not lb.is_visible()
    assert _labels_on_page(p) == {"phone-0": "1"}
    p.close()


def test_the_pages_import_refuses_what_the_packages_reader_refuses(browser, run, tmp_path):
    """Two readers of one format (review_labels.js, labels.py): each line labels.py refuses, the page refuses."""
    from adaptrubric_local.labels import LabelsError, read_labels

    page, _, _ = run
    lines = ['{"id": "a", "label": 1, "colour": "red"}', '{"id": "a"}', '{"id": "a", "label": 2}',
             '{"id": "a", "label": true}', '{"id": "", "label": 1}', '{"id": "a", "label": 1, "p_success": 1.5}',
             '{"id": "a", "label": 1, "score": "1"}', '{"id": "a", "label": 1, "note": 5}',
             '{"id": "a", "label": 1, "time": 3}', '{"id": "a", "label": 1', '["a", 1]',
             '{"id": "a", "status": "ok", "score": 1}', '{"id": 3.5, "label": 0}']
    good = ['{"id": "a", "label": null}', '{"id": 7, "label": 0, "note": null, "score": 1, "p_success": 0.2, '
            '"time": "t", "data": "d", "verdicts": "v"}']
    p = Page(browser, page)
    for k, line in enumerate(lines + good):
        f = tmp_path / f"{k}.jsonl"
        f.write_text(line + "\n")
        try:
            python_ok = bool(read_labels(f))
        except LabelsError:
            python_ok = False
        page_ok = p.tab.evaluate("line => typeof ReviewLabels.parseLine(line, 1) !== 'string'", line)
        assert page_ok == python_ok == (line in good), line
    p.close()


def test_a_page_written_with_labels_shows_them_and_their_notes(browser, run, tmp_path):
    """`review --labels labels.jsonl`: the labels file's labels and notes are on the cards they label (as if
    imported when the page was written), counted in the bar and exported with the reviewer's; a change on
    the page survives a reload (the file's labels are put on once per writing of the page)."""
    from adaptrubric_local.labels import read_labels

    page, metrics, data = run
    vfile = page.parent.parent / "verdicts.jsonl"
    ids = [json.loads(x)["id"] for x in vfile.read_text().splitlines()][:4]
    lab = write_jsonl(tmp_path / "labels.jsonl", [
        {"id": ids[0], "label": 1, "note": "toggle is on"}, {"id": ids[1], "label": 0, "note": XSS},
        {"id": ids[2], "label": None, "note": "cannot tell"}])
    out = tmp_path / "with-labels"
    assert main(["review", str(data), "--verdicts", str(vfile), "--labels", str(lab), "--out", str(out),
                 "--quiet"]) == 0
    ctx = browser.new_context(viewport={"width": 1280, "height": 800}, accept_downloads=True)
    p = Page(ctx, out / "review.html")
    want = {ids[0]: "1", ids[1]: "0", ids[2]: "u"}
    p.tab.select_option("#labelled", "labelled")
    p.ready()
    assert {i: m for i, m in _labels_on_page(p).items() if m} == want
    notes = p.tab.evaluate("Object.fromEntries(Array.from(document.querySelectorAll('.card')).map(c => "
                           "[c.dataset.id, c.querySelector('textarea.note').value]))")
    assert notes == {ids[0]: "toggle is on", ids[1]: XSS, ids[2]: "cannot tell"}
    assert p.tab.evaluate("window.__pwned") is None
    lines = p.tab.locator(".card .my-label").all_text_contents()
    assert sorted(x.split(" · ")[0] for x in lines) == ["my label: failure", "my label: success",
                                                      "my label: unsure (no label)"]
    assert p.tab.text_content("#label-counts").startswith(f"labelled 3 of {metrics['overall']['n']} (1 unsure)")
    assert "3 label(s) from labels.jsonl" in p.tab.text_content("#label-message")
    card = p.tab.locator(f'.card[data-id="{ids[0]}"]')
    card.locator('.labeller button[data-mark="0"]').click()  # the reviewer changes their mind
    p.tab.reload()
    p.ready()
    assert _labels_on_page(p)[ids[0]] == "0"  # kept: the file's label is not put back on a reload
    with p.tab.expect_download() as dl:
        p.tab.click("#export")
    saved = tmp_path / "export.jsonl"
    dl.value.save_as(saved)
    got = {i: (r.label, r.note) for i, r in read_labels(saved).records.items()}
    assert got == {ids[0]: (0, "toggle is on"), ids[1]: (0, XSS), ids[2]: (None, "cannot tell")}
    p.close()
    ctx.close()
