"""Building the engine from options (engine/build.py): one flag per engine option, read back into the
config's own defaults, and a clear error without a model. Importing it loads no torch."""
import argparse
import dataclasses
import subprocess
import sys

import pytest

from adaptrubric_local.engine.build import add_engine_arguments, build_engine, engine_fields, engine_kwargs
from adaptrubric_local.engine.hf_config import HFEngineConfig


def test_unset_flags_give_the_configs_own_defaults():
    ap = argparse.ArgumentParser()
    add_engine_arguments(ap)
    kw = engine_kwargs(ap.parse_args(["--model", "some/model"]))
    defaults = HFEngineConfig(model="some/model")
    assert kw["model"] == "some/model"
    for f in engine_fields():
        assert kw[f.name] == getattr(defaults, f.name), f.name
    assert {f.name for f in engine_fields()} < {f.name for f in dataclasses.fields(HFEngineConfig)}


def test_no_model_is_a_clear_error():
    with pytest.raises(ValueError, match="no model given: pass --model"):
        build_engine(None)


def test_importing_it_loads_no_torch():
    code = "import sys, adaptrubric_local.engine.build; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
