"""`distill evaluate` (distill/evaluate.py): the base model and the adapter are scored on one loaded model
(the base run with the adapter switched off), so the second run sizes its batches exactly as the first did,
and nothing of the model outlives the command."""
import gc
import json
import weakref
from dataclasses import replace

import pytest

from adaptrubric_local.distill.evaluate import evaluate

GPU_BYTES = 2 * 2 ** 30  # the simulated card
BYTES_PER_TOKEN = 4096  # of free memory, per padded token of a batch (the tiny model's weights: ~1 MB)


def _random_adapter(model, out):
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen3VLForConditionalGeneration

    base = Qwen3VLForConditionalGeneration.from_pretrained(model, local_files_only=True)
    get_peft_model(base, LoraConfig(r=4, lora_alpha=8, init_lora_weights=False,
                                    target_modules=r".*language_model.*\.(q_proj|v_proj)")).save_pretrained(out)
    return out


@pytest.fixture
def simulated_gpu(monkeypatch):
    """Free GPU memory as torch.cuda.mem_get_info reports it after loading: the card minus the weights of
    every model still alive. On the CPU the engine uses a fixed budget (HFEngine._derive_batch_tokens
    returns CPU_BATCH_TOKENS off CUDA), so the derivation is replaced by one of that reading (a token per
    BYTES_PER_TOKEN free bytes; the engine's own arithmetic is tested in test_engine_generation.py); a model
    kept alive by a reference cycle counts as used, as it does on a GPU until it is collected. Records
    every load."""
    from adaptrubric_local.engine import hf

    live, loads = weakref.WeakSet(), []
    real = hf.load_model

    def load(cfg):
        model, processor = real(cfg)
        live.add(model)
        loads.append(cfg.adapter)
        return model, processor

    def free() -> int:
        return GPU_BYTES - sum(p.numel() * p.element_size() for m in list(live) for p in m.parameters())

    monkeypatch.setattr(hf, "load_model", load)
    monkeypatch.setattr(hf.HFEngine, "_derive_batch_tokens", lambda self: free() // BYTES_PER_TOKEN)
    return live, loads


def test_base_and_adapter_are_scored_on_one_model_with_the_same_batch_budget(tiny_model, dist, tmp_path,
                                                                               simulated_gpu):
    live, loads = simulated_gpu
    adapter = _random_adapter(tiny_model, tmp_path / "adapter")
    gc.disable()  # what a long run does not guarantee: that a cycle is collected before the next load
    try:
        res = evaluate(dist, str(tiny_model), adapter, tmp_path / "ev", max_new_tokens=6, progress=False)
        assert len(live) == 0  # nothing of the model is left once evaluate returns, without a collection
    finally:
        gc.enable()
    assert loads == [str(adapter)]  # one load: the base run is the same model with the adapter off
    budget = {name: json.loads((tmp_path / "ev" / name / "verdicts.summary.json").read_text())["engine"]
              ["max_batch_tokens"] for name in ("base", "adapter")}
    assert budget["base"] == budget["adapter"] > 4096, budget
    configs = {name: json.loads((tmp_path / "ev" / name / "verdicts.config.json").read_text())
               for name in ("base", "adapter")}
    assert configs["base"]["adapter"] is None and configs["base"]["model"] == str(tiny_model)
    assert configs["adapter"]["adapter"] == str(adapter)
    assert set(res["table"]["agreement_with_teacher"]) == {"base", "adapter"}


def test_the_base_run_is_the_base_model(tiny_model, dist, tmp_path):
    """The adapter switched off gives exactly what the base model alone gives."""
    from adaptrubric_local.distill.evaluate import BaseOf
    from adaptrubric_local.engine.base import Request
    from adaptrubric_local.engine.hf import HFEngine, HFEngineConfig

    adapter = _random_adapter(tiny_model, tmp_path / "adapter")
    rec = json.loads((dist / "val.jsonl").read_text().splitlines()[0])["verify"]
    req = Request(prompt=rec["prompt"], images=[str(dist / p) for p in rec["images"]], suffix=rec["suffix"])
    both, alone = (HFEngine(HFEngineConfig(model=str(tiny_model), adapter=a, max_batch_size=1))
                   for a in (str(adapter), None))
    try:
        short = [replace(req, max_new_tokens=3), replace(req, images=req.images[:1], max_new_tokens=3)]
        groups = list(BaseOf(both).generate_iter(short))  # per group, as the engine hands them over
        assert len(groups) == 2 and [o.text for _, o in sorted(kv for g in groups for kv in g)] == \
            [o.text for o in alone.generate(short)]
        p_off = BaseOf(both).next_token_probs([req], ["SCORE: "])[0]["1"]
        p_on = both.next_token_probs([req], ["SCORE: "])[0]["1"]
        p_base = alone.next_token_probs([req], ["SCORE: "])[0]["1"]
        assert p_off == pytest.approx(p_base, abs=1e-6) and p_on != pytest.approx(p_base, abs=1e-6)
        assert BaseOf(both).name == str(tiny_model) and BaseOf(both).config.adapter is None
    finally:
        both.close()
        alone.close()


# ---------------------------------------------------------------------------------------------- QLoRA
@pytest.fixture(scope="module")
def qlora(tiny_model, dist, tmp_path_factory):
    """A QLoRA student: LoRA trained on the tiny model loaded in 4-bit (bitsandbytes nf4, on the CPU)."""
    pytest.importorskip("bitsandbytes")
    from adaptrubric_local.distill.config import TrainConfig
    from adaptrubric_local.distill.train import train

    out = tmp_path_factory.mktemp("qlora") / "adapter"
    train(TrainConfig(data=str(dist), model=str(tiny_model), out=str(out), target="verdict", epochs=1, lora_r=4,
                      lora_alpha=8, grad_accum=1, per_device_batch_size=4, load_in_4bit=True, progress=False,
                      dataloader_workers=0))
    return out


def test_a_qlora_adapter_records_the_4bit_base_it_was_trained_on(qlora):
    from adaptrubric_local.distill.image_policy import read_quantisation

    assert read_quantisation(qlora) == {"load_in_4bit": True, "load_in_8bit": False}
    record = json.loads((qlora / "base_quantisation.json").read_text())
    assert record["bitsandbytes"]["bnb_4bit_quant_type"] == "nf4" and record["bitsandbytes"]["load_in_4bit"]


def test_score_and_evaluate_load_a_qlora_adapter_on_its_4bit_base(qlora, tiny_model, dist, tmp_path, capsys,
                                                                   monkeypatch):
    from adaptrubric_local.cli import main
    from adaptrubric_local.engine import hf

    data = json.loads((dist / "manifest.json").read_text())["data"]
    flags = ["--router", "rules", "--no-fine", "--verify-max-new-tokens", "3", "--quiet"]
    assert main(["score", data, "--model", str(tiny_model), "--adapter", str(qlora), "--out",
                 str(tmp_path / "a.jsonl"), *flags]) == 0
    assert json.loads((tmp_path / "a.config.json").read_text())["engine"]["load_in_4bit"] is True
    assert "warning" not in capsys.readouterr().err
    assert main(["score", data, "--model", str(tiny_model), "--adapter", str(qlora), "--out",
                 str(tmp_path / "b.jsonl"), "--no-load-in-4bit", *flags]) == 0
    assert json.loads((tmp_path / "b.config.json").read_text())["engine"]["load_in_4bit"] is False
    assert "load_in_4bit=False differs from the True adapter" in capsys.readouterr().err

    loaded = []
    real = hf.load_model
    monkeypatch.setattr(hf, "load_model", lambda cfg: (loaded.append(cfg.load_in_4bit), real(cfg))[1])
    evaluate(dist, str(tiny_model), qlora, tmp_path / "ev", max_new_tokens=3, progress=False, base=False)
    evaluate(dist, str(tiny_model), qlora, tmp_path / "ev2", max_new_tokens=3, progress=False, base=False,
             load_in_4bit=False)
    assert loaded == [True, False] and "load_in_4bit=False differs" in capsys.readouterr().err


def test_merging_a_qlora_adapter_dequantises_its_4bit_base(qlora, tiny_model, dist, tmp_path, capsys):
    """The merged checkpoint gives what the 4-bit base + adapter gives (the weights the student learned on),
    not what a merge into the original full-precision weights gives."""
    from peft import PeftModel
    from transformers import Qwen3VLForConditionalGeneration

    from adaptrubric_local.distill.evaluate import merge
    from adaptrubric_local.engine.base import Request
    from adaptrubric_local.engine.hf import HFEngine, HFEngineConfig

    merged = merge(str(tiny_model), qlora, tmp_path / "merged")
    err = capsys.readouterr().err
    assert "trained on a 4-bit (nf4) base" in err and "dequantised" in err
    assert "dequantised" in (merged / "README.md").read_text()
    assert "quantization_config" not in json.loads((merged / "config.json").read_text())
    naive = tmp_path / "naive"
    base = Qwen3VLForConditionalGeneration.from_pretrained(tiny_model, local_files_only=True)
    PeftModel.from_pretrained(base, str(qlora)).merge_and_unload().save_pretrained(naive)
    import shutil

    for f in ("tokenizer.json", "tokenizer_config.json", "processor_config.json", "chat_template.jinja"):
        if (tiny_model / f).is_file():
            shutil.copy(tiny_model / f, naive / f)
    rec = json.loads((dist / "val.jsonl").read_text().splitlines()[0])["verify"]
    req = Request(prompt=rec["prompt"], images=[str(dist / p) for p in rec["images"]], suffix=rec["suffix"])
    probs = {}
    for name, cfg in (("trained", HFEngineConfig(model=str(tiny_model), adapter=str(qlora), load_in_4bit=True)),
                      ("merged", HFEngineConfig(model=str(merged))), ("naive", HFEngineConfig(model=str(naive)))):
        eng = HFEngine(cfg)
        probs[name] = eng.next_token_probs([req], ["SCORE: "])[0]["1"]
        eng.close()
    print("P(SCORE=1):", probs)
    assert probs["merged"] == pytest.approx(probs["trained"], abs=1e-4), probs
    assert abs(probs["naive"] - probs["trained"]) > 10 * abs(probs["merged"] - probs["trained"]), probs
