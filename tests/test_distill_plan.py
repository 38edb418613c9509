"""The memory plan of `distill train`: lengths equal to the rows the collator builds, parameter counts
of the published Qwen3-VL architectures, refusals that say what would fit, and the table of docs/distillation.md."""
import importlib.util
import json
import re
from pathlib import Path

import pytest

from adaptrubric_local.distill.plan import GiB, Setting, arch_of, estimate, parse_memory

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    from adaptrubric_local.distill.collect import CollectConfig, collect, label_teacher, teacher_pipeline
    from adaptrubric_local.formats import load_trajectories
    from adaptrubric_local.synth import synthesize

    root = tmp_path_factory.mktemp("plan")
    data = synthesize(root / "synth", n_tasks=3, candidates=2, size=(120, 260), visible_outcome=True)
    collect(data, root / "dist", label_teacher(load_trajectories(data).trajectories), teacher_pipeline("labels"),
            CollectConfig(val_fraction=0.0), progress=False)
    return root / "dist"


def _distill(*argv) -> int:
    from adaptrubric_local.cli import main

    return main(["distill", *map(str, argv)])


def test_planned_lengths_are_the_collators_rows(tiny_engine, dist):
    from adaptrubric_local.distill.examples import Collator, examples, read_split
    from adaptrubric_local.distill.plan import example_shapes

    for target in ("verdict", "full"):
        exs = examples(read_split(dist, "train"), dist, target=target, tasks=("verify", "route", "cue"))
        shapes = example_shapes(exs, tiny_engine.encoder, tiny_engine.images.cfg)
        col = Collator(tiny_engine.encoder, tiny_engine.images.cfg)
        for e, s in zip(exs, shapes):
            batch = col([e])
            assert batch["input_ids"].shape[1] == s.total, e.id
            assert int((batch["labels"] != -100).sum()) == s.target
            assert int((batch["mm_token_type_ids"] == 1).sum()) == s.visual


def test_weights_at_the_load_dtype():
    from adaptrubric_local.engine.architectures import ARCHITECTURES, qwen3vl_config

    a8 = arch_of(qwen3vl_config(ARCHITECTURES["Qwen/Qwen3-VL-8B-Instruct"]))
    # bf16 weights are 2 bytes a parameter; nf4 language layers about half a byte
    lora = estimate(a8, Setting(), [_shape()]).weights
    qlora = estimate(a8, Setting(load_in_4bit=True), [_shape()]).weights
    assert lora == pytest.approx(2 * sum(a8.params.values()))
    assert qlora == pytest.approx(2 * (sum(a8.params.values()) - a8.params["language_linear"])
                                  + 0.516 * a8.params["language_linear"], rel=1e-3)


def _shape(visual=25500, text=2500, target=26):
    from adaptrubric_local.distill.plan import Shape

    return Shape(text=text, visual=visual, target=target, images=10)


def test_memory_grows_with_the_sequence_and_the_labelled_tokens_not_the_vocabulary_times_sequence():
    from adaptrubric_local.engine.architectures import ARCHITECTURES, qwen3vl_config

    a = arch_of(qwen3vl_config(ARCHITECTURES["Qwen/Qwen3-VL-4B-Instruct"]))
    short, long = estimate(a, Setting(), [_shape(visual=3000)]), estimate(a, Setting(), [_shape(visual=25500)])
    assert long.activations > 3 * short.activations and long.loss == short.loss  # the loss counts labelled tokens
    full = estimate(a, Setting(), [_shape(target=1000)])
    assert full.loss > 10 * short.loss and full.loss < 2 * GiB  # 1,000 response tokens x 151,936 rows


