/* The labels a reviewer sets on the review page of adaptrubric-local (review.js draws them).
 *
 * A label is a mark ("1" success, "0" failure, "u" unsure, "" none) with a note, the verdict's
 * SCORE and p_success when it was set and the time. Labels are kept in the browser's localStorage
 * under a key of the page's path and data set (a reload or a closed tab keeps them), exported as
 * labels.jsonl lines (id, label 1/0/null, note, score, p_success, time, data, verdicts: what
 * `adaptrubric --labels` reads) and imported from such a file, checked as strictly as the package's
 * reader checks it. A page written with --labels carries those files' labels for its cards (`seed`):
 * they are put on the cards as an import would, once per writing of the page (its token), so a reload
 * keeps what the reviewer changes since. Knows nothing about cards or the page's layout.
 */
window.ReviewLabels = (function () {
  "use strict";
  var KEYS = ["id", "label", "note", "score", "p_success", "time", "data", "verdicts"];

  function labelValue(mark) { return mark === "1" ? 1 : mark === "0" ? 0 : null; }

  // one line of a labels file: the record, or why it is refused ("line N, field 'x': ...")
  function parseLine(line, n) {
    var obj, at = "line " + n;
    try { obj = JSON.parse(line); } catch (e) { return at + ": malformed JSON"; }
    if (!obj || typeof obj !== "object" || Array.isArray(obj)) return at + ": not a JSON object";
    var extra = Object.keys(obj).filter(function (k) { return KEYS.indexOf(k) < 0; });
    if (extra.length) return at + ": unknown key '" + extra[0] + "' (allowed: " + KEYS.join(", ") + ")";
    if (typeof obj.id === "number" && Number.isInteger(obj.id)) obj.id = String(obj.id);
    if (typeof obj.id !== "string" || !obj.id.trim()) return at + ", field 'id': missing or not a string";
    if (!("label" in obj)) return at + ", field 'label': required field missing";
    var binary = function (v) { return v === undefined || v === null || v === 0 || v === 1; };
    if (obj.label === undefined || !binary(obj.label)) return at + ", field 'label': must be 0, 1 or null";
    if (!binary(obj.score)) return at + ", field 'score': must be 0, 1 or null";
    var p = obj.p_success;
    if (p !== undefined && p !== null && (typeof p !== "number" || !(p >= 0 && p <= 1))) {
      return at + ", field 'p_success': must be a number from 0 to 1 or null";
    }
    var texts = ["note", "time", "data", "verdicts"];
    for (var i = 0; i < texts.length; i++) {
      var v = obj[texts[i]];
      if (v !== undefined && v !== null && typeof v !== "string") return at + ", field '" + texts[i] + "': must be a string or null";
    }
    return obj;
  }

  function fromRecord(o) {
    return { mark: o.label === 1 ? "1" : o.label === 0 ? "0" : "u", note: o.note || "",
             score: o.score === undefined ? null : o.score,
             p_success: o.p_success === undefined ? null : o.p_success, time: o.time || null };
  }

  // opts: {key, ids (row order), known(id), verdict(id) -> {score, p_success, status}, data, verdicts, onError(text),
  //        seed: {token, files, marks: {id: labels-file record}} or undefined}
  function store(opts) {
    var marks = {};  // id -> {mark, note, score, p_success, time}
    var kept = true, seeded = null, fromFiles = 0;
    try {
      var raw = window.localStorage.getItem(opts.key);
      var obj = raw ? JSON.parse(raw) : {};
      seeded = obj.seeded || null;
      Object.keys(obj.labels || {}).forEach(function (id) { if (opts.known(id)) marks[id] = obj.labels[id]; });
    } catch (e) { kept = false; }

    function save() {
      if (!kept) return;
      var keep = {};
      Object.keys(marks).forEach(function (id) { var m = marks[id]; if (m.mark || m.note) keep[id] = m; });
      try { window.localStorage.setItem(opts.key, JSON.stringify({ version: 1, labels: keep, seeded: seeded })); }
      catch (e) { kept = false; opts.onError("the browser refused to keep the labels (" + e.name + "): export them before closing"); }
    }
    function entry(id) { return marks[id] || { mark: "", note: "", score: null, p_success: null, time: null }; }
    function mark(id) { return entry(id).mark || ""; }
    function disagrees(id) {
      var m = mark(id), v = opts.verdict(id);
      return (m === "1" || m === "0") && v.status === "ok" && (v.score === 0 || v.score === 1) && v.score !== labelValue(m);
    }
    function set(id, value) {
      var m = entry(id), v = opts.verdict(id);
      m.mark = value;
      m.score = v.score === undefined ? null : v.score;
      m.p_success = v.p_success === undefined ? null : v.p_success;
      m.time = new Date().toISOString();
      marks[id] = m;
      save();
    }
    function setNote(id, note) {
      var m = entry(id);
      if ((m.note || "") === note) return false;
      m.note = note;
      marks[id] = m;
      save();
      return true;
    }
    function counts() {
      var c = { labelled: 0, unsure: 0, disagree: 0, notesOnly: 0 };
      opts.ids.forEach(function (id) {
        var m = mark(id);
        if (m) c.labelled++;
        if (m === "u") c.unsure++;
        if (disagrees(id)) c.disagree++;
        if (!m && entry(id).note) c.notesOnly++;
      });
      return c;
    }
    function exportText() {
      var lines = [];
      opts.ids.forEach(function (id) {
        var m = marks[id];
        if (!m || !m.mark) return;
        lines.push(JSON.stringify({ id: id, label: labelValue(m.mark), note: m.note ? m.note : null,
                                    score: m.score === undefined ? null : m.score,
                                    p_success: m.p_success === undefined ? null : m.p_success, time: m.time || null,
                                    data: opts.data || null, verdicts: opts.verdicts || null }));
      });
      return lines;
    }
    // -> {refused: [why...]} or {applied, foreign: [ids not on the page]}
    function importText(text) {
      var got = [], refused = [];
      text.split(/\r?\n/).forEach(function (line, i) {
        if (!line.trim()) return;
        var r = parseLine(i === 0 ? line.replace(/^\uFEFF/, "") : line, i + 1);
        if (typeof r === "string") refused.push(r); else got.push(r);
      });
      if (refused.length || !got.length) return { refused: refused.length ? refused : ["no labels in the file"] };
      var applied = 0, foreign = [];
      got.forEach(function (o) {
        if (!opts.known(o.id)) { foreign.push(o.id); return; }
        marks[o.id] = fromRecord(o);
        applied++;
      });
      save();
      return { applied: applied, foreign: foreign };
    }
    var seed = opts.seed;
    if (seed && seed.token && seed.token !== seeded) {  // this writing of the page: its labels files, as imported
      Object.keys(seed.marks || {}).forEach(function (id) {
        if (!opts.known(id)) return;
        marks[id] = fromRecord(seed.marks[id]);
        fromFiles++;
      });
      seeded = seed.token;
      save();
    }
    return { kept: function () { return kept; }, entry: entry, mark: mark, disagrees: disagrees, set: set,
             setNote: setNote, counts: counts, exportText: exportText, importText: importText,
             fromFiles: function () { return fromFiles; } };
  }

  return { store: store, parseLine: parseLine, labelValue: labelValue };
})();
