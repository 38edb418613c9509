/* The review page of adaptrubric-local (written by `adaptrubric eval` and `adaptrubric review`).
 *
 * Reads window.REVIEW_INDEX (review_files/index.js): one row per trajectory, filtered, sorted and
 * searched here; the full cards are loaded per page from review_files/cards/NNNNN.js. Every piece
 * of trajectory or model text is put on the page with textContent, never parsed as HTML.
 *
 * Labels: a reviewer sets success / failure / unsure (keys 1 / 0 / u, or the card's buttons) and a
 * note on each card; review_labels.js keeps them (the browser's storage, export, import), this file
 * shows them on the cards, counts them in the bar, filters on them and downloads the export as
 * labels.jsonl. Works from file:// with no server and no network.
 */
(function () {
  "use strict";
  var IDX = window.REVIEW_INDEX;
  if (!IDX) { document.getElementById("cards").textContent = "review_files/index.js is missing."; return; }
  var META = IDX.meta || {};
  var COL = {};
  IDX.columns.forEach(function (c, i) { COL[c] = i; });
  var ROWS = IDX.rows;
  var PARTS = IDX.prompt_parts || [];
  var PAGE = 25;
  var OUT_RANK = {};
  IDX.outcomes.forEach(function (o, i) { OUT_RANK[o] = i; });
  var byId = new Map();
  ROWS.forEach(function (r, i) { byId.set(String(r[COL.id]), i); });

  var state = { outcome: "", family: "", platform: "", status: "", labelled: "", q: "", page: 0, cur: -1,
                sort: META.order ? "given" : "outcome" };
  var order = [];
  var chunks = {}, waiting = {};

  // ------------------------------------------------------------------ helpers
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function fmt(x, d) { return (x === null || x === undefined) ? "-" : Number(x).toFixed(d === undefined ? 3 : d); }
  function safeHref(h) { return (typeof h === "string" && !/^[a-z][a-z0-9+.-]*:/i.test(h)) ? h : null; }
  function pad(k) { var s = String(k); while (s.length < 5) s = "0" + s; return s; }
  function idHash(id) { return "#id=" + encodeURIComponent(id); }
  function rowId(r) { return String(ROWS[r][COL.id]); }

  window.REVIEW_CHUNK = function (k, cards) {
    chunks[k] = cards;
    (waiting[k] || []).forEach(function (f) { f[0](); });
    delete waiting[k];
  };
  function loadChunk(k) {
    return new Promise(function (resolve, reject) {
      if (chunks[k]) { resolve(); return; }
      if (waiting[k]) { waiting[k].push([resolve, reject]); return; }
      waiting[k] = [[resolve, reject]];
      var s = document.createElement("script");
      s.src = "review_files/cards/" + pad(k) + ".js";
      s.onerror = function () {
        (waiting[k] || []).forEach(function (f) { f[1](new Error("could not load " + s.src)); });
        delete waiting[k];
      };
      document.body.appendChild(s);
    });
  }
  function cardOf(r) { var c = chunks[ROWS[r][COL.chunk]]; return c ? c[r % IDX.chunk] : null; }

  // ------------------------------------------------------------------ labels (review_labels.js keeps them)
  var LABELS = window.ReviewLabels.store({
    key: "adaptrubric-review-labels:" + location.pathname + "|" + (META.data || ""),
    ids: ROWS.map(function (r) { return String(r[COL.id]); }),
    known: function (id) { return byId.has(id); },
    verdict: function (id) { var r = ROWS[byId.get(id)]; return { score: r[COL.score], p_success: r[COL.p_success], status: r[COL.status] }; },
    data: META.data, verdicts: META.verdicts, seed: META.labels,
    onError: function (text) { message(text, true); }
  });
  function markOf(id) { return LABELS.mark(id); }
  function disagrees(r) { return LABELS.disagrees(rowId(r)); }
  function setMark(r, mark) {
    LABELS.set(rowId(r), mark);
    refreshCard(r);
    counts();
  }
  function setNote(r, note) { if (LABELS.setNote(rowId(r), note)) counts(); }
  function counts() {
    var c = LABELS.counts();
    var text = "labelled " + c.labelled + " of " + ROWS.length + (c.unsure ? " (" + c.unsure + " unsure)" : "") +
               " · verifier disagrees: " + c.disagree;
    if (c.notesOnly) text += " · " + c.notesOnly + " note(s) on unlabelled cards, not exported";
    var box = document.getElementById("label-counts");
    box.textContent = text;
    box.title = "labelled: success, failure or unsure; the verifier disagrees where its SCORE is not my 0/1 label";
    box.dataset.labelled = String(c.labelled);
    measureBar();
  }
  var msgTimer = null;
  function message(text, bad) {
    var m = document.getElementById("label-message");
    m.textContent = text;
    m.className = bad ? "bad" : "";
    clearTimeout(msgTimer);
    if (!bad) msgTimer = setTimeout(function () { m.textContent = ""; }, 8000);
  }
  function exportLabels() {
    var lines = LABELS.exportText();
    if (!lines.length) { message("nothing to export: no card is labelled yet", true); return; }
    var blob = new Blob([lines.join("\n") + "\n"], { type: "application/x-ndjson" });
    var a = document.createElement("a");
    a.href = URL.createObjectURL(blob);
    a.download = "labels.jsonl";
    document.body.appendChild(a);
    a.click();
    setTimeout(function () { URL.revokeObjectURL(a.href); a.remove(); }, 1000);
    message("exported " + lines.length + " label(s) to labels.jsonl (use it with --labels)");
  }
  function importLabels(text, name) {
    var res = LABELS.importText(text);
    if (res.refused) {
      message("import refused, " + name + ": " + res.refused.slice(0, 3).join("; ") + (res.refused.length > 3 ? "; ..." : ""), true);
      return;
    }
    render();
    counts();
    var f = res.foreign;
    message("imported " + res.applied + " label(s) from " + name + (f.length ? "; " + f.length +
            " id(s) are not on this page and were left out: " + f.slice(0, 3).join(", ") + (f.length > 3 ? ", ..." : "") : ""),
            f.length > 0 && res.applied === 0);
  }

  // ------------------------------------------------------------------ filter and sort
  function compute() {
    var q = state.q.trim().toLowerCase();
    order = [];
    for (var i = 0; i < ROWS.length; i++) {
      var r = ROWS[i];
      if (state.outcome && r[COL.outcome] !== state.outcome) continue;
      if (state.family && r[COL.family] !== state.family) continue;
      if (state.platform && r[COL.platform] !== state.platform) continue;
      if (state.status && r[COL.status] !== state.status) continue;
      if (state.labelled) {
        var mark = markOf(String(r[COL.id]));
        if (state.labelled === "unlabelled" && mark) continue;
        if (state.labelled === "labelled" && !mark) continue;
        if (state.labelled === "unsure" && mark !== "u") continue;
        if (state.labelled === "disagree" && !disagrees(i)) continue;
      }
      if (q && String(r[COL.id]).toLowerCase().indexOf(q) < 0 && String(r[COL.instruction]).toLowerCase().indexOf(q) < 0) continue;
      order.push(i);
    }
    var desc = function (c) { return function (a, b) {
      var x = ROWS[a][c], y = ROWS[b][c];
      if (x === null && y === null) return 0; if (x === null) return 1; if (y === null) return -1; return y - x; }; };
    var byOutcome = function (a, b) { return OUT_RANK[ROWS[a][COL.outcome]] - OUT_RANK[ROWS[b][COL.outcome]]; };
    var cmp = {
      outcome: function (a, b) { return byOutcome(a, b) || desc(COL.error_confidence)(a, b) || a - b; },
      errconf: function (a, b) { return desc(COL.error_confidence)(a, b) || byOutcome(a, b) || a - b; },
      p_desc: function (a, b) { return desc(COL.p_success)(a, b) || a - b; },
      p_asc: function (a, b) {
        var x = ROWS[a][COL.p_success], y = ROWS[b][COL.p_success];
        if (x === null || y === null) return desc(COL.p_success)(a, b) || a - b;
        return x - y || a - b; },
      id: function (a, b) { return String(ROWS[a][COL.id]).localeCompare(String(ROWS[b][COL.id]), undefined, { numeric: true }); }
    }[state.sort] || function (a, b) { return a - b; };
    order.sort(cmp);
  }

  // ------------------------------------------------------------------ one card
  function allFrames(c) {
    var shown = c.selected.map(function (f) { return { step: f.step, href: f.href, action: f.action, shown: true, why: f.reason, missing: f.missing }; });
    var left = c.left_out.map(function (f) { return { step: f.step, href: f.href, action: f.action, shown: false, why: f.why }; });
    return shown.concat(left).sort(function (a, b) { return a.step - b.step; });
  }

  function frames(c, r) {
    var box = el("section", "frames");
    c.selected.forEach(function (f) {
      var fig = el("figure");
      if (f.thumb) {
        var img = el("img");
        img.src = f.thumb;
        img.alt = "step " + f.step;
        img.title = "step " + f.step + ": open the screenshot (o)";
        img.addEventListener("click", function () { select(r); openLightbox(r, f.step); });
        fig.appendChild(img);
      } else {
        fig.appendChild(el("div", "missing-shot", "step " + f.step + ": " + (f.missing || "no thumbnail")));
      }
      var cap = el("figcaption");
      cap.title = "step " + f.step + " · " + f.reason + " · " + f.action;
      cap.appendChild(el("b", null, "step " + f.step));
      cap.appendChild(document.createTextNode(" · "));
      cap.appendChild(el("span", "reason", f.reason));
      cap.appendChild(el("div", null, f.action));
      fig.appendChild(cap);
      box.appendChild(fig);
    });
    if (!c.selected.length) box.appendChild(el("span", "notes", "no screenshot to show"));
    return box;
  }

  function leftOut(c, r) {
    var d = el("details", "left-out");
    d.appendChild(el("summary", null, c.left_out.length + " frame(s) left out"));
    var ol = el("ol");
    c.left_out.forEach(function (f) {
      var li = el("li", null, "step " + f.step + ": " + f.action + " (" + f.why + ") ");
      if (safeHref(f.href)) {
        var b = el("button", "show-frame", "show");
        b.type = "button";
        b.addEventListener("click", function () { select(r); openLightbox(r, f.step); });
        li.appendChild(b);
      }
      ol.appendChild(li);
    });
    d.appendChild(ol);
    return d;
  }

  function evidence(c) {
    var d = el("details", "evidence");
    d.appendChild(el("summary", null, "Compiled evidence"));
    var dl = el("dl", "evidence");
    [["agent answer", "agent_answer"], ["typed texts", "typed_texts"], ["key actions", "key_actions"]].forEach(function (p) {
      dl.appendChild(el("dt", null, p[0]));
      dl.appendChild(el("dd", null, c.evidence[p[1]]));
    });
    d.appendChild(dl);
    var t = el("details", "trace");
    t.appendChild(el("summary", null, "action trace"));
    t.appendChild(el("pre", null, c.evidence.action_trace));
    d.appendChild(t);
    return d;
  }

  function part(x) { return typeof x === "number" ? PARTS[x] : x; }
  function promptBlock(c) {
    var d = el("details", "prompt");
    d.appendChild(el("summary", null, "Verifier prompt as sent (rubric, meta rule, cue block, evidence)"));
    var text = c.prompt.text.map(part).join("\n\n");
    d.appendChild(el("pre", "prompt-text", text));
    var steps = c.selected.map(function (f) { return f.step; }).join(", ");
    d.appendChild(el("span", "images", "[" + c.prompt.images + " screenshot(s) here, in order: step " + (steps || "-") + "]"));
    d.appendChild(el("pre", "prompt-suffix", part(c.prompt.suffix)));
    return d;
  }

  function rawOutput(c) {
    var d = el("details", "raw");
    d.open = true;
    d.appendChild(el("summary", null, "Verifier output" + (c.block ? " (the parsed block highlighted)" : "")));
    var pre = el("pre", "raw-text");
    var raw = c.raw || "";
    if (!raw) pre.textContent = c.status === "error" || c.status === "missing" ? "(no output: " + (c.error || c.status) + ")" : "(empty output)";
    else if (c.block) {
      pre.appendChild(document.createTextNode(raw.slice(0, c.block[0])));
      pre.appendChild(el("mark", null, raw.slice(c.block[0], c.block[1])));
      pre.appendChild(document.createTextNode(raw.slice(c.block[1])));
    } else pre.textContent = raw;
    d.appendChild(pre);
    if (c.parse_error) d.appendChild(el("div", "notes", "not parsed: " + c.parse_error));
    if (c.error && c.status !== "missing") d.appendChild(el("div", "notes", "error: " + c.error));
    return d;
  }

  function verdictLine(c) {
    var v = el("div", "verdict");
    var parts = [["SCORE", c.score === null ? "-" : c.score], ["p_success", fmt(c.p_success)]];
    if (c.p_success_calibrated !== null && c.p_success_calibrated !== undefined) parts.push(["calibrated", fmt(c.p_success_calibrated)]);
    parts.push(["status", c.status]);
    if (c.evidence_sufficient !== null) parts.push(["evidence sufficient", c.evidence_sufficient ? "yes" : "no"]);
    if (c.missing_evidence) parts.push(["missing", c.missing_evidence]);
    parts.push(["data label", c.label === null ? "-" : c.label]);
    parts.forEach(function (p, i) {
      if (i) v.appendChild(document.createTextNode(" · "));
      v.appendChild(document.createTextNode(p[0] + " "));
      v.appendChild(el("b", null, p[1]));
    });
    if (c.compare !== undefined) {
      var b = c.compare;
      v.appendChild(el("span", "cmp", b === null ? "compared file: no verdict for this id" :
        "compared file" + (b.model ? " (" + b.model + ")" : "") + ": SCORE " + (b.score === null ? "-" : b.score) +
        " · p_success " + fmt(b.p_success) + " · status " + b.status));
    }
    return v;
  }

  function labeller(c, r) {
    var box = el("div", "labeller");
    var choices = el("div", "choices");
    [["1", "✓ success (1)"], ["0", "✗ failure (0)"], ["u", "? unsure (u)"]].forEach(function (p) {
      var b = el("button", "mark", p[1]);
      b.type = "button";
      b.dataset.mark = p[0];
      b.addEventListener("click", function () { select(r); setMark(r, p[0]); afterLabel(); });
      choices.appendChild(b);
    });
    var clear = el("button", "clear", "clear");
    clear.type = "button";
    clear.title = "remove my label from this card";
    clear.addEventListener("click", function () { select(r); setMark(r, ""); });
    choices.appendChild(clear);
    box.appendChild(choices);
    box.appendChild(el("span", "my-label"));
    var note = el("textarea", "note");
    note.placeholder = "note (e to write, Esc to leave): why, what the verifier missed...";
    note.rows = 2;
    var timer = null;
    note.addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(function () { setNote(r, note.value); }, 250); });
    note.addEventListener("blur", function () { clearTimeout(timer); setNote(r, note.value); });
    note.addEventListener("focus", function () { select(r); });
    box.appendChild(note);
    return box;
  }

  // the parts of a card that show my label: buttons, the line under them, the note, the card's tint
  function refreshCard(r) {
    var node = document.getElementById("card-" + r);
    if (!node) return;
    var m = LABELS.entry(rowId(r)), mark = m.mark || "";
    node.classList.remove("m-1", "m-0", "m-u");
    if (mark) node.classList.add("m-" + mark);
    node.dataset.mark = mark;
    node.querySelectorAll(".labeller button.mark").forEach(function (b) { b.setAttribute("aria-pressed", String(b.dataset.mark === mark)); });
    var line = node.querySelector(".my-label");
    var text = mark ? "my label: " + { "1": "success", "0": "failure", "u": "unsure (no label)" }[mark] : "not labelled yet";
    if (mark && m.time) text += " · set " + m.time.replace("T", " ").slice(0, 16);
    line.textContent = text;
    line.className = "my-label" + (disagrees(r) ? " disagrees" : "");
    if (disagrees(r)) line.textContent += " · the verifier said " + ROWS[r][COL.score];
    var ta = node.querySelector("textarea.note");
    if (ta && document.activeElement !== ta) ta.value = m.note || "";
  }

  function renderCard(r) {
    var c = cardOf(r);
    var art = el("article", "card o-" + ROWS[r][COL.outcome]);
    art.id = "card-" + r;
    art.dataset.row = String(r);
    if (!c) { art.appendChild(el("p", "notes", "card data not loaded")); return art; }
    art.dataset.id = c.id;
    var head = el("div", "card-head");
    head.appendChild(el("span", "badge o-" + c.outcome, c.outcome));
    head.appendChild(el("span", "card-id", c.id));
    var link = el("a", "permalink", "link");
    link.href = idHash(c.id);
    link.title = "a link to this card";
    head.appendChild(link);
    if (c.rank) head.appendChild(el("span", "rank", "#" + c.rank + " by " + (META.order ? META.order.order : "order") + ": " + c.rank_reason));
    var facts = el("span", "facts");
    var parts = [["platform", c.platform || "unknown"], ["family", (c.family || "(none)") + (c.route_parsed === false ? " (router output unparsed)" : "")]];
    if (c.task_id && String(c.task_id).indexOf("instruction: ") !== 0) parts.push(["task", c.task_id]);
    parts.forEach(function (p, i) {
      if (i) facts.appendChild(document.createTextNode(" · "));
      facts.appendChild(document.createTextNode(p[0] + " "));
      facts.appendChild(el("b", null, p[1]));
    });
    head.appendChild(facts);
    art.appendChild(head);

    var body = el("div", "card-body");
    var judge = el("section", "judge");
    judge.appendChild(el("p", "instruction", c.instruction === null ? "(no instruction: not in the data)" : c.instruction));
    var cues = el("div", "cues");
    cues.appendChild(el("b", null, "cues: "));
    if (c.cues.length) { var ul = el("ul"); c.cues.forEach(function (q) { ul.appendChild(el("li", null, q)); }); cues.appendChild(ul); }
    else cues.appendChild(document.createTextNode("none"));
    c.dropped_cues.forEach(function (d) { cues.appendChild(el("div", "notes", "dropped cue: " + d.cue + " (" + d.reason + ")")); });
    judge.appendChild(cues);
    if (c.instruction !== null) {
      var ans = el("div", "answer");
      ans.appendChild(el("b", null, "answer: "));
      ans.appendChild(el("span", "text", c.answer === null || c.answer === undefined ? "(none)" : c.answer));
      judge.appendChild(ans);
    }
    judge.appendChild(verdictLine(c));
    judge.appendChild(labeller(c, r));
    if (c.notes.length || c.hit_cap) {
      var nb = el("div", "notes"), nl = el("ul");
      c.notes.forEach(function (n) { nl.appendChild(el("li", null, n)); });
      if (c.hit_cap) nl.appendChild(el("li", null, "the output stopped at the token cap"));
      nb.appendChild(nl);
      judge.appendChild(nb);
    }
    body.appendChild(judge);
    var shots = el("section", "shots");
    if (c.instruction !== null) shots.appendChild(frames(c, r));
    shots.appendChild(rawOutput(c));
    body.appendChild(shots);
    art.appendChild(body);

    var more = el("div", "card-more");
    if (c.instruction !== null) {
      if (c.evidence) more.appendChild(evidence(c));
      if (c.left_out.length) more.appendChild(leftOut(c, r));
    }
    if (c.prompt) more.appendChild(promptBlock(c));
    if (more.childNodes.length) art.appendChild(more);
    return art;
  }

  // ------------------------------------------------------------------ lightbox
  var lb = { open: false, r: -1, frames: [], k: 0 };
  function openLightbox(r, step) {
    var c = cardOf(r);
    if (!c) return;
    lb.r = r;
    lb.frames = allFrames(c).filter(function (f) { return safeHref(f.href); });
    if (!lb.frames.length) return;
    var k = 0;
    lb.frames.forEach(function (f, i) { if (f.step === step) k = i; });
    if (step === undefined) {  // the final frame the verifier saw
      lb.frames.forEach(function (f, i) { if (f.shown) k = i; });
    }
    lb.open = true;
    document.getElementById("lightbox").hidden = false;
    showFrame(k);
  }
  function showFrame(k) {
    lb.k = Math.min(Math.max(0, k), lb.frames.length - 1);
    var f = lb.frames[lb.k], c = cardOf(lb.r);
    var img = document.getElementById("lb-img"), miss = document.getElementById("lb-missing");
    miss.hidden = true;
    img.hidden = false;
    img.onerror = function () { img.hidden = true; miss.hidden = false; miss.textContent = "could not load " + decodeURIComponent(f.href); };
    img.src = f.href;
    img.alt = "step " + f.step;
    document.getElementById("lb-open").href = f.href;
    document.getElementById("lb-caption").textContent = c.id + " · step " + f.step + " (" + (lb.k + 1) + " of " +
      lb.frames.length + " frames) · " + (f.shown ? "shown to the verifier: " + f.why : "not shown to the verifier: " + f.why) +
      " · " + f.action;
    document.getElementById("lb-prev").disabled = lb.k === 0;
    document.getElementById("lb-next").disabled = lb.k === lb.frames.length - 1;
  }
  function closeLightbox() {
    lb.open = false;
    document.getElementById("lightbox").hidden = true;
    document.getElementById("lb-stage").classList.remove("actual");
    document.getElementById("lb-zoom").textContent = "actual size";
  }
  function toggleZoom(e) {
    var stage = document.getElementById("lb-stage"), img = document.getElementById("lb-img");
    var fx = 0.5, fy = 0.5;
    if (e && e.target === img && !stage.classList.contains("actual")) {
      var box = img.getBoundingClientRect();
      fx = (e.clientX - box.left) / box.width;
      fy = (e.clientY - box.top) / box.height;
    }
    var actual = stage.classList.toggle("actual");
    document.getElementById("lb-zoom").textContent = actual ? "fit the window" : "actual size";
    if (actual) {  // keep the clicked point (a status bar, a toggle) under the pointer
      stage.scrollLeft = fx * img.naturalWidth - stage.clientWidth / 2;
      stage.scrollTop = fy * img.naturalHeight - stage.clientHeight / 2;
    }
  }

  // ------------------------------------------------------------------ page
  function pager(nav) {
    nav.textContent = "";
    var pages = Math.max(1, Math.ceil(order.length / PAGE));
    var prev = el("button", null, "‹ previous page"), next = el("button", null, "next page ›");
    prev.disabled = state.page <= 0;
    next.disabled = state.page >= pages - 1;
    prev.addEventListener("click", function () { goPage(state.page - 1); });
    next.addEventListener("click", function () { goPage(state.page + 1); });
    nav.appendChild(prev);
    nav.appendChild(el("span", null, "page " + (state.page + 1) + " of " + pages));
    nav.appendChild(next);
  }

  var renderToken = 0;
  function render() {
    var token = ++renderToken;
    var start = state.page * PAGE, rows = order.slice(start, start + PAGE);
    document.getElementById("matches").textContent = order.length + " of " + ROWS.length + " trajectories match";
    pager(document.getElementById("pager-top"));
    pager(document.getElementById("pager-bottom"));
    var need = {};
    rows.forEach(function (r) { need[ROWS[r][COL.chunk]] = true; });
    document.getElementById("cards").dataset.state = "loading";
    return Promise.all(Object.keys(need).map(function (k) { return loadChunk(Number(k)); })).then(function () {
      if (token !== renderToken) return;
      var main = document.getElementById("cards");
      main.textContent = "";
      if (!rows.length) main.appendChild(el("p", "empty", "No trajectory matches these filters."));
      var frag = document.createDocumentFragment();
      rows.forEach(function (r) { frag.appendChild(renderCard(r)); });
      main.appendChild(frag);
      rows.forEach(function (r) { refreshCard(r); });
      main.dataset.state = "ready";
      markCurrent(false);
    }, function (err) {
      document.getElementById("cards").textContent = String(err.message || err);
    });
  }

  function goPage(p) {
    var pages = Math.max(1, Math.ceil(order.length / PAGE));
    state.page = Math.min(Math.max(0, p), pages - 1);
    state.cur = -1;
    window.scrollTo(0, 0);
    return render();
  }

  function markCurrent(scroll) {
    var old = document.querySelector(".card.current");
    if (old) old.classList.remove("current");
    if (state.cur < 0 || state.cur >= order.length) return;
    var node = document.getElementById("card-" + order[state.cur]);
    if (!node) return;
    node.classList.add("current");
    if (scroll) node.scrollIntoView({ block: "start" });
  }

  function moveTo(pos) {
    if (!order.length) return;
    pos = Math.min(Math.max(0, pos), order.length - 1);
    state.cur = pos;
    var id = ROWS[order[pos]][COL.id];
    history.replaceState(null, "", idHash(id));
    var page = Math.floor(pos / PAGE);
    if (page !== state.page) { state.page = page; render().then(function () { markCurrent(true); }); }
    else markCurrent(true);
  }

  // make row r the current card without scrolling (a click on it)
  function select(r) {
    var pos = order.indexOf(r);
    if (pos < 0 || pos === state.cur) return;
    state.cur = pos;
    history.replaceState(null, "", idHash(rowId(r)));
    markCurrent(false);
  }
  // the row the label keys act on: the current card, else the first card of this page
  function currentRow() {
    if (!order.length) return -1;
    if (state.cur < 0 || state.cur >= order.length) { state.cur = state.page * PAGE; markCurrent(true); }
    return order[state.cur];
  }
  function afterLabel() {
    if (document.getElementById("advance").checked && state.cur < order.length - 1) moveTo(state.cur + 1);
  }

  function update() { compute(); state.page = 0; state.cur = -1; render(); }

  function resetFilters() {
    state.outcome = state.family = state.platform = state.status = state.labelled = state.q = "";
    ["family", "platform", "status", "search", "labelled"].forEach(function (k) { document.getElementById(k).value = ""; });
    syncOutcomeButtons();
  }

  function followHash() {
    var m = /^#id=(.*)$/.exec(location.hash);
    if (!m) return false;
    var id;
    try { id = decodeURIComponent(m[1]); } catch (e) { return false; }
    var r = byId.get(id);
    if (r === undefined) { document.getElementById("matches").textContent = "no trajectory with id " + id; return true; }
    compute();
    if (order.indexOf(r) < 0) { resetFilters(); compute(); }
    var pos = order.indexOf(r);
    state.page = Math.floor(pos / PAGE);
    state.cur = pos;
    render().then(function () { markCurrent(true); });
    return true;
  }

  // ------------------------------------------------------------------ controls
  function syncOutcomeButtons() {
    document.querySelectorAll("#outcomes button").forEach(function (b) {
      b.setAttribute("aria-pressed", String(b.dataset.outcome === state.outcome));
    });
  }

  function setupHeader() {
    if (META.title) { document.getElementById("title").textContent = META.title; document.title = META.title; }
    var bits = [];
    [["model", "model"], ["adapter", "adapter"], ["data", "data"], ["verdicts", "verdicts"], ["created", "created"]].forEach(function (k) {
      if (META[k[0]]) bits.push(k[1] + ": " + META[k[0]]);
    });
    document.getElementById("meta").textContent = bits.join(" · ");
    var figs = [];
    var prob = META.probability || {};
    Object.keys(prob).forEach(function (f) {
      var s = prob[f];
      figs.push(f + " (n=" + s.n + "): AUROC " + fmt(s.auroc) + ", AUPRC " + fmt(s.auprc) + ", Brier " + fmt(s.brier, 4) + ", ECE " + fmt(s.ece, 4));
    });
    document.getElementById("figures").textContent = figs.join(" · ");
    if (META.order) {
      var o = META.order;
      document.getElementById("order-line").textContent = "cards in labelling order: " + o.order +
        (o.compare ? " against " + o.compare : "") + (o.seed !== null && o.seed !== undefined ? " (seed " + o.seed + ")" : "") +
        " · " + o.shown + " of " + o.of + " verdicts" + (o.budget ? " (budget " + o.budget + ")" : "") +
        (o.shown < o.of ? "; the figures above are over all " + o.of : "");
    }
    var notes = document.getElementById("page-notes");
    IDX.notes.forEach(function (n) { notes.appendChild(el("li", null, n)); });
    document.getElementById("sort").value = state.sort;
  }

  function setupFilters() {
    var box = document.getElementById("outcomes");
    var all = el("button", null, "all " + ROWS.length);
    all.dataset.outcome = "";
    box.appendChild(all);
    IDX.outcomes.forEach(function (o) {
      if (!IDX.counts[o] && (o === "unlabelled" || o === "missing")) return;
      var b = el("button", "o-" + o, o + " " + (IDX.counts[o] || 0));
      b.dataset.outcome = o;
      b.title = { FP: "false positives: SCORE 1, the label says failure", FN: "false negatives: SCORE 0 on a success",
                  TP: "true positives", TN: "true negatives", unparsed: "no complete verdict block (not counted in FN/TN here)",
                  error: "bad record or failed call", unlabelled: "no label in the data",
                  missing: "no verdict in the verdict file (a predicted failure in eval's headline)" }[o] || o;
      box.appendChild(b);
    });
    box.addEventListener("click", function (e) {
      var b = e.target.closest("button");
      if (!b) return;
      state.outcome = b.dataset.outcome;
      syncOutcomeButtons();
      update();
    });
    syncOutcomeButtons();
    [["family", COL.family], ["platform", COL.platform], ["status", COL.status]].forEach(function (p) {
      var sel = document.getElementById(p[0]);
      Array.from(new Set(ROWS.map(function (r) { return r[p[1]]; }))).sort().forEach(function (v) {
        var o = el("option", null, v);
        o.value = v;
        sel.appendChild(o);
      });
      sel.addEventListener("change", function () { state[p[0]] = sel.value; update(); });
    });
    var labelled = document.getElementById("labelled");
    labelled.addEventListener("change", function () { state.labelled = labelled.value; update(); });
    var sort = document.getElementById("sort");
    sort.addEventListener("change", function () { state.sort = sort.value; update(); });
    var search = document.getElementById("search"), timer = null;
    search.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(function () { state.q = search.value; update(); }, 120);
    });
  }

  function setupLabels() {
    if (META.labels) {
      var n = Object.keys(META.labels.marks || {}).length, names = (META.labels.files || []).join(", ");
      message(LABELS.fromFiles() ? "shown as imported: " + LABELS.fromFiles() + " label(s) from " + names +
              " (--labels), on the cards they label" : n ? "labels from " + names + " (--labels) are on the cards they label"
              : names + " (--labels) label(s) none of these cards");
    }
    if (!LABELS.kept()) message("this browser keeps no storage for pages opened from files: export the labels before closing", true);
    var adv = document.getElementById("advance");
    try { adv.checked = window.localStorage.getItem("adaptrubric-review-advance") === "1"; } catch (e) { /* no storage */ }
    adv.addEventListener("change", function () {
      try { window.localStorage.setItem("adaptrubric-review-advance", adv.checked ? "1" : "0"); } catch (e) { /* no storage */ }
    });
    document.getElementById("export").addEventListener("click", exportLabels);
    var file = document.getElementById("import-file");
    document.getElementById("import").addEventListener("click", function () { file.click(); });
    file.addEventListener("change", function () {
      var f = file.files && file.files[0];
      if (!f) return;
      var reader = new FileReader();
      reader.onload = function () { importLabels(String(reader.result), f.name); file.value = ""; };
      reader.onerror = function () { message("could not read " + f.name, true); };
      reader.readAsText(f);
    });
    counts();
  }

  function setupLightbox() {
    document.getElementById("lb-close").addEventListener("click", closeLightbox);
    document.getElementById("lb-prev").addEventListener("click", function () { showFrame(lb.k - 1); });
    document.getElementById("lb-next").addEventListener("click", function () { showFrame(lb.k + 1); });
    document.getElementById("lb-zoom").addEventListener("click", function () { toggleZoom(); });
    document.getElementById("lb-img").addEventListener("click", toggleZoom);
    document.getElementById("lb-stage").addEventListener("click", function (e) { if (e.target.id === "lb-stage") closeLightbox(); });
  }

  function onKey(e) {
    var t = e.target.tagName;
    if (t === "INPUT" || t === "SELECT" || t === "TEXTAREA" || e.ctrlKey || e.metaKey || e.altKey) {
      if (e.key === "Escape") e.target.blur();
      return;
    }
    if (lb.open) {
      if (e.key === "Escape") { closeLightbox(); e.preventDefault(); return; }
      if (e.key === "ArrowLeft") { showFrame(lb.k - 1); e.preventDefault(); return; }
      if (e.key === "ArrowRight") { showFrame(lb.k + 1); e.preventDefault(); return; }
      if (e.key === "z") { toggleZoom(); e.preventDefault(); return; }
      if (e.key === "j" || e.key === "k" || e.key === "n" || e.key === "p") closeLightbox();
    }
    if (e.key === "j" || e.key === "n") { moveTo(state.cur + 1); e.preventDefault(); }
    else if (e.key === "k" || e.key === "p") { moveTo(state.cur < 0 ? 0 : state.cur - 1); e.preventDefault(); }
    else if (e.key === "/") { document.getElementById("search").focus(); e.preventDefault(); }
    else if (e.key === "1" || e.key === "0" || e.key === "u") {
      var r = currentRow();
      if (r < 0) return;
      setMark(r, e.key);
      e.preventDefault();
      if (!lb.open) afterLabel();
    } else if (e.key === "e" || e.key === "o") {
      var row = currentRow();
      if (row < 0) return;
      e.preventDefault();
      if (e.key === "o") { openLightbox(row); return; }
      var node = document.getElementById("card-" + row), ta = node && node.querySelector("textarea.note");
      if (ta) ta.focus();
    }
  }

  function measureBar() {
    var h = document.getElementById("bar").offsetHeight;
    document.documentElement.style.setProperty("--bar-h", h + "px");
  }

  setupHeader();
  setupFilters();
  setupLabels();
  setupLightbox();
  document.addEventListener("keydown", onKey);
  window.addEventListener("hashchange", followHash);
  window.addEventListener("resize", measureBar);
  measureBar();
  if (!followHash()) { compute(); render(); }
})();