def test_the_docs_table_rows():
    spec = importlib.util.spec_from_file_location("distill_plan_table", ROOT / "eval" / "distill_plan_table.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rows = {(r["model"], r["method"], r["visual"]): r for r in mod.table()}
    assert len(rows) == 12
    assert rows[("Qwen3-VL-4B-Instruct", "LoRA", "native")]["fits_24"]  # the default settings fit a 24 GB card
    assert not rows[("Qwen3-VL-8B-Instruct", "LoRA", "native")]["fits_24"]
    assert rows[("Qwen3-VL-8B-Instruct", "LoRA", "native")]["fits_48"]
    assert rows[("Qwen3-VL-8B-Instruct", "QLoRA", "6144")]["fits_24"]
    assert rows[("Qwen3-VL-4B-Instruct", "LoRA", "native")]["tokens"] == 2500 + 10 * 2550 + 26
    assert "| Qwen3-VL-4B-Instruct | LoRA | native | 28,026 |" in mod.markdown(list(rows.values()))


def test_plan_json_and_refusals(tiny_model, dist, tmp_path, capsys):
    assert _distill("plan", dist, "--model", tiny_model, "--json") == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["lengths"]["examples"] == 6 and plan["device"] == "cpu" and plan["fits"] is None
    parts = plan["estimate_gib"]
    assert parts["total"] == pytest.approx(sum(v for k, v in parts.items() if k != "total"), abs=0.01)
    longest = plan["lengths"]["total"]["max"]
    out = tmp_path / "x"
    assert _distill("train", dist, "--model", tiny_model, "--out", out, "--max-seq-len", longest - 1) == 2
    err = capsys.readouterr().err
    assert f"longer than --max-seq-len {longest - 1}" in err and "Lower --max-visual-tokens" in err
    assert _distill("train", dist, "--model", tiny_model, "--out", out, "--gpu-memory", "1GB") == 2
    err = capsys.readouterr().err
    assert "over the 1 GiB available" in err and "--force" in err
    assert not out.exists()  # refused before anything was loaded or written
    assert _distill("train", dist, "--model", tiny_model, "--out", out, "--gpu-memory", "1GB", "--dry-run") == 1
    assert "does NOT fit 1 GiB" in capsys.readouterr().out


def test_parse_memory():
    assert parse_memory("24GB") == parse_memory("24 GiB") == parse_memory("24") == 24 * GiB
    with pytest.raises(ValueError, match="24GB"):
        parse_memory("lots")


@pytest.mark.parametrize("dtype,dropout", [("fp32", 0.05), ("fp32", 0.0), ("bf16", 0.0), ("bf16", 0.05)])
def test_what_a_lora_branch_keeps_of_its_input_is_what_autograd_saves(dtype, dropout):
    """peft's LoRA on a frozen layer, as `distill train` builds it (float32 adapters), on the CPU: the bytes
    of the tensors autograd saves that are as large as the input, per input element, against the plan's
    `lora_input_bytes` (bf16 under autocast, as the GPU trainer runs; the CPU's dropout keeps a float32
    mask where CUDA's fused one keeps a bool mask, which the plan counts for device "cuda")."""
    import torch
    from peft import LoraConfig, get_peft_model

    from adaptrubric_local.distill.plan import lora_input_bytes

    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.q_proj = torch.nn.Linear(256, 256, bias=False)

        def forward(self, x):
            return self.q_proj(x)

    torch_dtype = torch.bfloat16 if dtype == "bf16" else torch.float32
    base = Layer().to(torch_dtype).requires_grad_(False)
    model = get_peft_model(base, LoraConfig(r=8, lora_alpha=16, lora_dropout=dropout, target_modules=["q_proj"]))
    model.train()
    x = torch.randn(512, 256, dtype=torch_dtype, requires_grad=True)
    saved = {}

    def pack(t):
        if t.numel() == x.numel() and t.untyped_storage().data_ptr() != x.untyped_storage().data_ptr():
            saved[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), \
            torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == "bf16"):
        model(x).sum().backward()
    measured = sum(saved.values()) / x.numel()
    assert measured == lora_input_bytes(Setting(dtype_bytes=2 if dtype == "bf16" else 4, lora_dropout=dropout,
                                                device="cpu"))
    cuda = lora_input_bytes(Setting(dtype_bytes=2 if dtype == "bf16" else 4, lora_dropout=dropout, device="cuda"))
    assert cuda == measured - (3 if dropout else 0)  # a bool mask instead of a float32 one


