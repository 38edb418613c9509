"""The cards of the review page: for each verdict, what the verifier was shown and what it said.

A card holds the trajectory's instruction, platform and answer, the family and cues of the verdict, the
screenshots the run selected (with reasons) and those left out, the compiled evidence, the verifier
prompt as sent, the raw output with the span of the verdict block the parser read, and SCORE,
p_success, status, label and outcome (TP/FP/FN/TN, unparsed, error, missing, unlabelled). The selection
and the evidence are computed again by the pipeline's own `prepare()` under the run's settings from the
config sidecar (no model is called); a card says so when the selection no longer matches `n_images`.
Knows nothing about HTML or files (see `review_page`).
"""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import replace

from ..stages.evidence import compile_evidence
from ..types import Trajectory, Verdict
from ..verdict import last_block

OUTCOMES = ("FP", "FN", "unparsed", "error", "missing", "TP", "TN", "unlabelled")  # the page's filter order
SAMPLE_SEPARATOR = "----- sample -----"  # pipeline.vote joins the k sampled outputs with it


def outcome(v: Verdict) -> str:
    """TP/FP/FN/TN for a parsed, labelled verdict; otherwise its status or 'unlabelled'."""
    if v.status in ("error", "missing"):
        return v.status
    if v.status != "ok" or v.score not in (0, 1):
        return "unparsed"
    if v.label not in (0, 1):
        return "unlabelled"
    return {(1, 1): "TP", (0, 1): "FP", (1, 0): "FN", (0, 0): "TN"}[(v.label, v.score)]


def outcome_counts(outcomes: Iterable[str]) -> dict[str, int]:
    """Cards per outcome (of `outcome`): the counts the page's filter chips show."""
    found = Counter(outcomes)
    return {o: found[o] for o in OUTCOMES}


def error_confidence(v: Verdict) -> float | None:
    """The probability the verdict put on the wrong class: p_success for a failure, 1 - p_success for
    a success (high on a false positive the verifier was sure of); None without label or p_success."""
    if v.label not in (0, 1) or v.p_success is None:
        return None
    return float(v.p_success) if v.label == 0 else 1.0 - float(v.p_success)


def block_span(v: Verdict) -> list[int] | None:
    """[start, end) of the verdict block the parser read in `raw` (parsed single outputs only)."""
    if v.status != "ok" or not v.raw or SAMPLE_SEPARATOR in v.raw:
        return None
    if (b := last_block(v.raw)) is None:
        return None
    return [b.lines[0].offset, b.lines[-1].offset + len(b.lines[-1].line.rstrip("\n"))]


class Preparer:
    """Runs `AdaptRubric.prepare` with a verdict's family and cues under the run's settings, one
    pipeline (no engine) per distinct (family, cues)."""

    def __init__(self, run_config: dict | None = None):
        from ..bank import load_bank
        from ..pipeline import PipelineConfig
        from ..prompts import load_prompts

        cfg = run_config or {}  # the PipelineConfig fields that decide what the verifier was shown
        kept = {k: cfg[k] for k in ("max_images", "dedupe_frames", "coarse", "fine", "bank_path") if k in cfg}
        self.notes: list[str] = []
        try:
            self.bank = load_bank(kept.get("bank_path"))
        except (OSError, ValueError) as exc:
            self.notes.append(f"the run's rubric bank could not be read ({exc}); families looked up in the "
                              "bundled bank")
            kept.pop("bank_path", None)
            self.bank = load_bank(None)
        self.base = PipelineConfig(router="rules", cue_filter=False, **kept)
        self.prompts = load_prompts()
        self._pipes: dict = {}
        for what, recorded, now in (("prompt set", cfg.get("prompts_sha"), self.prompts.sha),
                                    ("rubric bank", cfg.get("bank_sha"), self.bank.sha)):
            if recorded and recorded != now:
                self.notes.append(f"the run's {what} had sha {recorded}, the one the cards' verifier prompts are "
                                  f"rendered with has {now}: the prompts shown may differ from what was sent")

    def prepare(self, traj: Trajectory, v: Verdict):
        """The Prepared of this trajectory as the run saw it (raises on failure)."""
        from ..pipeline import AdaptRubric

        family = v.category if v.category in self.bank.family_names else self.bank.fallback
        key = (family, tuple(v.cues or ()))
        if key not in self._pipes:
            cfg = replace(self.base, fixed_category=family, manual_cues=list(v.cues) if v.cues else None)
            self._pipes[key] = AdaptRubric(None, cfg, bank=self.bank, prompts=self.prompts)
        return self._pipes[key].prepare(traj)


def _frames(traj: Trajectory, prepared) -> tuple[list[dict], list[dict]]:
    """(selected frames with their reasons, frames left out), chronological."""
    sel = prepared.selection if prepared is not None else None
    chosen = set(sel.indices) if sel else set()
    selected, left = [], []
    for i, s in enumerate(traj.steps):
        if not s.screenshot:
            continue
        row = {"step": i + 1, "path": s.screenshot, "action": s.action or ""}
        if i in chosen:
            selected.append({**row, "reason": sel.reasons.get(i, "")})
        else:
            why = "near-duplicate of a shown screen" if sel and i in sel.dropped_duplicates else "not selected"
            left.append({**row, "why": why})
    return selected, left


