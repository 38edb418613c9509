"""One clause as the rules router reads it: where an instruction's clauses begin and end (at "then",
";", ",", "and", "or", quoted payloads masked), a clause's head verb (with "re-" verbs, "use X to
<verb>" and "check out"), and the clause's family from its verb refined by its object. The words come
from a `Lexicon` passed to every function; the grammar is here. Knows nothing about how clauses
combine into the instruction's family (rules.py).
"""
from __future__ import annotations

import re

from .lexicon import Lexicon

_QUOTED = re.compile(r'"[^"]*"|“[^”]*”|‘[^’]*’|(?<![A-Za-z])\'[^\']{1,200}\'(?![A-Za-z])')
_PAYLOAD = re.compile(r"\b(?:with (?:the )?(?:message|text|content|body)|the following (?:text|content|songs)"
                      r"|saying|that says)\b\s*:?.*$", re.I)
_BOUNDARY = re.compile(r"(?P<b>[.;!?](?:\s+|(?=(?-i:[A-Z])))|[:]\s+|,\s*(?:and\s+)?(?:then\s+)?"
                       r"|\s+and\s+then\s+|\s+then\s+|\s+and\s+(?:also\s+)?|\s+or\s+|\s+otherwise\s+)", re.I)
_PREFIX = re.compile(
    r"^(?:(?:hey|hi|hello|computer|ok(?:ay)?|now|also|then|first|finally|next|just|so)\b[,!]?\s*)*"
    r"(?:(?:please|kindly)\s+)?(?:(?:can|could|would|will)\s+you\s+(?:please\s+)?)?"
    r"(?:(?:please\s+)?(?:help|assist)\s+(?:me\s+)?(?:to\s+)?)?(?:please\s+)?"
    r"(?:i\s+(?:want|need|would\s+like|'d\s+like|wish)\s+(?:you\s+)?to\s+)?(?:please\s+)?"
    r"(?:(?:go\s+ahead\s+and|try\s+to|make\s+sure\s+to)\s+)?"
    r"(?:(?:recursively|quickly|carefully|immediately|permanently|manually|simply|only|directly|kindly|"
    r"successfully|completely|individually|separately)\s+)?", re.I)
INFO_ANYWHERE = re.compile(r"\b(?:to (?:check|see|find out) (?:if|whether)|respond with|express your answer|"
                           r"answer (?:with|in)|only respon\w* (?:with )?the)\b", re.I)
_POSSESSIVE_PRONOUN_OBJ = re.compile(r"^\s*(?:it|that|this|them|these|those)\b", re.I)


def strip_prefix(clause: str) -> str:
    """The clause without greetings, politeness, "can you", "I want you to" and adverb prefixes."""
    prev, clause = None, clause.strip().strip("\"'“”‘’ ")
    while prev != clause:
        prev = clause
        clause = _PREFIX.sub("", clause, count=1).strip().strip("\"'“”‘’ ")
    return clause


def head_verb(clause: str, lex: Lexicon) -> str | None:
    """The lexicon verb (or phrase) the lower-cased `clause` starts with, longest first."""
    low = clause.lower()
    return next((v for v in lex.verb_keys if low.startswith(v) and (len(low) == len(v) or not low[len(v)].isalnum())),
                None)


def classify_clause(verb: str, clause: str, lex: Lexicon, context: str = "") -> str:
    """Family of one clause from its head verb, refined by its object.

    `context` is the text of the instruction's background sentences (no action verb); it stands in
    for a pronoun object ("Could you move it to the bottom?").
    """
    low = clause.lower()
    obj = low[len(verb):]
    if context and (m := _POSSESSIVE_PRONOUN_OBJ.match(obj)):  # the pronoun stands for what the background is about
        obj = f" {context.lower()}{obj[m.end():]}"
    fam = _classify_by_verb(verb, low, obj, lex)
    if fam == "create_modify" and lex.behaviour.match(low):
        return "state_navigation"  # "set VS Code to wrap lines", "make Chrome open a blank page"
    # an action on a setting or a piece of the interface (dock, taskbar, volume) changes state, not an item
    if fam in ("create_modify", "transfer") and verb not in lex.item_only_verbs and lex.setting.search(
            obj.split(" to ")[0] if verb not in ("move", "put", "place") else obj) \
            and not lex.text_edit.search(obj.split(" to ")[0]) and not lex.file_object.search(obj) \
            and not lex.data_object.search(obj.split(" to ")[0]):
        return "state_navigation"
    return fam


