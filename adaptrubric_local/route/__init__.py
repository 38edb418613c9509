"""The coarse stage's router g(I): pick one of the bank's task families for an instruction (paper §4.1),
in one of two modes: `model` (model.py, the paper's router prompt H.2 and the parser of its
`CATEGORY:` line) or `rules` (rules.py, clause.py: deterministic rules over general features of the
instruction, with words from the lexicon data/router_lexicon.yaml, lexicon.py). Knows nothing about
engines or trajectories.
"""
from .lexicon import DEFAULT_LEXICON, Lexicon, LexiconFile, load_lexicon
from .model import bank_router_prompt, parse_router_output, router_prompt
from .rules import Clause, RulesReading, explain_rules, route_rules

__all__ = ["DEFAULT_LEXICON", "Clause", "Lexicon", "LexiconFile", "RulesReading", "bank_router_prompt", "explain_rules",
           "load_lexicon", "parse_router_output", "route_rules", "router_prompt"]
