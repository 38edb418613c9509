"""The coarse stage's router g(I): pick one of the bank's task families for an instruction (paper §4.1).

Two modes. `model`: render the paper's router prompt (H.2) for an engine (for a bank with families
of its own, the same prompt listing that bank's families: `router_prompt`) and parse its single
`CATEGORY:` line (markdown, case and "composite workflow" spellings tolerated); anything else falls
back to the bank's fallback family (`general`) and is recorded as unparsed. `rules`: deterministic, model-free rules over general
features of the instruction, with no rule keyed to a particular instruction:
- clause structure: sentences and clauses split at "then", ";", ",", "and", "or", with quoted payloads
  masked; background sentences without an action verb stand in for a later "it"/"that";
- head verbs from a lexicon of GUI-task verb families ("re-" verbs, "use X to <verb>", "check out");
- object types refine the verb: settings and interface parts, data vs items, places vs positions,
  text-edit objects, file names, charts, app behaviour ("set X to <verb>");
- question form (a "can you ...?" request is not a question); look-ups and navigation are steps;
- composite only when independent sub-goals remain (see `_combine`).
`explain_rules` shows the reading; RULES_ESTIMATE states the measured accuracy (eval/router_accuracy.py).
Knows nothing about engines or trajectories.
"""
from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from typing import Optional, Sequence

from .types import FAMILIES, RouteResult

# Measured by eval/router_accuracy.py: --loso on ../shared/data/router_dev.jsonl, and --split fresh2 on
# tests/data/router_styled.jsonl (written before the router was run on it, never used to change it).
RULES_ESTIMATE = ("rules router: 84% leave-one-source-out on 85 dev instructions, 81% on 58 unseen "
                  "benchmark-style instructions (previous rules: 78%, 81%); expect less on real benchmark text")

# ----------------------------------------------------------------------------- model mode
_CATEGORY_LINE = re.compile(r"^\W*category\W*[:=][ \t]*(.*)$", re.I | re.M)


def _family_named(value: str, families: Sequence[str] = FAMILIES) -> Optional[str]:
    """The family a CATEGORY value names, tolerating markdown, case and spaces or hyphens for '_'."""
    words = [w.replace("-", "_") for w in re.findall(r"[a-z0-9]+(?:[_-][a-z0-9]+)*", value.lower())]
    for k in range(min(4, len(words)), 0, -1):  # "info_query", "state-navigation", "composite workflow"
        name = "_".join(words[:k])
        if name in families:
            return name
    return None


def parse_router_output(text: str, families: Sequence[str] = FAMILIES, fallback: str = "general") -> RouteResult:
    """Read the last `CATEGORY: <family>` line naming one of `families` (the bank's); unknown or
    missing -> `fallback` (the bank's fallback family), parsed=False."""
    hits = [_family_named(m.group(1), families) for m in _CATEGORY_LINE.finditer(text or "")]
    if hits and hits[-1]:
        return RouteResult(category=hits[-1], mode="model", raw=text, parsed=True)
    return RouteResult(category=fallback, mode="model", raw=text, parsed=False)


def router_prompt(prompts, bank, instruction: str) -> str:
    """The router prompt for `bank`: the paper's text (`prompts.router`) for the paper's families,
    else `prompts.router_bank` listing the bank's families (with the fallback last)."""
    from .prompts import render

    if bank.taxonomy == "paper" and not any(rs.router_description for rs in bank.families.values()):
        return render(prompts.router, "router", instruction=instruction)
    return bank_router_prompt(prompts, bank, instruction)


def bank_router_prompt(prompts, bank, instruction: str) -> str:
    """`prompts.router_bank` filled from `bank` (for the paper's bank this is the paper's text)."""
    from .prompts import render

    fb = bank.fallback
    names = [n for n in bank.families if n != fb] + [fb]
    lines = [f"- {n} : {_router_line(prompts, bank, n)}" for n in names]
    rules = []
    for rule in prompts.router_rules:
        named = {f for f in FAMILIES if re.search(rf"\b{f}\b", rule)}
        if named <= set(names):
            rules.append(f"{len(rules) + 1}. {render(rule, 'router_rules', fallback=fb)}")
    return render(prompts.router_bank, "router_bank", instruction=instruction, n_families=str(len(names)),
                  category_lines="\n".join(lines), decision_rules="\n".join(rules),
                  category_choices=" | ".join(names))


