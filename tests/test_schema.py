"""Strict loading of YAML data files (schema.py): each way a file can be wrong gives one error naming the
file and the field."""
import pytest
from pydantic import BaseModel, ConfigDict

from adaptrubric_local.schema import SchemaError, load_yaml_model


class Doc(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    size: int


@pytest.mark.parametrize("text,message", [
    ("name: a\nsize: [1\n", ": not valid YAML: "),
    ("- a\n- b\n", ": expected a mapping at the top level, got list"),
    ("name: a\nsize: big\n", ": field 'size': Input should be a valid integer"),
    ("name: a\nsize: 1\ncolour: red\n", ": field 'colour': unknown key (not in the schema)"),
    ("size: 1\n", ": field 'name': Field required"),
])
def test_each_error_names_the_file_and_field(tmp_path, text, message):
    path = tmp_path / "doc.yaml"
    path.write_text(text)
    with pytest.raises(SchemaError) as err:
        load_yaml_model(path, Doc)
    assert str(err.value).startswith(f"{path}{message}")


def test_every_bad_field_is_listed_and_a_good_file_loads(tmp_path):
    path = tmp_path / "doc.yaml"
    path.write_text("size: x\nextra: 1\n")
    with pytest.raises(SchemaError) as err:
        load_yaml_model(path, Doc)
    assert len(str(err.value).splitlines()) == 3  # name missing, size not an integer, extra unknown
    path.write_text("name: a\nsize: 3\n")
    assert load_yaml_model(path, Doc) == Doc(name="a", size=3)
    with pytest.raises(SchemaError, match="cannot read"):
        load_yaml_model(tmp_path / "missing.yaml", Doc)
