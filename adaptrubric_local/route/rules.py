"""The rules router: a deterministic, model-free family for an instruction from general features of
its text, with no rule keyed to a particular instruction: question form, steps vs outcomes, background
sentences standing in for a later "it", composite only for independent sub-goals (`_combine`).
Clauses come from clause.py, words from a `Lexicon`; `explain_rules` shows the reading (accuracy:
docs/benchmarks.md). Knows nothing about engines, prompts or trajectories.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..types import RouteResult
from .clause import INFO_ANYWHERE, classify_clause, is_step, normalise_verb, split_clauses, strip_prefix
from .lexicon import Lexicon, load_lexicon

_QUESTION = re.compile(r"^(?:what|which|who|whom|whose|when|where|why|how|is|are|was|were|does|do|did|"
                       r"has|have|had)\b(?!\s+(?:not|n't)\b)", re.I)
_QUESTION_NO_MARK = re.compile(r"^(?:what|which|who|whom|whose|how (?:many|much|long|far|often|old))\b", re.I)
_APP = re.compile(r"\b(?:in|on|using|via)\s+(?:the\s+)?((?-i:[A-Z][\w'-]*)(?:\s+(?-i:[A-Z][\w'-]*)){0,2})", re.I)
_SENDS_PREVIOUS = re.compile(r"^\w+(?:\s+\w+)?\s+(?:it|them|(?:this|that|these|those)(?:\s+\w+)?\s*"
                             r"(?:$|[.,;]|to\b|with\b|via\b|on\b|in\b|by\b))", re.I)
_REQUEST_QUESTION = re.compile(r"^(?:can|could|would|will)\s+you\b", re.I)
_STRENGTH = {None: -1, "start": 0, "and": 1, "or": 1, "then": 2, "sentence": 3}


def route_rules(instruction: str, lexicon: Lexicon | None = None) -> RouteResult:
    """Deterministic family for `instruction` (no model), with `lexicon` (default: the bundled one)."""
    return RouteResult(category=explain_rules(instruction, lexicon).category, mode="rules")


@dataclass
class Clause:
    """One clause of an instruction as the rules router reads it."""

    boundary: str  # what separates it from the clause before: start | and | or | then | sentence
    verb: str  # its head verb, as the lexicon spells it
    text: str  # the clause without politeness and adverb prefixes
    family: str  # the family of this clause alone
    step: bool = False  # only leads to the outcome (open, find, navigate ...)


@dataclass
class RulesReading:
    """How the rules router reached its family: the clauses, the background and the deciding rule."""

    category: str
    rule: str  # question | question_then_action | no_verb | steps_only | single | combined
    clauses: list[Clause] = field(default_factory=list)
    context: list[str] = field(default_factory=list)


def explain_rules(instruction: str, lexicon: Lexicon | None = None) -> RulesReading:
    """The rules router's reading of `instruction` (route_rules returns its category)."""
    lex = lexicon if lexicon is not None else load_lexicon()
    first = strip_prefix(instruction)
    first_sentence = re.split(r"(?<=[.!?])\s", first, maxsplit=1)[0]
    if (_QUESTION.match(first) and (first_sentence.rstrip().endswith("?") or _QUESTION_NO_MARK.match(first))) \
            or re.match(r"^tel+ me\b", first, re.I):
        rest = first[len(first_sentence):].strip()
        if rest and not lex.refers_to_answer.search(rest):  # "What is X? Then turn on Wi-Fi": a second sub-goal
            after = explain_rules(rest, lex)
            if after.category not in ("info_query", "general") and after.rule != "no_verb":
                return RulesReading("composite_workflow", "question_then_action", after.clauses, after.context)
        return RulesReading("info_query", "question")
    parsed, pending, context = [], None, []
    for kind, clause in split_clauses(instruction, lex):
        body = strip_prefix(clause)
        pending = _stronger(pending, kind)
        if re.match(r"^(?:do not|don'?t|never|without)\b", body, re.I):
            continue
        verb, body = normalise_verb(body, lex)
        if verb:
            fam = classify_clause(verb, body, lex, " ".join(context))
            if fam == "create_modify" and verb not in lex.item_only_verbs and parsed and parsed[-1].step \
                    and re.search(r"\b(?:settings|preferences|options|control panel)\b", parsed[-1].text, re.I):
                fam = "state_navigation"  # "open the settings and change the tab size"
            parsed.append(Clause(pending, verb, body, fam, is_step(verb, body, lex)))
            pending = None
        else:
            context.append(body)  # a background sentence: what a later "it"/"that" may stand for
    if not parsed:
        return RulesReading(_fallback_family(instruction, lex), "no_verb", parsed, context)
    outcomes, carry = [], None
    for p in parsed:  # a step's boundary carries over to the next outcome clause
        if not p.step or (p.verb == "check" and INFO_ANYWHERE.search(p.text)):
            outcomes.append((_stronger(carry, p.boundary), p.verb, p.text, p.family))
            carry = None
        else:
            carry = _stronger(carry, p.boundary)
    last = parsed[-1]  # "..., then open the X app" ends the task in that app: an outcome, not a step
    if last.verb in ("open", "launch") and last.boundary == "then" and last.step:
        outcomes.append((last.boundary, last.verb, last.text, last.family))
    if not outcomes:
        return RulesReading(_step_family(parsed[0].verb, parsed[0].family), "steps_only", parsed, context)
    rule = "single" if len(outcomes) == 1 else "combined"
    return RulesReading(_combine(outcomes, instruction, lex), rule, parsed, context)