def _router_line(prompts, bank, name: str) -> str:
    rs = bank.families[name]
    return rs.router_description or prompts.router_descriptions.get(name) or rs.description


# ----------------------------------------------------------------------------- rules mode
_QUOTED = re.compile(r'"[^"]*"|“[^”]*”|‘[^’]*’|(?<![A-Za-z])\'[^\']{1,200}\'(?![A-Za-z])')
_PAYLOAD = re.compile(r"\b(?:with (?:the )?(?:message|text|content|body)|the following (?:text|content|songs)"
                      r"|saying|that says)\b\s*:?.*$", re.I)
_BOUNDARY = re.compile(r"(?P<b>[.;!?](?:\s+|(?=(?-i:[A-Z])))|[:]\s+|,\s*(?:and\s+)?(?:then\s+)?|\s+and\s+then\s+|\s+then\s+"
                       r"|\s+and\s+(?:also\s+)?|\s+or\s+|\s+otherwise\s+)", re.I)
_PREFIX = re.compile(
    r"^(?:(?:hey|hi|hello|computer|ok(?:ay)?|now|also|then|first|finally|next|just|so)\b[,!]?\s*)*"
    r"(?:(?:please|kindly)\s+)?(?:(?:can|could|would|will)\s+you\s+(?:please\s+)?)?"
    r"(?:(?:please\s+)?(?:help|assist)\s+(?:me\s+)?(?:to\s+)?)?(?:please\s+)?"
    r"(?:i\s+(?:want|need|would\s+like|'d\s+like|wish)\s+(?:you\s+)?to\s+)?(?:please\s+)?"
    r"(?:(?:go\s+ahead\s+and|try\s+to|make\s+sure\s+to)\s+)?"
    r"(?:(?:recursively|quickly|carefully|immediately|permanently|manually|simply|only|directly|kindly|"
    r"successfully|completely|individually|separately)\s+)?", re.I)

_QUESTION = re.compile(r"^(?:what|which|who|whom|whose|when|where|why|how|is|are|was|were|does|do|did|"
                       r"has|have|had)\b(?!\s+(?:not|n't)\b)", re.I)
_QUESTION_NO_MARK = re.compile(r"^(?:what|which|who|whom|whose|how (?:many|much|long|far|often|old))\b", re.I)
_INFO_ANYWHERE = re.compile(r"\b(?:to (?:check|see|find out) (?:if|whether)|respond with|express your answer|"
                            r"answer (?:with|in)|only respon\w* (?:with )?the)\b", re.I)

SETTING_WORDS = re.compile(
    r"\b(?:settings?|preferences?|default|home ?page|start ?page|wallpaper|desktop background|background "
    r"(?:picture|image|photo)|lock ?screen|theme|dark mode|light mode|night light|font size|language|"
    r"brightness|volume|ringtone|notifications?|wi-?fi|bluetooth|airplane|hotspot|auto-?save|autosave|"
    r"auto-?correct|time ?zone|display|resolution|screen timeout|shortcut|key ?binding|hotkey|indentation|"
    r"pop-?ups?|permissions?|automatically|every time|whenever|in the future|by default|zoom|dock|"
    r"do not disturb|location services|vibration|keyboard|cookies|taskbar|task bar|toolbar|tool bar|"
    r"sidebar|side bar|menu bar|status bar|title bar|panel|screen saver|screensaver|cursor|mouse|touchpad|"
    r"subtitles?|captions?|system sound|sound|power mode|battery saver|sleep|startup|on start|"
    r"feature|privacy|sync|scaling|orientation|accessibility|dark theme|light theme|home screen|widgets?|"
    r"power (?:plan|mode|settings)|performance mode|tab size|line numbers|word wrap|"
    r"(?:font|text|icons?)\b[\w' ]{0,30}\b(?:terminal|interface|menus?|system|editor|browser|phone)|"
    r"(?:terminal|interface|menu|system|editor|browser)(?:'s)? (?:font|text|icons?))\b", re.I)
