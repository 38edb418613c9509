"""The transformers engine's settings (engine/hf_config.py): each invalid value is refused with a message
naming it; importing the module loads no torch."""
import subprocess
import sys

import pytest

from adaptrubric_local.engine.hf_config import DEFAULT_MODEL, HFEngineConfig


@pytest.mark.parametrize("kw,message", [
    ({"dtype": "int4"}, "dtype must be auto, bf16, fp16 or fp32, got 'int4'"),
    ({"load_in_4bit": True, "load_in_8bit": True}, "choose one of load_in_4bit and load_in_8bit"),
    ({"max_new_tokens": 0}, "max_new_tokens must be >= 1, got 0"),
    ({"votes": 0}, "votes must be >= 1, got 0"),
    ({"max_batch_size": 0}, "max_batch_size must be >= 1, got 0"),
    ({"image_workers": 0}, "image_workers must be >= 1, got 0"),
    ({"max_batch_tokens": 0}, "max_batch_tokens must be >= 1 or None, got 0"),
    ({"max_visual_tokens": 3}, "max_visual_tokens must be >= 4 or None, got 3"),
    ({"temperature": 0.0}, "temperature must be > 0, got 0.0"),
    ({"adapter": "/no/such/adapter"}, "adapter folder not found: /no/such/adapter"),
])
def test_invalid_settings_are_refused_by_name(kw, message):
    with pytest.raises(ValueError) as err:
        HFEngineConfig(**kw)
    assert str(err.value) == message


def test_defaults_and_an_existing_adapter_folder(tmp_path):
    cfg = HFEngineConfig(adapter=str(tmp_path))
    assert (cfg.model, cfg.dtype, cfg.max_new_tokens, cfg.votes, cfg.max_visual_tokens) == (
        DEFAULT_MODEL, "auto", 1024, 1, None)


def test_name_is_the_engines_name_model_plus_adapter(tmp_path):
    # HFEngine names itself the same way (engine/hf.py, HFEngine.__init__); settings records built from the
    # config alone (a Ray driver) must give the model as in-process runs do (tests/test_scale_out_ray.py)
    assert HFEngineConfig(model="m").name == "m"
    assert HFEngineConfig(model="m", adapter=str(tmp_path)).name == f"m+{tmp_path}"


def test_importing_it_loads_no_torch():
    code = "import sys, adaptrubric_local.engine.hf_config; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