def test_plan_for_too_long_examples_offers_only_what_shortens_them(tiny_model, dist, capsys):
    assert _distill("plan", dist, "--model", tiny_model, "--json") == 0
    longest = json.loads(capsys.readouterr().out)["lengths"]["total"]["max"]
    cap = longest - 1
    assert _distill("plan", dist, "--model", tiny_model, "--max-seq-len", cap) == 1
    out = capsys.readouterr().out
    alts = [x for x in out.splitlines() if x.startswith("  with ")]
    # the memory fits: nothing that leaves the sequences as long as they are
    assert alts and not any("--load-in-4bit" in x or "--per-device-batch-size" in x for x in alts), out
    assert all(x.endswith((f"(still over --max-seq-len {cap})", f"(within --max-seq-len {cap})")) for x in alts), out
    fix = alts[-1]  # the usual budgets leave these small screens as they are: the budget that fits is computed
    budget, tokens = re.search(r"--max-visual-tokens (\d+): .* longest example (\d+) tokens", fix).groups()
    assert fix.endswith(f"(within --max-seq-len {cap})") and int(tokens) <= cap and int(budget) % 64 == 0
    assert _distill("plan", dist, "--model", tiny_model, "--max-seq-len", cap, "--max-visual-tokens", budget) == 0


@pytest.fixture
def no_hub(monkeypatch, tmp_path):
    """A machine that never downloaded a checkpoint and cannot: the hub client offline (HF_HUB_OFFLINE=1),
    an empty cache, and no socket may connect."""
    import socket

    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty-home"))

    def refuse(*a, **k):
        raise OSError("no network in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)


def test_plan_for_a_published_checkpoint_needs_none_of_its_files(no_hub, dist, capsys):
    """`distill plan DIR --config training/qwen3vl-4b-lora.yaml --gpu-memory 24GB` stopped offline with
    "cannot load the processor of 'Qwen/Qwen3-VL-4B-Instruct'"; the package knows its shapes."""
    assert _distill("plan", dist, "--config", ROOT / "training" / "qwen3vl-4b-lora.yaml", "--gpu-memory", "24GB") == 0
    out = capsys.readouterr().out
    assert "memory plan for Qwen/Qwen3-VL-4B-Instruct on cuda" in out and "fits 24 GiB" in out
    assert "shapes from: published config values of Qwen/Qwen3-VL-4B-Instruct" in out


@pytest.mark.parametrize("model,billions", [("Qwen/Qwen3-VL-2B-Instruct", 2.13), ("Qwen/Qwen3-VL-4B-Thinking", 4.44),
                                            ("Qwen/Qwen3-VL-8B-Thinking", 8.77), ("Qwen/Qwen3-VL-32B-Instruct", 33.36)])
def test_every_published_qwen3vl_size_plans_offline_with_its_own_shapes(no_hub, dist, capsys, model, billions):
    from adaptrubric_local.engine.architectures import ARCHITECTURES, qwen3vl_config

    fits = "32B" not in model
    assert _distill("plan", dist, "--model", model, "--gpu-memory", "48GB", "--json") == (0 if fits else 1)
    plan = json.loads(capsys.readouterr().out)
    params = sum(arch_of(qwen3vl_config(ARCHITECTURES[model])).params.values())
    assert params / 1e9 == pytest.approx(billions, abs=0.01)  # the published model's size
    assert plan["estimate_gib"]["weights"] == pytest.approx(2 * params / GiB, abs=0.01)  # bf16, these shapes
    assert plan["shapes_from"].startswith(f"published config values of {model}")
    assert plan["device"] == "cuda" and plan["fits"] is fits
    assert ARCHITECTURES[model.replace("Thinking", "Instruct")] is ARCHITECTURES[model.replace("Instruct", "Thinking")]