# where an object goes: a place (folder, path, drive) or a position inside the same document/screen
PLACE = re.compile(r"\b(?:to|into|in|onto|under)\s+(?:the\s+|my\s+|a\s+(?:new\s+)?)?(?:[\w.'-]+\s+){0,3}?"
                   r"(?:folder|director(?:y|ies)|drive|desktop|downloads|documents|pictures|music|videos|home|"
                   r"trash|recycle bin|disk|usb|cloud|server|repo(?:sitory)?|namespace|album)\b"
                   r"|\b(?:to|into|in|under)\s+(?:~|/|[a-z]:\\)", re.I)
POSITION = re.compile(r"\b(?:to|at)\s+(?:the\s+)?(?:top|bottom|left|right|end|beginning|start|front|back|"
                      r"center|centre|middle)\b", re.I)
DATA_OBJECT = re.compile(r"\b(?:data|history|cache|files?|items?|messages?|notes?|accounts?|apps?|photos?|"
                         r"emails?|contacts?|events?|bookmarks?|downloads?|folders?)\b", re.I)
_POSSESSIVE_PRONOUN_OBJ = re.compile(r"^\s*(?:it|that|this|them|these|those)\b", re.I)
TEXT_EDIT_OBJECTS = re.compile(r"\b(?:whitespaces?|spaces?|highlight\w*|formatting|blank lines?|line breaks?|"
                               r"letters?|characters?|punctuation|words?|sentences?|paragraphs?|text|cells?|"
                               r"columns?|rows?|bold|italic|underline)\b", re.I)
FILE_OBJECT = re.compile(r"\.(?:png|jpe?g|gif|bmp|svg|pdf|docx?|xlsx?|pptx?|csv|txt|md|mp3|mp4|wav|zip|eml)\b",
                         re.I)
CHART = re.compile(r"\b(?:chart|bars?|graph|plot|diagram|table)\b", re.I)

_VERBS: dict[str, str] = {}
for fam, words in {
    "communication": "reply respond send text message email e-mail forward notify post re-post repost comment "
                     "share tweet toot remind invite dm tell_him tell_her tell_them call let ping inform ask greet "
                     "wish leave publish announce mention",
    "delete_cleanup": "delete remove clear uninstall erase empty discard trash purge wipe get_rid_of unsubscribe "
                      "cancel clean dismiss drop",
    "transfer": "move copy paste import export extract clone unzip unpack download upload back_up backup restore "
                "recover merge duplicate sync transfer attach save_as put place drag relocate migrate store fork",
    "state_navigation": "turn_on turn_off turn switch toggle enable disable activate deactivate configure set_up "
                        "mute unmute zoom pull_up show display navigate go_to go_back return_to open launch visit "
                        "browse search scroll expand collapse maximize minimize hide unhide lock unlock connect disconnect pair "
                        "allow block grant deny sign_out log_out close",
    "create_modify": "create add make new write type edit update modify rename change set fill enter input insert "
                     "schedule install rate review assign reduce increase decrease sort format capitalize "
                     "canonicalize calculate compute highlight bold crop resize rotate replace draft compose "
                     "record log mark save star_rating register book reorder convert adjust apply resolve "
                     "archive label tag pin bookmark favorite favourite sign fix align take draw paint capture design "
                     "generate append prepend split trim center centre indent translate summarize complete "
                     "approve reject group ungroup link underline italicize color colour annotate",
    "info_query": "tell_me show_me get_me give_me list count find_out answer identify check find look locate "
                  "determine return report",
    "general_step": "use",
    "general": "run start play stream watch listen kill force_quit terminate stop pause star upvote like boost "
               "follow buy purchase order checkout check_out pay like dislike vote debug troubleshoot solve win",
}.items():
    for w in words.split():
        _VERBS[w.replace("_", " ")] = fam.replace("_step", "")

