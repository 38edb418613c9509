"""engine/options.py: which engine reads which option, as each engine's registration declares it. The
command line and the Python API (Verifier, RewardModel) both refuse an unread option with the engine's
advice, each spelled its own way (flags, keyword names)."""
import re

import pytest

from adaptrubric_local.cli.common import check_engine_options
from adaptrubric_local.cli.common import spell as flag_spell
from adaptrubric_local.engine import options as table
from adaptrubric_local.engine.options import ENGINE_OPTIONS, advice, engines, render
from adaptrubric_local.verifier import NAMED_OPTIONS, resolve_engine
from adaptrubric_local.verifier import spell as keyword_spell

CLI_ENGINES = ("transformers", "vllm")  # --engine's choices; a server is --openai-url


def cli_error(engine, name):
    with pytest.raises(ValueError) as exc:
        check_engine_options(engine, {name})
    return str(exc.value)


def python_error(engine, name):
    kw = {"openai_url": "http://127.0.0.1:9/v1", "engine": "transformers"} if engine == "openai" else {"engine": engine}
    with pytest.raises(ValueError) as exc:
        resolve_engine(kw.pop("engine"), "m", {name: 1}, **kw)
    return str(exc.value)


BUILT_IN = ("transformers", "vllm", "openai")
UNREAD = [(n, e) for n in sorted(ENGINE_OPTIONS) for e in BUILT_IN if n not in engines()[e].reads]


@pytest.mark.parametrize("name, engine", UNREAD)
def test_every_entry_s_advice_is_what_each_surface_says(name, engine):
    text = advice(name, engine)
    said = 0
    if engine in CLI_ENGINES:
        err = cli_error(engine, name)
        assert f"not read by --engine {engine}: {render(text, flag_spell)}" in err
        said += 1
    if name in NAMED_OPTIONS:
        err = python_error(engine, name)
        assert f"{name} is an option of " in err
        assert f"not read by engine={engine!r}: {render(text, keyword_spell)}" in err
        said += 1
    assert said or engine == "openai"  # every entry reaches a surface (the server's options only Python's)


def test_both_surfaces_share_the_entries_they_both_reach():
    both = [(n, e) for n, e in UNREAD if e in CLI_ENGINES and n in NAMED_OPTIONS]
    assert {("max_batch_size", "vllm"), ("max_batch_tokens", "vllm"), ("max_num_seqs", "transformers")} <= set(both)
    assert "--vllm-engine-args '{\"max_num_batched_tokens\": N}'" in cli_error("vllm", "max_batch_tokens")
    assert "engine_config=VLLMOptions(vllm_engine_args='{\"max_num_batched_tokens\": N}')" in python_error(
        "vllm", "max_batch_tokens")


def test_a_changed_entry_changes_both_messages(monkeypatch):
    monkeypatch.setitem(engines()["vllm"].instead, "max_batch_size", "try `max_num_seqs=3` or `tensor_parallel_size`")
    assert cli_error("vllm", "max_batch_size").endswith("try --max-num-seqs 3 or --tensor-parallel-size")
    assert python_error("vllm", "max_batch_size").endswith(
        "try max_num_seqs=3 or engine_config=VLLMOptions(tensor_parallel_size=...)")


def test_an_option_every_engine_reads_is_not_refused():
    for engine in BUILT_IN:
        assert advice("max_visual_tokens", engine) is None and advice("max_new_tokens", engine) is None
    check_engine_options("vllm", {"max_visual_tokens", "max_new_tokens", "max_num_seqs"})
    check_engine_options("transformers", {"max_batch_size", "compile"})


def test_the_registrations_are_the_only_place_that_words_advice_or_checks_vllm_fields():
    """No module but the engines' registrations (engine/build.py, engine/remote.py) and engine/options.py
    writes an engine's advice or tests names against vLLM's fields (vllm_options.py defines them); the
    surfaces render both from there."""
    import pathlib

    package = pathlib.Path(table.__file__).parents[1]
    texts = {t for spec in engines().values() for t in (*spec.instead.values(), spec.otherwise)}
    words = [re.sub(r"`[^`]*`", "", t).split("(")[0].strip(" ,;") for t in texts]  # the plain words of each
    found = []
    for path in package.rglob("*.py"):
        if path.name in ("options.py", "build.py", "remote.py") and path.parent.name == "engine":
            continue
        src = path.read_text(encoding="utf-8")
        found += [f"{path.name}: VLLM_FIELDS" for _ in re.finditer(r"\bVLLM_FIELDS\b", src)
                  if path.name != "vllm_options.py"]
        found += [f"{path.name}: {w!r}" for w in words if len(w) > 12 and w in src]
    assert found == []