def _said(d: dict | None) -> str:
    if not d:
        return "nothing"
    if d.get("status") != "ok":
        return d.get("status") or "nothing"
    p = d.get("p_success")
    return f"SCORE {d.get('score')}" + (f" (p_success {p:.2f})" if isinstance(p, (int, float)) else "")


def cascade_note(v) -> str:
    """Who decided a cascade's line, why it went to the judge, and what each of the two said."""
    why = ", ".join(v.escalated) if v.escalated else "not sent to the judge"
    text = f"decided by the {v.decided_by} ({why})"
    if v.judge_error:  # the trajectory loaded and the student answered: the judge's call is what failed
        # in a reviewer's words: its kind prefix and the record it names left out (pipeline.py's)
        kind, _, rest = v.judge_error.partition(": ")
        rest = re.sub(r"^(?:.*?, )?record \S+: ", "", rest) if kind in ("error", "unparsed") else v.judge_error
        failure = (f"an unparsable answer: {rest}" if kind == "unparsed" else rest)[:200]
        return (f"{text}; the judge gave no verdict ({failure}), so the student's "
                f"{_said(v.student)} stands (`score --resume` asks the judge again)")
    if v.escalated:
        text += f"; the student said {_said(v.student)}, the judge {_said(v.judge)}"
    return text


def card(v: Verdict, traj: Trajectory | None, preparer: Preparer) -> dict:
    """One card as plain JSON-ready data (paths absolute; the page writer turns them into links)."""
    c = {"id": str(v.id), "instruction": traj.instruction if traj else None,
         "platform": (traj.platform if traj else None) or v.platform, "family": v.category,
         "route_parsed": v.route_parsed, "cues": list(v.cues or []), "dropped_cues": list(v.dropped_cues or []),
         "status": v.status, "score": v.score, "p_success": v.p_success,
         "p_success_calibrated": v.p_success_calibrated, "label": v.label,
         "outcome": outcome(v), "error_confidence": error_confidence(v),
         "evidence_sufficient": v.evidence_sufficient, "missing_evidence": v.missing_evidence,
         "raw": v.raw, "block": block_span(v), "parse_error": v.parse_error, "error": v.error,
         "n_images": v.n_images, "hit_cap": bool(getattr(v, "hit_cap", False)),
         "task_id": (traj.task_id if traj else None) or v.task_id,
         "notes": [], "selected": [], "left_out": [], "evidence": None, "prompt": None,
         "answer": traj.answer if traj else None, "source": traj.source if traj else None}
    if v.raw and SAMPLE_SEPARATOR in v.raw:
        c["notes"].append("majority vote over sampled outputs: no single block is highlighted")
    if getattr(v, "decided_by", None):  # a cascade's line: the student's and the judge's verdicts side by side
        c.update(decided_by=v.decided_by, student=v.student, judge=v.judge)
        c["notes"].append(cascade_note(v))
    if traj is None:
        c["notes"].append("this id is not in the data set: no instruction or screenshots to show")
        return c
    if v.status == "missing":
        c["notes"].append("no verdict for this trajectory in the verdict file (the run did not reach it, or the file "
                          "is another data set's): the frames shown are those the bank's fallback family would select")
    prepared = None
    try:
        prepared = preparer.prepare(traj, v)
    except Exception as exc:  # one trajectory that cannot be prepared must not lose the page
        c["notes"].append(f"the screenshot selection could not be recomputed: {exc}")
    c["selected"], c["left_out"] = _frames(traj, prepared)
    if prepared is not None:  # what the engine got: this text, the selected screenshots, this suffix
        c["prompt"] = {"text": prepared.prompt.text, "suffix": prepared.prompt.suffix, "images": len(c["selected"])}
    if v.category is None and v.status != "missing":
        c["notes"].append("the verdict names no family: frames selected as for the bank's fallback family")
    if prepared is not None and v.status != "error" and v.n_images and v.n_images != len(c["selected"]):
        c["notes"].append(f"the verifier saw {v.n_images} screenshot(s) but the selection recomputed from the data "
                          f"has {len(c['selected'])}: the data or the settings changed since scoring")
    ev = compile_evidence(traj)
    c["evidence"] = {k: getattr(ev, k) for k in ("agent_answer", "typed_texts", "key_actions", "action_trace")}
    if preparer.base.ablation == "no_both":
        c["notes"].append("w/o Both run: the compiled evidence was not in the verifier prompt")
    return c


def build_cards(verdicts: list[Verdict], trajectories: list[Trajectory], run_config: dict | None = None,
                progress: bool = False, extra: dict[str, dict] | None = None) -> tuple[list[dict], list[str]]:
    """One card per verdict (in the order given) and the notes about the whole page; `extra` adds
    fields to the card of an id (the review order's reason, the compared verdict)."""
    from tqdm import tqdm

    by_id = {t.id: t for t in trajectories}
    prep = Preparer(run_config)
    cards = [card(v, by_id.get(str(v.id)), prep)
             for v in tqdm(verdicts, desc="review cards", unit="traj", disable=not progress, dynamic_ncols=True)]
    for c in cards:
        c.update((extra or {}).get(c["id"], {}))
    return cards, list(prep.notes)