STEP_VERBS = {"open", "go to", "navigate", "launch", "visit", "browse", "search", "find", "look", "locate",
              "check", "use", "log", "login", "sign", "click", "tap", "select", "choose", "fill", "enter",
              "type", "input", "follow", "scroll", "access", "pull up", "go"}
_VERB_KEYS = sorted(_VERBS, key=len, reverse=True)
_ANSWER_VERBS = {"tell", "tell me", "show me", "give me", "get me", "answer", "report", "return", "list", "count"}
_PRONOUN = re.compile(r"\b(?:it|its|them|they|their|this|that|these|those|him|her|each|the same|one)\b", re.I)
_STOP = set("the a an to of in on for from with and or my your our their this that these those all any each "
            "new into at by as be is are it them me i you he she his her its out up about".split())


def _strip_prefix(clause: str) -> str:
    prev = None
    clause = clause.strip().strip("\"'“”‘’ ")
    while prev != clause:
        prev = clause
        clause = _PREFIX.sub("", clause, count=1).strip().strip("\"'“”‘’ ")
    return clause


def _head_verb(clause: str) -> Optional[str]:
    low = clause.lower()
    for v in _VERB_KEYS:
        if low.startswith(v) and (len(low) == len(v) or not low[len(v)].isalnum()):
            return v
    return None


def _words(text: str) -> set[str]:
    out = set()
    for w in re.findall(r"[a-z][a-z0-9]+", text.lower()):
        if w in _STOP or w in _VERBS:
            continue
        out.add(w[:-1] if w.endswith("s") and len(w) > 4 else w)
    return out


def _classify_clause(verb: str, clause: str, context: str = "") -> str:
    """Family of one clause from its head verb, refined by its object.

    `context` is the text of the instruction's background sentences (no action verb); it stands in
    for a pronoun object ("Could you move it to the bottom?").
    """
    low = clause.lower()
    obj = low[len(verb):]
    m = _POSSESSIVE_PRONOUN_OBJ.match(obj)
    if context and m:  # the pronoun stands for what the background sentence talks about
        obj = f" {context.lower()}{obj[m.end():]}"
    fam = _classify_by_verb(verb, low, obj)
    if fam == "create_modify" and _BEHAVIOUR.match(low):
        return "state_navigation"  # "set VS Code to wrap lines", "make Chrome open a blank page"
    # an action on a setting or a piece of the interface (dock, taskbar, volume) changes state, not an item
    if fam in ("create_modify", "transfer") and verb not in _ITEM_ONLY_VERBS and SETTING_WORDS.search(
            obj.split(" to ")[0] if verb not in ("move", "put", "place") else obj) \
            and not TEXT_EDIT_OBJECTS.search(obj.split(" to ")[0]) and not FILE_OBJECT.search(obj) \
            and not DATA_OBJECT.search(obj.split(" to ")[0]):
        return "state_navigation"
    return fam


# "set/configure <app> to <verb>" and "make <App> <verb>": how an app behaves from now on
_BEHAVIOUR_VERBS = (r"(?:use|wrap|show|open|start|display|remember|ask|stop|run|load|play|save|sync|launch|hide|"
                    r"always|never|automatically|not)")
_BEHAVIOUR = re.compile(rf"^(?:set|configure|make)\s+(?:the\s+|my\s+)?(?:[\w.-]+\s+){{0,3}}?(?:to\s+)?"
                        rf"{_BEHAVIOUR_VERBS}\b", re.I)


# verbs that always make or edit an item, whatever the object is called
_ITEM_ONLY_VERBS = {"create", "add", "new", "write", "type", "draft", "compose", "install", "insert", "record",
                    "rename", "save", "export", "import", "copy", "paste", "download", "upload", "back up",
                    "backup", "restore", "clone", "merge", "extract", "duplicate", "schedule", "take", "draw",
                    "sign", "register", "book", "rate", "review", "calculate", "compute", "sort", "format"}