def _classify_by_verb(verb: str, low: str, obj: str, lex: Lexicon) -> str:
    """Family of a clause from its head verb's family and the verb-specific object tests."""
    fam = lex.verbs[verb]
    if verb == "use":
        m = re.search(r"\bto\s+(.*)$", obj)
        inner = strip_prefix(m.group(1)) if m else ""
        v2 = head_verb(inner, lex)
        return classify_clause(v2, inner, lex) if v2 else "general"
    if verb == "show me" and re.search(r"\b(?:on the map|route|directions|page)\b", obj) and not \
            re.search(r"\b(?:how|what|which|who|when|where)\b", obj):
        return "state_navigation"  # a view to reach, not a value to read out
    if verb in ("tell", "tell me", "show me", "get me", "give me") or INFO_ANYWHERE.search(low):
        return "info_query"
    if fam == "delete_cleanup":
        if verb in ("clear", "remove", "delete", "disable") and lex.setting.search(obj) and not re.search(
                r"\b(?:data|history|cache|cookies|files?|items?|messages?|notes?|accounts?|apps?)\b", obj):
            return "state_navigation"
        if verb == "remove" and lex.text_edit.search(obj) and not re.search(r"\b(?:files?|folders?)\b", obj):
            return "create_modify"
        if verb == "cancel" and not re.search(r"\b(?:order|subscription|event|appointment|meeting)\b", obj):
            return "general"
        return fam
    if special := _by_specific_verb(verb, obj, lex):
        return special
    if fam == "create_modify":
        if verb in ("set", "change", "update", "make", "adjust", "configure", "switch", "apply") and \
                lex.setting.search(obj) and not lex.text_edit.search(obj.split(" to ")[0]):
            return "state_navigation"
        if verb in ("add", "insert", "attach") and " to " in obj and lex.file_object.search(obj.split(" to ")[0]):
            return "transfer"
        if verb == "save" and re.search(r"\b(?:as|to)\b.*(?:/|~|folder|directory|path)", obj) and "file" in obj \
                and "new file" not in obj:
            return "transfer"
        return fam
    if fam == "state_navigation":
        if verb in ("show", "display") and lex.chart.search(obj):
            return "create_modify"
        if verb == "turn" and re.search(r"\binto\b", obj):
            return "create_modify"  # "turn the text into a list" converts an item
        if verb == "open" and re.match(r"\s+(?:a\s+)?new\s+(?:[\w-]+\s+){0,2}?(?:issue|ticket|account|"
                                                 r"document|file|note|project|merge request|pull request|"
                                                 r"conversation|chat|thread|discussion|event)\b", obj):
            return "create_modify"  # opening a new item of a kind makes it
        return fam
    if fam == "transfer" and verb == "export" and re.search(r"\bas (?:a |an )?(?:pdf|csv|png|image)\b", obj) \
            and " to " not in obj:
        return "create_modify"
    if fam == "general" and verb in ("start", "run", "play", "stop") and re.search(
            r"\b(?:recording|new (?:note|file|document|chat))\b", obj):
        return "create_modify"
    if verb == "order" and not re.search(r"\b(?:buy|purchase|food|pizza|taxi|ride)\b", low) and re.search(
            r"\border (?:the|them|by|in)\b", low):
        return "create_modify"
    return fam