def _stronger(a: str | None, b: str) -> str:
    return a if _STRENGTH[a] > _STRENGTH[b] else b


def _fallback_family(instruction: str, lex: Lexicon) -> str:
    """Family when no clause has a known action verb."""
    sentences = [strip_prefix(x) for x in re.split(r"(?<=[.!?])\s+", instruction) if x.strip()]
    if any(x.rstrip().endswith("?") and not _REQUEST_QUESTION.match(x) for x in sentences):
        return "info_query"
    return "state_navigation" if lex.setting.search(instruction) else "general"


def _step_family(verb: str, fam: str) -> str:
    """The family of an instruction made only of steps, from its first step's verb and family."""
    if verb in ("find", "check", "look", "locate"):
        return "info_query"
    if verb in ("fill", "enter", "type", "input", "select", "choose", "click", "tap"):
        return "create_modify"
    return fam if fam != "general" else "state_navigation"


def _words(text: str, lex: Lexicon) -> set[str]:
    return {w[:-1] if w.endswith("s") and len(w) > 4 else w for w in re.findall(r"[a-z][a-z0-9]+", text.lower())
            if w not in lex.stop_words and w not in lex.verbs}


def _app(body: str) -> str | None:
    """The app or site a clause names ("... in Pro Expense", "on Mastodon"), if any."""
    m = _APP.search(body)
    return m.group(1).lower() if m else None


def _combine(outcomes, instruction: str, lex: Lexicon) -> str:
    """One family for the outcome clauses: a single goal, or composite_workflow.

    Independent sub-goals (composite) are outcomes of different families that do not build on each
    other: a message after a change it does not carry, an explicit answer after an action, a new
    sentence or "then" clause that neither refers back nor shares content words, or actions in two
    different named apps. Filling a cart before paying is one purchase.
    """
    if any(o[1] in lex.purchase_verbs for o in outcomes):
        outcomes = [o for o in outcomes if o[1] in lex.purchase_verbs or not lex.cart.search(o[2])]
    fams = [o[3] for o in outcomes]
    if len(outcomes) == 1:
        return fams[0]
    if len(set(fams)) >= 3:
        return "composite_workflow"
    seen_words = _words(outcomes[0][2], lex)
    for i, (kind, verb, body, fam) in enumerate(outcomes[1:], 1):
        words = _words(body, lex)
        refers_back = bool(lex.pronoun.search(body)) or bool((words & seen_words) - lex.kind_nouns)
        prev_fams = {o[3] for o in outcomes[:i]}
        if fam == "communication" and prev_fams - {"communication", "info_query"} and not _SENDS_PREVIOUS.match(body):
            return "composite_workflow"  # a message beside a change: the change is not just its content
        if fam == "communication" and "info_query" in prev_fams and not (words & seen_words):
            return "composite_workflow"
        if fam not in prev_fams and not refers_back and _app(body) and \
                {_app(o[2]) for o in outcomes[:i]} - {None, _app(body)}:
            return "composite_workflow"  # two different apps, nothing carried between them
        if fam == "info_query" and verb in lex.answer_verbs and prev_fams - {"info_query"}:
            return "composite_workflow"  # an explicit answer request is a deliverable of its own
        if not refers_back and kind in ("then", "sentence") and fam != "info_query":
            return "composite_workflow"
        seen_words |= words
    if fams[-1] == "communication" and _SENDS_PREVIOUS.match(outcomes[-1][2]) and lex.message_item.search(
            " ".join(o[2] for o in outcomes[:-1])):
        return "communication"  # a message written and then sent: the sending is the outcome
    if "communication" in fams and set(fams) <= {"communication", "info_query"}:
        return "communication"  # a look-up whose result only feeds the message
    if fams[0] == "info_query" and outcomes[0][1] not in lex.answer_verbs and set(fams) - {"info_query"} \
            and not any(lex.file_object.search(o[2]) for o in outcomes[1:]):  # an answer written to a file stays
        return next(f for f in fams if f != "info_query")  # "find out X and add a reminder for it"
    # one goal reached through several actions: a setting outcome wins, else the first outcome
    if "state_navigation" in fams and fams[0] == "transfer":
        return "state_navigation"
    return fams[0]