def _classify_by_verb(verb: str, low: str, obj: str) -> str:
    """Family of a clause from its head verb's family and the verb-specific object tests."""
    fam = _VERBS[verb]
    if verb == "use":
        m = re.search(r"\bto\s+(.*)$", obj)
        inner = _strip_prefix(m.group(1)) if m else ""
        v2 = _head_verb(inner)
        return _classify_clause(v2, inner) if v2 else "general"
    if verb == "show me" and re.search(r"\b(?:on the map|route|directions|page)\b", obj) and not \
            re.search(r"\b(?:how|what|which|who|when|where)\b", obj):
        return "state_navigation"  # a view to reach, not a value to read out
    if verb in ("tell", "tell me", "show me", "get me", "give me") or _INFO_ANYWHERE.search(low):
        return "info_query"
    if fam == "delete_cleanup":
        if verb in ("clear", "remove", "delete", "disable") and SETTING_WORDS.search(obj) and not re.search(
                r"\b(?:data|history|cache|cookies|files?|items?|messages?|notes?|accounts?|apps?)\b", obj):
            return "state_navigation"
        if verb == "remove" and TEXT_EDIT_OBJECTS.search(obj) and not re.search(r"\b(?:files?|folders?)\b", obj):
            return "create_modify"
        if verb == "cancel" and not re.search(r"\b(?:order|subscription|event|appointment|meeting)\b", obj):
            return "general"
        return fam
    special = _by_specific_verb(verb, obj)
    if special:
        return special
    if fam == "create_modify":
        if verb in ("set", "change", "update", "make", "adjust", "configure", "switch", "apply") and \
                SETTING_WORDS.search(obj) and not TEXT_EDIT_OBJECTS.search(obj.split(" to ")[0]):
            return "state_navigation"
        if verb in ("add", "insert", "attach") and " to " in obj and FILE_OBJECT.search(obj.split(" to ")[0]):
            return "transfer"
        if verb == "save" and re.search(r"\b(?:as|to)\b.*(?:/|~|folder|directory|path)", obj) and "file" in obj \
                and "new file" not in obj:
            return "transfer"
        return fam
    if fam == "state_navigation":
        if verb in ("show", "display") and CHART.search(obj):
            return "create_modify"
        if verb in ("set up",) and re.search(r"\bforward", obj):
            return "state_navigation"
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


def _by_specific_verb(verb: str, obj: str) -> Optional[str]:
    """Verbs whose family depends on what follows them (let X know, leave a comment, take a photo ...)."""
    if verb == "let":
        return "communication" if re.search(r"\bknow\b", obj) else "general"
    if verb == "leave":
        return "communication" if re.search(r"^\s+(?:a|an|the|my|your)?\s*(?:\w+\s+)?(?:comments?|repl(?:y|ies)|"
                                            r"messages?|notes? (?:to|for)|feedback|voice ?mail)\b", obj) \
            else "create_modify" if re.search(r"\b(?:review|rating)\b", obj) else "general"
    if verb == "take":
        if re.match(r"\s+me\s+to\b", obj):
            return "state_navigation"
        return "create_modify"
    if verb == "fix":
        return "general" if re.search(r"\b(?:error|bug|crash|exception|failing|broken|issue)", obj) and not \
            re.search(r"\b(?:typo|spelling|grammar|format)", obj) else "create_modify"
    if verb in ("put", "place"):
        if re.match(r"\s+(?:an?\s+)?order\b", obj):
            return "general"
        return "transfer" if PLACE.search(obj) else "create_modify"
    if verb == "move" and POSITION.search(obj) and not PLACE.search(obj):
        return "create_modify"  # moving within the same document or screen is an edit
    if verb == "save" and (re.search(r"\battachments?\b", obj) or (PLACE.search(obj) and not re.search(
            r"\b(?:new|as)\b", obj))):
        return "transfer"
    return None


