"""Building the engine from options (engine/build.py): the engine flags (cli_common, from HFEngineConfig
through flags.py) read back into the config's own defaults, and a clear error without a model.
Importing it loads no torch."""
import argparse
import dataclasses
import subprocess
import sys

import pytest

from adaptrubric_local.cli.common import add_model_options
from adaptrubric_local.engine.build import build_engine
from adaptrubric_local.engine.hf_config import HFEngineConfig
from adaptrubric_local.flags import config_fields, config_kwargs


def test_unset_flags_give_the_configs_own_defaults():
    ap = argparse.ArgumentParser()
    add_model_options(ap)
    kw = config_kwargs(ap.parse_args(["--model", "some/model"]), HFEngineConfig)
    defaults = HFEngineConfig(model="some/model")
    assert kw["model"] == "some/model"
    for f in config_fields(HFEngineConfig):
        assert kw[f.name] == getattr(defaults, f.name), f.name
    flagged = {f.name for f in config_fields(HFEngineConfig)}
    assert flagged == {f.name for f in dataclasses.fields(HFEngineConfig)} - {"max_new_tokens"}  # set from caps


def test_no_model_is_a_clear_error():
    with pytest.raises(ValueError, match="no model given: pass --model"):
        build_engine(None)


def test_importing_it_loads_no_torch():
    code = "import sys, adaptrubric_local.engine.build; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
