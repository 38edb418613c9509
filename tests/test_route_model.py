"""The model router (route/model.py): how tolerant the `CATEGORY:` parser is, and what falls back."""
import pytest

from adaptrubric_local.route import (
    parse_router_output,
)


@pytest.mark.parametrize("text,cat,parsed", [
    ("CATEGORY: transfer", "transfer", True),
    ("**CATEGORY:** delete_cleanup", "delete_cleanup", True),
    ("Thinking...\nCATEGORY: info_query\n", "info_query", True),
    ("CATEGORY: shopping", "general", False),
    ("I think this is a transfer task.", "general", False),
    ("", "general", False),
])
def test_model_router_parse(text, cat, parsed):
    r = parse_router_output(text)
    assert (r.category, r.parsed, r.mode) == (cat, parsed, "model")


@pytest.mark.parametrize("text,cat,parsed", [
    ("CATEGORY: **transfer**", "transfer", True),
    ("Category: `info_query`", "info_query", True),
    ("CATEGORY: composite workflow", "composite_workflow", True),
    ("CATEGORY: State-Navigation.", "state_navigation", True),
    ("CATEGORY: transfer (copy files)", "transfer", True),
    ("CATEGORY: general", "general", True),
    ("CATEGORY: transfer_files", "general", False),
    ("CATEGORY:\ntransfer", "general", False),
    ("CATEGORY: info_query\nCATEGORY: bogus", "general", False),
    ("CATEGORY: bogus\nCATEGORY: delete_cleanup", "delete_cleanup", True),
])
def test_model_router_parse_tolerance(text, cat, parsed):
    r = parse_router_output(text)
    assert (r.category, r.parsed, r.mode, r.raw) == (cat, parsed, "model", text)