def _mask_quote(m: re.Match) -> str:
    inner = m.group(0)[1:-1].strip()
    if FILE_OBJECT.search(inner) and " " not in inner:
        return f" {inner} "  # a file name is part of the object, not a payload
    if re.fullmatch(r"[A-Za-z][A-Za-z -]{0,30}", inner) and len(inner.split()) <= 3 and _head_verb(inner.lower()):
        return f" {inner} "  # an emphasised action word such as "turn off"
    return " QUOTED "


def _clauses(instruction: str) -> list[tuple[str, str]]:
    """(boundary kind, clause text) pieces, with quoted payloads masked."""
    text = _QUOTED.sub(_mask_quote, instruction)
    text = _PAYLOAD.sub(" QUOTED", text)
    pieces, last, kind = [], 0, "start"
    for m in _BOUNDARY.finditer(text):
        pieces.append((kind, text[last:m.start()]))
        b = m.group("b").strip().lower()
        kind = "then" if "then" in b else "sentence" if b[:1] in ".;!?:" else "and" if b.startswith(
            ("and", ",")) else "or"
        last = m.end()
    pieces.append((kind, text[last:]))
    return [(k, p.strip()) for k, p in pieces if p.strip()]


def route_rules(instruction: str) -> RouteResult:
    """Deterministic family for `instruction` (no model)."""
    return RouteResult(category=explain_rules(instruction).category, mode="rules")


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
    rule: str  # question | no_verb | steps_only | single | combined
    clauses: list[Clause] = field(default_factory=list)
    context: list[str] = field(default_factory=list)


def explain_rules(instruction: str) -> RulesReading:
    """The rules router's reading of `instruction` (route_rules returns its category)."""
    first = _strip_prefix(instruction)
    first_sentence = re.split(r"(?<=[.!?])\s", first, maxsplit=1)[0]
    if (_QUESTION.match(first) and (first_sentence.rstrip().endswith("?") or _QUESTION_NO_MARK.match(first))) \
            or re.match(r"^tel+ me\b", first, re.I):
        rest = first[len(first_sentence):].strip()
        if rest and not _REFERS_TO_ANSWER.search(rest):  # "What is X? Then turn on Wi-Fi": a second sub-goal
            after = explain_rules(rest)
            if after.category not in ("info_query", "general") and after.rule != "no_verb":
                return RulesReading("composite_workflow", "question_then_action", after.clauses, after.context)
        return RulesReading("info_query", "question")
    parsed, pending, context = [], None, []
    for kind, clause in _clauses(instruction):
        body = _strip_prefix(clause)
        pending = _stronger(pending, kind)
        if re.match(r"^(?:do not|don'?t|never|without)\b", body, re.I):
            continue
        verb, body = _normalise_verb(body)
        if verb:
            fam = _classify_clause(verb, body, " ".join(context))
            if fam == "create_modify" and verb not in _ITEM_ONLY_VERBS and parsed and _is_step(parsed[-1]) \
                    and re.search(r"\b(?:settings|preferences|options|control panel)\b", parsed[-1][2], re.I):
                fam = "state_navigation"  # "open the settings and change the tab size"
            parsed.append((pending, verb, body, fam))
            pending = None
        else:
            context.append(body)  # a background sentence: what a later "it"/"that" may stand for
    clauses = [Clause(k, v, b, f, _is_step((k, v, b, f))) for k, v, b, f in parsed]
    if not parsed:
        return RulesReading(_fallback_family(instruction), "no_verb", clauses, context)
    outcomes, carry = [], None
    for p in parsed:  # a step's boundary carries over to the next outcome clause
        if not _is_step(p) or (p[1] == "check" and _INFO_ANYWHERE.search(p[2])):
            outcomes.append((_stronger(carry, p[0]),) + p[1:])
            carry = None
        else:
            carry = _stronger(carry, p[0])
    # "..., then open the X app" ends the task in that app: an outcome, not a step
    if parsed[-1][1] in ("open", "launch") and parsed[-1][0] == "then" and _is_step(parsed[-1]):
        outcomes.append(parsed[-1])
    if not outcomes:
        return RulesReading(_step_family(parsed[0]), "steps_only", clauses, context)
    rule = "single" if len(outcomes) == 1 else "combined"
    return RulesReading(_combine(outcomes, instruction), rule, clauses, context)


