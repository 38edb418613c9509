"""The coarse stage's router g(I): pick one of the bank's task families for an instruction (paper §4.1).

Two modes, one module each:
- `model` (model.py, the paper's method): the router prompt (H.2) for an engine, and the parser of
  its single `CATEGORY:` line;
- `rules` (rules.py, clause.py): deterministic, model-free rules over general features of the
  instruction, reading words from a lexicon kept as data (data/router_lexicon.yaml, loaded by
  lexicon.py into an immutable `Lexicon` that the rules take as an argument).
Knows nothing about engines or trajectories.
"""
from .lexicon import DEFAULT_LEXICON, Lexicon, LexiconFile, load_lexicon
from .model import bank_router_prompt, parse_router_output, router_prompt
from .rules import Clause, RulesReading, explain_rules, route_rules

__all__ = [
           "DEFAULT_LEXICON",
           "Clause",
           "Lexicon",
           "LexiconFile",
           "RulesReading",
           "bank_router_prompt",
           "explain_rules",
           "load_lexicon",
           "parse_router_output",
           "route_rules",
           "router_prompt",
]
