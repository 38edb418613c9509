/* The review page of adaptrubric-local (written by `adaptrubric eval` and `adaptrubric review`).
 *
 * Reads window.REVIEW_INDEX (review_files/index.js): one row per trajectory, filtered, sorted and
 * searched here; the full cards are loaded per page from review_files/cards/NNNNN.js. Every piece
 * of trajectory or model text is put on the page with textContent, never parsed as HTML.
 * Works from file:// with no server and no network.
 */
(function () {
  "use strict";
  var IDX = window.REVIEW_INDEX;
  if (!IDX) { document.getElementById("cards").textContent = "review_files/index.js is missing."; return; }
  var COL = {};
  IDX.columns.forEach(function (c, i) { COL[c] = i; });
  var ROWS = IDX.rows;
  var PAGE = 25;
  var OUT_RANK = {};
  IDX.outcomes.forEach(function (o, i) { OUT_RANK[o] = i; });
  var byId = new Map();
  ROWS.forEach(function (r, i) { byId.set(String(r[COL.id]), i); });

  var state = { outcome: "", family: "", platform: "", status: "", sort: "outcome", q: "", page: 0, cur: -1 };
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
  function frames(c) {
    var box = el("section", "frames");
    c.selected.forEach(function (f) {
      var fig = el("figure");
      if (f.thumb) {
        var img = el("img");
        img.src = f.thumb;
        img.alt = "step " + f.step;
        var href = safeHref(f.href);
        if (href) { var a = el("a"); a.href = href; a.target = "_blank"; a.rel = "noopener"; a.title = "open the screenshot"; a.appendChild(img); fig.appendChild(a); }
        else fig.appendChild(img);
      } else {
        fig.appendChild(el("div", "missing-shot", "step " + f.step + ": " + (f.missing || "no thumbnail")));
      }
      var cap = el("figcaption");
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

  function leftOut(c) {
    var d = el("details", "left-out");
    d.appendChild(el("summary", null, c.left_out.length + " frame(s) left out"));
    var ol = el("ol");
    c.left_out.forEach(function (f) {
      var li = el("li", null, "step " + f.step + ": " + f.action + " (" + f.why + ") ");
      var href = safeHref(f.href);
      if (href) { var a = el("a", null, "open"); a.href = href; a.target = "_blank"; a.rel = "noopener"; li.appendChild(a); }
      ol.appendChild(li);
    });
    d.appendChild(ol);
    return d;
  }

  function evidence(c) {
    var d = el("details", "evidence");
    d.open = true;
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
    var facts = el("span", "facts");
    var parts = [["platform", c.platform || "unknown"], ["family", (c.family || "(none)") + (c.route_parsed === false ? " (router output unparsed)" : "")],
                 ["status", c.status], ["SCORE", c.score === null ? "-" : c.score], ["p_success", fmt(c.p_success)]];
    if (c.p_success_calibrated !== null && c.p_success_calibrated !== undefined) parts.push(["calibrated", fmt(c.p_success_calibrated)]);
    parts.push(["label", c.label === null ? "-" : c.label]);
    if (c.evidence_sufficient !== null) parts.push(["evidence sufficient", c.evidence_sufficient ? "yes" : "no"]);
    if (c.missing_evidence) parts.push(["missing evidence", c.missing_evidence]);
    if (c.task_id) parts.push(["task", c.task_id]);
    parts.forEach(function (p, i) {
      if (i) facts.appendChild(document.createTextNode(" · "));
      facts.appendChild(document.createTextNode(p[0] + " "));
      facts.appendChild(el("b", null, p[1]));
    });
    head.appendChild(facts);
    art.appendChild(head);
    art.appendChild(el("p", "instruction", c.instruction === null ? "(no instruction: not in the data)" : c.instruction));
    var cues = el("div", "cues");
    cues.appendChild(el("b", null, "cues: "));
    if (c.cues.length) { var ul = el("ul"); c.cues.forEach(function (q) { ul.appendChild(el("li", null, q)); }); cues.appendChild(ul); }
    else cues.appendChild(document.createTextNode("none"));
    c.dropped_cues.forEach(function (d) { cues.appendChild(el("div", "notes", "dropped cue: " + d.cue + " (" + d.reason + ")")); });
    art.appendChild(cues);
    if (c.notes.length || c.hit_cap) {
      var nb = el("div", "notes"), nl = el("ul");
      c.notes.forEach(function (n) { nl.appendChild(el("li", null, n)); });
      if (c.hit_cap) nl.appendChild(el("li", null, "the output stopped at the token cap"));
      nb.appendChild(nl);
      art.appendChild(nb);
    }
    if (c.instruction !== null) {
      art.appendChild(frames(c));
      if (c.left_out.length) art.appendChild(leftOut(c));
      if (c.evidence) art.appendChild(evidence(c));
    }
    art.appendChild(rawOutput(c));
    return art;
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

  function update() { compute(); state.page = 0; state.cur = -1; render(); }

  function resetFilters() {
    state.outcome = state.family = state.platform = state.status = state.q = "";
    ["family", "platform", "status", "search"].forEach(function (k) { document.getElementById(k).value = ""; });
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

  function setup() {
    var meta = IDX.meta || {};
    if (meta.title) { document.getElementById("title").textContent = meta.title; document.title = meta.title; }
    var bits = [];
    [["model", "model"], ["adapter", "adapter"], ["data", "data"], ["verdicts", "verdicts"], ["created", "created"]].forEach(function (k) {
      if (meta[k[0]]) bits.push(k[1] + ": " + meta[k[0]]);
    });
    document.getElementById("meta").textContent = bits.join(" · ");
    var figs = [];
    var prob = meta.probability || {};
    Object.keys(prob).forEach(function (f) {
      var s = prob[f];
      figs.push(f + " (n=" + s.n + "): AUROC " + fmt(s.auroc) + ", AUPRC " + fmt(s.auprc) + ", Brier " + fmt(s.brier, 4) + ", ECE " + fmt(s.ece, 4));
    });
    document.getElementById("figures").textContent = figs.join(" · ");
    var notes = document.getElementById("page-notes");
    IDX.notes.forEach(function (n) { notes.appendChild(el("li", null, n)); });

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
    var sort = document.getElementById("sort");
    sort.addEventListener("change", function () { state.sort = sort.value; update(); });
    var search = document.getElementById("search"), timer = null;
    search.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(function () { state.q = search.value; update(); }, 120);
    });
    document.addEventListener("keydown", function (e) {
      var t = e.target.tagName;
      if (t === "INPUT" || t === "SELECT" || t === "TEXTAREA" || e.ctrlKey || e.metaKey || e.altKey) {
        if (e.key === "Escape") e.target.blur();
        return;
      }
      if (e.key === "j" || e.key === "n") { moveTo(state.cur + 1); e.preventDefault(); }
      else if (e.key === "k" || e.key === "p") { moveTo(state.cur < 0 ? 0 : state.cur - 1); e.preventDefault(); }
      else if (e.key === "/") { search.focus(); e.preventDefault(); }
    });
    window.addEventListener("hashchange", followHash);
  }

  setup();
  if (!followHash()) { compute(); render(); }
})();