@contextlib.contextmanager
def lexicon_without(verbs):
    """Route as if the verb lexicon lacked `verbs` (for leave-one-source-out estimates; not thread-safe)."""
    global _VERB_KEYS
    saved, saved_keys = dict(_VERBS), _VERB_KEYS
    for v in verbs:
        _VERBS.pop(v, None)
    _VERB_KEYS = sorted(_VERBS, key=len, reverse=True)
    try:
        yield
    finally:
        _VERBS.clear()
        _VERBS.update(saved)
        _VERB_KEYS = saved_keys


def _normalise_verb(body: str) -> tuple[Optional[str], str]:
    """(head verb, clause) after undoing "re-" (reopen -> open), "use X to <verb>" and "check out X"."""
    verb = _head_verb(body)
    if verb is None:
        m = re.match(r"^re-?(?=[a-z])", body, re.I)
        if m and _head_verb(body[m.end():].lower()):
            body = body[m.end():]
            verb = _head_verb(body.lower())
    if verb == "use":  # "use X to <verb> ...": the inner verb is the action
        m = re.search(r"\bto\s+(.*)$", body, re.I)
        inner = _strip_prefix(m.group(1)) if m else ""
        if _head_verb(inner.lower()):
            verb, body = _head_verb(inner.lower()), inner
    if verb == "check out" and re.match(r"check\s*out\s+(?:the|my|our|their|his|her|its|this|that|these|those|a|an|"
                                        r"all|any|what|which|who|how|if|whether)\b", body, re.I):
        verb = "check"  # "check out the issue" looks something up; a bare "check out" pays
    return verb, body


_REFERS_TO_ANSWER = re.compile(r"\b(?:answer|result|number|value|total|count|amount|names?|list|respon\w*|reply|"
                               r"format|it|that|this|them|those)\b", re.I)
_REQUEST_QUESTION = re.compile(r"^(?:can|could|would|will)\s+you\b", re.I)


def _fallback_family(instruction: str) -> str:
    """Family when no clause has a known action verb."""
    sentences = [_strip_prefix(x) for x in re.split(r"(?<=[.!?])\s+", instruction) if x.strip()]
    if any(x.rstrip().endswith("?") and not _REQUEST_QUESTION.match(x) for x in sentences):
        return "info_query"
    if SETTING_WORDS.search(instruction):
        return "state_navigation"
    return "general"


_STRENGTH = {None: -1, "start": 0, "and": 1, "or": 1, "then": 2, "sentence": 3}


def _stronger(a: Optional[str], b: str) -> str:
    return a if _STRENGTH[a] > _STRENGTH[b] else b


def _is_step(p) -> bool:
    """A clause that only leads to the outcome (open, find, follow the pattern, ...)."""
    verb, body = p[1], p[2]
    if verb == "follow":
        return bool(re.search(r"\b(?:pattern|format|instructions?|steps?|naming|convention|template|guide)", body, re.I))
    return verb in STEP_VERBS


def _step_family(p) -> str:
    _, verb, body, fam = p
    if verb in ("find", "check", "look", "locate"):
        return "info_query"
    if verb in ("fill", "enter", "type", "input", "select", "choose", "click", "tap"):
        return "create_modify"
    return fam if fam != "general" else "state_navigation"


_PURCHASE_VERBS = {"buy", "purchase", "check out", "checkout", "pay"}
_MESSAGE_ITEM = re.compile(r"\b(?:e-?mail|message|reply|post|comment|letter|tweet|toot|sms)\b", re.I)
_CART = re.compile(r"\b(?:cart|basket|shopping bag)\b", re.I)
_APP = re.compile(r"\b(?:in|on|using|via)\s+(?:the\s+)?((?-i:[A-Z][\w'-]*)(?:\s+(?-i:[A-Z][\w'-]*)){0,2})", re.I)
_SENDS_PREVIOUS = re.compile(r"^\w+(?:\s+\w+)?\s+(?:it|them|(?:this|that|these|those)(?:\s+\w+)?\s*"
                             r"(?:$|[.,;]|to\b|with\b|via\b|on\b|in\b|by\b))", re.I)