def _by_specific_verb(verb: str, obj: str, lex: Lexicon) -> str | None:
    """Verbs whose family depends on what follows them (let X know, leave a comment, take a photo ...)."""
    if verb == "let":
        return "communication" if re.search(r"\bknow\b", obj) else "general"
    if verb == "leave":
        return "communication" if re.search(r"^\s+(?:a|an|the|my|your)?\s*(?:\w+\s+)?(?:comments?|repl(?:y|ies)|"
                                            r"messages?|notes? (?:to|for)|feedback|voice ?mail)\b", obj) \
            else "create_modify" if re.search(r"\b(?:review|rating)\b", obj) else "general"
    if verb == "take":
        return "state_navigation" if re.match(r"\s+me\s+to\b", obj) else "create_modify"
    if verb == "fix":
        return "general" if re.search(r"\b(?:error|bug|crash|exception|failing|broken|issue)", obj) and not \
            re.search(r"\b(?:typo|spelling|grammar|format)", obj) else "create_modify"
    if verb in ("put", "place"):
        return "general" if re.match(r"\s+(?:an?\s+)?order\b", obj) else \
            "transfer" if lex.place.search(obj) else "create_modify"
    if verb == "move" and lex.position.search(obj) and not lex.place.search(obj):
        return "create_modify"  # moving within the same document or screen is an edit
    if verb == "save" and (re.search(r"\battachments?\b", obj) or (lex.place.search(obj) and not re.search(
            r"\b(?:new|as)\b", obj))):
        return "transfer"
    return None


def _mask_quote(m: re.Match, lex: Lexicon) -> str:
    inner = m.group(0)[1:-1].strip()
    if lex.file_object.search(inner) and " " not in inner:
        return f" {inner} "  # a file name is part of the object, not a payload
    if re.fullmatch(r"[A-Za-z][A-Za-z -]{0,30}", inner) and len(inner.split()) <= 3 and head_verb(inner.lower(), lex):
        return f" {inner} "  # an emphasised action word such as "turn off"
    return " QUOTED "


def split_clauses(instruction: str, lex: Lexicon) -> list[tuple[str, str]]:
    """(boundary kind, clause text) pieces, with quoted payloads masked."""
    text = _QUOTED.sub(lambda m: _mask_quote(m, lex), instruction)
    parts = _BOUNDARY.split(_PAYLOAD.sub(" QUOTED", text))  # clause, boundary, clause, ..., clause
    kinds = ["start", *("then" if "then" in b else "sentence" if b[:1] in ".;!?:" else "and" if b.startswith(
        ("and", ",")) else "or" for b in (x.strip().lower() for x in parts[1::2]))]
    return [(k, p.strip()) for k, p in zip(kinds, parts[::2]) if p.strip()]


def normalise_verb(body: str, lex: Lexicon) -> tuple[str | None, str]:
    """(head verb, clause) after undoing "re-" (reopen -> open), "use X to <verb>" and "check out X"."""
    verb = head_verb(body, lex)
    if verb is None and (m := re.match(r"^re-?(?=[a-z])", body, re.I)) and head_verb(body[m.end():], lex):
        body = body[m.end():]
        verb = head_verb(body, lex)
    if verb == "use":  # "use X to <verb> ...": the inner verb is the action
        m = re.search(r"\bto\s+(.*)$", body, re.I)
        inner = strip_prefix(m.group(1)) if m else ""
        if head_verb(inner.lower(), lex):
            verb, body = head_verb(inner.lower(), lex), inner
    if verb == "check out" and re.match(r"check\s*out\s+(?:the|my|our|their|his|her|its|this|that|these|those|a|an|"
                                        r"all|any|what|which|who|how|if|whether)\b", body, re.I):
        verb = "check"  # "check out the issue" looks something up; a bare "check out" pays
    return verb, body


def is_step(verb: str, body: str, lex: Lexicon) -> bool:
    """Whether a clause only leads to the outcome (open, find, follow the pattern, ...)."""
    if verb == "follow":
        return bool(re.search(r"\b(?:pattern|format|instructions?|steps?|naming|convention|template|guide)",
                              body, re.I))
    return verb in lex.step_verbs
