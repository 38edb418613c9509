"""The rubric bank (bank.py): the paper's eight families as bundled, the strict schema with errors
that name file and field, the content hash, and `bank validate`."""
import pytest
import yaml

from adaptrubric_local.bank import DEFAULT_BANK, load_bank
from adaptrubric_local.cli import main
from adaptrubric_local.schema import SchemaError
from adaptrubric_local.types import FAMILIES


def test_default_bank_has_the_papers_eight_families():
    bank = load_bank()
    assert list(bank.families) == list(FAMILIES)
    assert bank.lookup("transfer").id == "RSET_TRANSFER"
    assert bank.lookup("not-a-family").id == "RSET_GENERAL"  # wildcard fallback
    assert len(bank.meta_rule) == 3
    assert bank.families["composite_workflow"].critical_items[2].name == "No Silent Drop"
    assert "Manual retype introduces truncation or digit errors." in bank.families["transfer"].common_pitfalls
    assert len(bank.sha) == 16


def test_packaged_bank_is_the_top_level_bank():
    from pathlib import Path

    top = Path(__file__).resolve().parents[1] / "rubric_bank" / "default.yaml"
    assert DEFAULT_BANK.read_text() == top.read_text()


def _bank_doc():
    return yaml.safe_load(DEFAULT_BANK.read_text())


def _write(tmp_path, doc):
    p = tmp_path / "bank.yaml"
    p.write_text(yaml.safe_dump(doc))
    return p


def test_unknown_key_is_rejected_naming_file_and_field(tmp_path):
    doc = _bank_doc()
    doc["families"]["transfer"]["pitfals"] = ["typo"]
    p = _write(tmp_path, doc)
    with pytest.raises(SchemaError) as exc:
        load_bank(p)
    assert str(p) in str(exc.value) and "families.transfer.pitfals" in str(exc.value)
    assert "unknown key" in str(exc.value)


@pytest.mark.parametrize("mutate,needle", [
    (lambda d: d["families"].pop("general"), "missing families"),
    (lambda d: d["families"]["info_query"]["rubric_items"][0].update(criticality="vital"), "criticality"),
    (lambda d: d["families"]["info_query"].update(output_format="NOPE"), "output_format"),
    (lambda d: d["families"].update(shopping=d["families"]["general"]), "unknown families"),
])
def test_schema_errors(tmp_path, mutate, needle):
    doc = _bank_doc()
    mutate(doc)
    with pytest.raises(SchemaError) as exc:
        load_bank(_write(tmp_path, doc))
    assert needle in str(exc.value)


def test_sha_changes_with_content(tmp_path):
    doc = _bank_doc()
    doc["meta_rule"].append("An extra rule.")
    assert load_bank(_write(tmp_path, doc)).sha != load_bank().sha


def test_validate_bank_cli(tmp_path, capsys):
    assert main(["bank", "validate", str(DEFAULT_BANK)]) == 0
    assert "OK (8 families" in capsys.readouterr().out
    doc = _bank_doc()
    doc["extra"] = 1
    assert main(["bank", "validate", str(_write(tmp_path, doc))]) == 1
    assert "field 'extra'" in capsys.readouterr().err