def _app(body: str) -> Optional[str]:
    """The app or site a clause names ("... in Pro Expense", "on Mastodon"), if any."""
    m = _APP.search(body)
    return m.group(1).lower() if m else None


# nouns that name a kind of object, not one object: sharing only these is not a back-reference
_KIND_NOUNS = {"note", "file", "folder", "event", "message", "item", "contact", "app", "page", "document",
               "email", "photo", "image", "recipe", "expense", "task", "alarm", "song", "playlist", "post",
               "comment", "product", "order", "issue", "repository", "project", "slide", "sheet", "cell",
               "column", "row", "tab", "window", "setting", "list", "entry", "record", "account", "called",
               "named", "titled", "name", "title"}


def _combine(outcomes, instruction: str) -> str:
    """One family for the outcome clauses: a single goal, or composite_workflow.

    Independent sub-goals (composite) are outcomes of different families that do not build on each
    other: a message after a change it does not carry, an explicit answer after an action, a new
    sentence or "then" clause that neither refers back nor shares content words, or actions in two
    different named apps. Filling a cart before paying is one purchase.
    """
    if any(o[1] in _PURCHASE_VERBS for o in outcomes):
        outcomes = [o for o in outcomes if o[1] in _PURCHASE_VERBS or not _CART.search(o[2])]
    fams = [o[3] for o in outcomes]
    if len(set(fams)) == 1 and len(outcomes) == 1:
        return fams[0]
    if len(set(fams)) >= 3:
        return "composite_workflow"
    seen_words: set[str] = set()
    independent = False
    for i, (kind, verb, body, fam) in enumerate(outcomes):
        words = _words(body)
        if i > 0:
            refers_back = bool(_PRONOUN.search(body)) or bool((words & seen_words) - _KIND_NOUNS)
            prev_fams = {o[3] for o in outcomes[:i]}
            if fam == "communication" and prev_fams - {"communication", "info_query"} \
                    and not _SENDS_PREVIOUS.match(body):
                independent = True  # a message beside a change: the change is not just its content
            elif fam == "communication" and "info_query" in prev_fams and not (words & seen_words):
                independent = True
            elif fam not in prev_fams and not refers_back and _app(body) and \
                    {_app(o[2]) for o in outcomes[:i]} - {None, _app(body)}:
                independent = True  # two different apps, nothing carried between them
            elif fam == "info_query" and verb in _ANSWER_VERBS and prev_fams - {"info_query"}:
                independent = True  # an explicit answer request is a deliverable of its own
            elif not refers_back and kind in ("then", "sentence") and fam != "info_query":
                independent = True
        seen_words |= words
    if independent:
        return "composite_workflow"
    if fams[-1] == "communication" and _SENDS_PREVIOUS.match(outcomes[-1][2]) and _MESSAGE_ITEM.search(
            " ".join(o[2] for o in outcomes[:-1])):
        return "communication"  # a message written and then sent: the sending is the outcome
    if "communication" in fams and set(fams) <= {"communication", "info_query"}:
        return "communication"  # a look-up whose result only feeds the message
    if fams[0] == "info_query" and outcomes[0][1] not in _ANSWER_VERBS and set(fams) - {"info_query"} \
            and not any(FILE_OBJECT.search(o[2]) for o in outcomes[1:]):  # an answer written to a file stays
        return next(f for f in fams if f != "info_query")  # "find out X and add a reminder for it"
    # one goal reached through several actions: a setting outcome wins, else the first outcome
    if "state_navigation" in fams and fams[0] == "transfer":
        return "state_navigation"
    return fams[0]

