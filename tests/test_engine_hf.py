"""The transformers engine on the tiny random Qwen3-VL, loaded from disk like a real checkpoint."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from adaptrubric_local import AdaptRubric, PipelineConfig, load_trajectories
from adaptrubric_local.engine.base import Request
from adaptrubric_local.engine.budget import TokenBudget
from adaptrubric_local.engine.images import ImageConfig, ImagePipeline, target_sizes
from adaptrubric_local.votes import vote
from adaptrubric_local.types import Verdict

from conftest import make_png
from engine_support import sub_batches


def _score(engine, trajs, bs):
    engine.config.max_batch_size = bs
    pipe = AdaptRubric(engine, PipelineConfig(trajectories_per_batch=max(8, 4 * bs), verify_max_new_tokens=12,
                                              cue_max_new_tokens=12))
    return pipe, pipe.score(trajs)


def test_tiny_model_loads_and_scores_end_to_end(tiny_engine, synth_set):
    from transformers import Qwen3VLForConditionalGeneration

    assert isinstance(tiny_engine.model, Qwen3VLForConditionalGeneration)
    trajs = load_trajectories(synth_set).trajectories
    pipe, verdicts = _score(tiny_engine, trajs, 8)
    assert len(verdicts) == 24
    assert {v.status for v in verdicts} <= {"ok", "unparsed"}  # random weights: mostly unparsed, never error
    assert all(v.score is None for v in verdicts if v.status == "unparsed")
    assert all(v.prompt_tokens > 0 and v.completion_tokens > 0 and 2 <= v.n_images <= 10 for v in verdicts)
    assert all(v.model == str(tiny_engine.config.model) and v.bank_sha for v in verdicts)
    # the paper's model router and cue writer run once per distinct instruction (8), the verifier once each
    assert pipe.summary()["calls_by_kind"] == {"route": 8, "cue": 8, "verify": 24}


def test_batched_equals_batch_size_one(tiny_engine, synth_set):
    trajs = load_trajectories(synth_set).trajectories
    assert len(trajs) >= 20
    _, one = _score(tiny_engine, trajs, 1)
    _, many = _score(tiny_engine, trajs, 8)
    assert [v.raw for v in one] == [v.raw for v in many]
    assert [v.status for v in one] == [v.status for v in many]
    assert [v.prompt_tokens for v in one] == [v.prompt_tokens for v in many]


def test_injected_oom_splits_and_keeps_every_verdict(tiny_engine, synth_set, monkeypatch):
    trajs = load_trajectories(synth_set).trajectories[:10]
    _, clean = _score(tiny_engine, trajs, 8)
    monkeypatch.setattr(tiny_engine, "budget", type(tiny_engine.budget)(tiny_engine.budget.start))  # learns here only
    tiny_engine.inject_oom = lambda n: n > 2  # any batch above 2 "runs out of memory"
    before = tiny_engine.counts["oom_splits"]
    try:
        _, hit = _score(tiny_engine, trajs, 8)
    finally:
        tiny_engine.inject_oom = None
    assert tiny_engine.counts["oom_splits"] > before
    assert len(hit) == 10 and all(v.status != "error" for v in hit)
    assert [v.raw for v in hit] == [v.raw for v in clean]


def test_oom_at_batch_one_is_an_error_not_a_crash(tiny_engine, synth_set, monkeypatch):
    trajs = load_trajectories(synth_set).trajectories[:3]
    monkeypatch.setattr(tiny_engine, "budget", type(tiny_engine.budget)(tiny_engine.budget.start))
    tiny_engine.inject_oom = lambda n: True
    try:
        _, v = _score(tiny_engine, trajs, 4)
    finally:
        tiny_engine.inject_oom = None
    assert all(x.status == "error" and "out of memory" in x.error for x in v)
    assert all("lower --max-visual-tokens" in x.error and "--load-in-4bit" in x.error for x in v)  # the fix


def test_corrupt_image_is_an_error_verdict(tiny_engine, synth_set, tmp_path):
    trajs = load_trajectories(synth_set).trajectories[:3]
    bad = tmp_path / "corrupt.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\nthis is not an image")
    trajs[1].steps[-1].screenshot = str(bad)
    pipe = AdaptRubric(tiny_engine, PipelineConfig(dedupe_frames=False, verify_max_new_tokens=8, cue_max_new_tokens=8))
    v = pipe.score(trajs)
    assert [x.status for x in v][1] == "error" and "corrupt.png" in v[1].error and trajs[1].id in v[1].error
    assert v[0].status != "error" and v[2].status != "error"


def test_visual_token_budget(tmp_path):
    paths = [make_png(tmp_path / f"{i}.png", i, size=(1080, 2400)) for i in range(10)]
    cfg = ImageConfig(max_visual_tokens=6144)
    sizes = target_sizes([(2400, 1080)] * 10, cfg)
    assert all(h % 32 == 0 and w % 32 == 0 for h, w in sizes)
    pipe = ImagePipeline(cfg)
    try:
        b = pipe.process([paths])
        assert b.visual_tokens(0) <= 6144 and len(b.tokens_per_image[0]) == 10
        unbounded = ImagePipeline(ImageConfig(max_visual_tokens=None)).process([paths[:1]])
        assert unbounded.visual_tokens(0) > 614  # the budget, not the image, limited the first
    finally:
        pipe.close()


def test_generated_probabilities_match_a_forward_pass(tiny_engine, synth_set):
    """What the recorder saw during generation equals P(next token) recomputed from scratch."""
    t = load_trajectories(synth_set).trajectories[0]
    req = Request(prompt="Judge this.", images=[s.screenshot for s in t.steps[:2]], watch=("0", "1"),
                  max_new_tokens=6, kind="verify")
    out = tiny_engine.generate([req])[0]
    imgs = tiny_engine.images.process([req.images])
    enc = tiny_engine.encode([req], imgs, device=tiny_engine.device)
    gen = tiny_engine.tokenizer(out.text, add_special_tokens=False)["input_ids"]
    rec_first = tiny_engine.next_token_probs([req], [""], ("0", "1"))[0]
    from adaptrubric_local.engine.generation import WatchRecorder

    rec = WatchRecorder([tiny_engine.tokenizer.convert_tokens_to_ids(c) for c in ("0", "1")])
    with torch.inference_mode():
        tiny_engine.model.generate(**enc, max_new_tokens=1, do_sample=False,
                                   logits_processor=[rec], pad_token_id=tiny_engine.tokenizer.pad_token_id)
    first = rec.stacked()[0, 0]
    assert first[0].item() == pytest.approx(rec_first["0"], rel=1e-4)
    assert first[1].item() == pytest.approx(rec_first["1"], rel=1e-4)
    assert len(gen) >= 1


def test_next_token_probs(token_engine, synth_set):
    """P(SCORE=1) after the prefix "SCORE: " is read at the digit tokens (Qwen3's "0" and "1" are ids 15 and 16:
    digits are split one at a time, there is no " 1" token)."""
    t = load_trajectories(synth_set).trajectories[0]
    req = Request(prompt="Judge this.", images=[s.screenshot for s in t.steps[:2]])
    (p,) = token_engine.next_token_probs([req], ["SCORE: "], ("0", "1"))
    assert 0 < p["0"] < 1 and 0 < p["1"] < 1
    ids = token_engine.tokenizer("SCORE: 1", add_special_tokens=False)["input_ids"]
    assert ids[-1] == token_engine.tokenizer.convert_tokens_to_ids("1")  # the digit is a token of its own


def test_vote():
    ok = lambda s: Verdict(status="ok", score=s, evidence_sufficient=True, missing_evidence="none", raw=str(s))
    bad = Verdict(status="unparsed", raw="?")
    v = vote([ok(1), ok(1), ok(0), bad], "x")
    assert v.score == 1 and v.vote_share == pytest.approx(2 / 3) and v.votes == [1, 1, 0, None]
    assert vote([ok(1), ok(0)], "x").status == "unparsed"
    assert vote([bad, bad], "x").status == "unparsed"


def test_score_cli_resume_after_sigkill(tiny_model, synth_set, tmp_path):
    out = tmp_path / "v.jsonl"
    cmd = [sys.executable, "-m", "adaptrubric_local.cli", "score", str(synth_set), "--model", str(tiny_model),
           "--out", str(out), "--max-batch-size", "1", "--verify-max-new-tokens", "8", "--quiet", "--resume"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if out.exists() and out.read_text().count("\n") >= 4:
            os.kill(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.02)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    partial = out.read_text().count("\n")
    assert 4 <= partial < 24
    with open(out, "a") as fh:  # a torn line, as a kill during a write leaves
        fh.write('{"id": "t00')
    done = subprocess.run([a for a in cmd if a != "--quiet"] + ["--summary-json", str(tmp_path / "s.json")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == json.loads((tmp_path / "s.json").read_text())  # stdout: the summary only
    ids = [json.loads(x)["id"] for x in out.read_text().splitlines()]
    assert len(ids) == 24 and len(set(ids)) == 24
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["this_run"]["n"] == 24 - partial and summary["skipped_resume"] == partial
    assert summary["n"] == 24  # the summary describes the whole file
    assert set(summary) >= {"n", "scored", "unparsed", "errors", "s_per_traj", "calls_per_traj", "tokens_per_traj"}


def test_padded_prefill_attention_matches_stock_sdpa(monkeypatch):
    from types import SimpleNamespace

    from transformers.integrations import sdpa_attention

    from adaptrubric_local.engine import attention

    torch.manual_seed(0)
    b, h, kv, L, d = 3, 4, 2, 12, 8
    q, k, v = torch.randn(b, h, L, d), torch.randn(b, kv, L, d), torch.randn(b, kv, L, d)
    pads = torch.tensor([0, 3, 7])
    ar = torch.arange(L)
    mask = (ar[None, None, :] <= ar[None, :, None]) & (ar[None, None, :] >= pads[:, None, None])
    mask = mask[:, None]  # (B, 1, Q, K): left padding + causal
    module = SimpleNamespace(num_key_value_groups=h // kv, is_causal=True)
    ref, _ = sdpa_attention.sdpa_attention_forward(module, q, k, v, mask)
    calls = []
    monkeypatch.setattr(sdpa_attention, "sdpa_attention_forward", lambda *a, **kw: calls.append(1) or ref)
    out, _ = attention.padded_prefill_sdpa(module, q, k, v, mask)
    assert not calls  # the per-row fast path was taken
    for i in range(b):
        p = int(pads[i])
        assert torch.allclose(out[i, p:], ref[i, p:], atol=1e-5)
    # a mask that is not left padding + causal goes to stock SDPA
    attention.padded_prefill_sdpa(module, q, k, v, torch.ones_like(mask))
    assert calls == [1]


def test_votes_sample_k_outputs(tiny_model, synth_set):
    from adaptrubric_local.engine.hf import HFEngine, HFEngineConfig

    eng = HFEngine(HFEngineConfig(model=str(tiny_model), votes=3, max_new_tokens=6))
    try:
        t = load_trajectories(synth_set).trajectories[:2]
        v = AdaptRubric(eng, PipelineConfig(fine=False, verify_max_new_tokens=6)).score(t)
        assert all(x.status in ("ok", "unparsed") for x in v)
        assert all(x.raw.count("----- sample -----") == 2 for x in v)  # 3 samples kept in raw
    finally:
        eng.close()


def test_lora_adapter_loads_through_peft(tiny_model, synth_set, tmp_path):
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import Qwen3VLForConditionalGeneration

    from adaptrubric_local.engine.hf import HFEngine, HFEngineConfig

    base = Qwen3VLForConditionalGeneration.from_pretrained(tiny_model, local_files_only=True)
    lora = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules=r".*language_model.*\.(q_proj|v_proj)",
                                           init_lora_weights=False))
    lora.save_pretrained(tmp_path / "adapter")
    eng = HFEngine(HFEngineConfig(model=str(tiny_model), adapter=str(tmp_path / "adapter"), max_new_tokens=6))
    try:
        assert isinstance(eng.model, PeftModel) and eng.name.endswith("adapter")
        t = load_trajectories(synth_set).trajectories[:1]
        assert AdaptRubric(eng, PipelineConfig(fine=False, verify_max_new_tokens=6)).score(t)[0].status != "error"
    finally:
        eng.close()


def test_4bit_loading(tiny_model, synth_set):
    pytest.importorskip("bitsandbytes")
    from adaptrubric_local.engine.hf import HFEngine, HFEngineConfig

    eng = HFEngine(HFEngineConfig(model=str(tiny_model), load_in_4bit=True, max_new_tokens=4))
    try:
        import bitsandbytes as bnb

        quantised = {n for n, m in eng.model.named_modules() if isinstance(m, bnb.nn.Linear4bit)}
        assert any("language_model" in n for n in quantised) and not any("visual" in n for n in quantised)
        t = load_trajectories(synth_set).trajectories[:1]
        assert AdaptRubric(eng, PipelineConfig(fine=False, verify_max_new_tokens=4)).score(t)[0].status != "error"
    finally:
        eng.close()


def test_odd_inputs(tiny_engine, tmp_path):
    from PIL import Image

    from adaptrubric_local import Step, Trajectory

    rgba = tmp_path / "rgba.png"
    Image.new("RGBA", (120, 260), (10, 200, 30, 128)).save(rgba)
    pal = tmp_path / "pal.png"
    Image.new("P", (100, 220), 3).save(pal)
    gray = tmp_path / "gray.png"
    Image.new("L", (90, 200), 77).save(gray)
    jpg = tmp_path / "shot.jpg"
    Image.new("RGB", (140, 300), (1, 2, 3)).save(jpg)
    wide = tmp_path / "wide.png"
    Image.new("RGB", (4000, 10), (0, 0, 0)).save(wide)  # aspect ratio > 200: Qwen's resize rule rejects it
    trajs = [
        Trajectory(id="one", instruction="Open Settings.", steps=[Step(screenshot=str(rgba), action="finish()")]),
        Trajectory(id="mixed", instruction="Open Files.", steps=[Step(screenshot=str(p), action=f"tap({i})")
                                                                   for i, p in enumerate([pal, gray, jpg, rgba])]),
        Trajectory(id="wide", instruction="Open Files.", steps=[Step(screenshot=str(wide), action="tap()")]),
    ]
    v = AdaptRubric(tiny_engine, PipelineConfig(verify_max_new_tokens=4, cue_max_new_tokens=4)).score(trajs)
    assert v[0].status != "error" and v[0].n_images == 1
    assert v[1].status != "error" and v[1].n_images == 4
    assert v[2].status == "error" and "wide.png: aspect ratio 400:1" in v[2].error, v[2].error


# ---------------------------------------------------------------------------------------------- stopping
class ForceText:
    """A logits processor that makes row r generate `targets[r]` token by token (then keeps repeating its
    last token), whatever the random weights would say."""

    def __init__(self, targets, prompt_len):
        self.targets, self.prompt_len = targets, prompt_len

    def __call__(self, input_ids, scores):
        j = input_ids.shape[1] - self.prompt_len
        forced = torch.full_like(scores, float("-inf"))
        for r, t in enumerate(self.targets):
            forced[r, t[min(j, len(t) - 1)]] = 0.0
        return forced


def _forcing(monkeypatch, engine, texts):
    """Make engine.model.generate emit `texts` (one per row, in the group's row order); returns a list
    that receives (sequences length - prompt length, inputs) of every call."""
    tok = engine.tokenizer
    targets = [tok.encode(t, add_special_tokens=False) for t in texts]
    calls = []
    real = engine.model.generate

    def generate(**kw):
        plen = kw["input_ids"].shape[1]
        kw["logits_processor"] = [*list(kw.get("logits_processor") or []), ForceText(targets, plen)]
        res = real(**kw)
        calls.append((res.sequences.shape[1] - plen, kw))
        return res

    monkeypatch.setattr(engine.model, "generate", generate)
    return calls


BLOCK = "Looks done.\nSCORE: 1\nEVIDENCE_SUFFICIENT: yes\nMISSING_EVIDENCE: none\n"
CHATTER = "Let me know if you need anything else. " * 20


def test_row_stops_right_after_its_line_and_capped_rows_say_so(tiny_engine, monkeypatch):
    monkeypatch.setattr(tiny_engine.config, "max_new_tokens", 60)
    before = dict(tiny_engine.stats)
    calls = _forcing(monkeypatch, tiny_engine, [BLOCK + CHATTER, "Thinking. " + CHATTER])
    reqs = [Request(prompt="Judge A, the longer prompt of the two.", stop_after_line="MISSING_EVIDENCE:"),
            Request(prompt="Judge B.", stop_after_line="MISSING_EVIDENCE:")]
    a, b = tiny_engine.generate(reqs)
    assert a.text == BLOCK and not a.hit_cap  # nothing after the line, although generation went on
    assert a.completion_tokens == len(tiny_engine.tokenizer.encode(BLOCK, add_special_tokens=False))
    assert b.hit_cap and b.completion_tokens == 60 and b.text.startswith("Thinking. Let me know")
    assert calls[0][0] == 60  # the capped row kept the batch going
    stats = tiny_engine.stats
    assert stats["stopped_at_line"] == before["stopped_at_line"] + 1 and stats["hit_cap"] == before["hit_cap"] + 1


def test_batch_ends_when_every_row_has_stopped(tiny_engine, monkeypatch):
    monkeypatch.setattr(tiny_engine.config, "max_new_tokens", 80)
    calls = _forcing(monkeypatch, tiny_engine, [BLOCK + CHATTER, "Short.\n" + BLOCK + CHATTER])
    reqs = [Request(prompt="Judge A, the longer prompt of the two.", stop_after_line="MISSING_EVIDENCE:"),
            Request(prompt="Judge B.", stop_after_line="MISSING_EVIDENCE:")]
    a, b = tiny_engine.generate(reqs)
    assert a.text == BLOCK and b.text == "Short.\n" + BLOCK and not a.hit_cap and not b.hit_cap
    assert calls[0][0] == b.completion_tokens < 80  # stopped with the slower row, far from the cap
    # without stop_after_line the same rows run to the cap
    calls.clear()
    a, _ = tiny_engine.generate([Request(prompt=r.prompt) for r in reqs])
    assert calls[0][0] == 80 and a.hit_cap and "Let me know" in a.text


def test_generate_iter_hands_each_group_over_as_it_finishes(tiny_engine, synth_set, monkeypatch):
    """With groups of 2, the first group's outputs come before the second group has generated (what lets
    `score` write verdicts and move its bar per group), and they are generate()'s outputs."""
    monkeypatch.setattr(tiny_engine.config, "max_batch_size", 2)
    t = load_trajectories(synth_set).trajectories[0]
    reqs = [Request(prompt=f"Judge {k}." + " more" * k, images=[t.steps[0].screenshot], max_new_tokens=3)
            for k in range(5)]
    groups_at_yield = []
    got = {}
    for ready in tiny_engine.generate_iter(reqs):
        groups_at_yield.append((tiny_engine.counts["groups"], len(ready)))
        got.update(ready)
    start = groups_at_yield[0][0] - 1
    assert groups_at_yield == [(start + 1, 2), (start + 2, 2), (start + 3, 1)]
    assert [got[i].text for i in range(5)] == [o.text for o in tiny_engine.generate(reqs)]


# ---------------------------------------------------------------------------------------------- OOM retry
def test_oom_retry_holds_nothing_of_the_failed_attempt(tiny_engine, synth_set, monkeypatch):
    import gc
    import weakref

    trajs = load_trajectories(synth_set).trajectories[:8]
    _, clean = _score(tiny_engine, trajs, 8)
    attempts = []  # (rows, weakrefs of that attempt's input tensors)
    real_collate = tiny_engine.encoder.collate

    def collate(rows, imgs, device=None, pixel_dtype=None):
        inputs = real_collate(rows, imgs, device, pixel_dtype)
        attempts.append((len(rows), [weakref.ref(inputs[k]) for k in ("input_ids", "attention_mask", "pixel_values")
                                     if k in inputs]))
        return inputs

    alive_at_retry = []

    def inject(n):
        for rows, refs in attempts[:-1]:
            if rows >= 8:  # the failed attempt: nothing of it may be alive now
                alive_at_retry.append(sum(r() is not None for r in refs))
        return n >= 8

    monkeypatch.setattr(tiny_engine.encoder, "collate", collate)
    monkeypatch.setattr(tiny_engine, "inject_oom", inject)
    monkeypatch.setattr(tiny_engine, "budget", type(tiny_engine.budget)(tiny_engine.budget.start))
    gc.disable()  # the retry must free the attempt by itself, without waiting for a collection to run
    try:
        before = tiny_engine.counts["oom_splits"]
        _, hit = _score(tiny_engine, trajs, 8)
    finally:
        gc.enable()
    assert tiny_engine.counts["oom_splits"] > before and any(rows == 8 for rows, _ in attempts)
    assert alive_at_retry and set(alive_at_retry) == {0}, alive_at_retry
    assert len(hit) == 8 and [v.raw for v in hit] == [v.raw for v in clean]


# ---------------------------------------------------------------------------------------------- data path
def test_uint8_frames_reach_the_model_as_the_processors_pixels(tiny_engine, tmp_path, monkeypatch):
    from PIL import Image

    paths = [make_png(tmp_path / f"{i}.png", i, size=(300 + 40 * i, 500)) for i in range(3)]
    reqs = [Request(prompt="Judge A.", images=paths[:2]), Request(prompt="Judge B.", images=paths[2:])]
    imgs = tiny_engine.images.process([r.images for r in reqs])
    assert imgs.patches.dtype == torch.uint8 and imgs.patches.shape[1] == 3 * 16 * 16  # one frame, one byte each
    ref = tiny_engine.processor.image_processor(images=[Image.open(p).convert("RGB") for p in paths],
                                                return_tensors="pt")
    assert imgs.patches.numel() * 4 * 2 == ref["pixel_values"].numel() * 4 // 1  # float32 x 2 frames before
    calls = _forcing(monkeypatch, tiny_engine, ["a", "b"])
    tiny_engine.generate([Request(prompt=r.prompt, images=r.images, max_new_tokens=2) for r in reqs])
    seen = calls[0][1]["pixel_values"]
    assert seen.device == tiny_engine.device
    assert torch.equal(calls[0][1]["image_grid_thw"].cpu(), ref["image_grid_thw"])
    assert torch.allclose(seen.float().cpu(), ref["pixel_values"], atol=1e-5)


# ---------------------------------------------------------------------------------------------- batching
def test_groups_fill_to_the_batch_size_under_a_token_budget(tiny_engine, synth_set, monkeypatch):
    trajs = load_trajectories(synth_set).trajectories[:16]
    monkeypatch.setattr(tiny_engine, "counts", type(tiny_engine.counts)())
    _score(tiny_engine, trajs, 8)
    s = tiny_engine.stats
    assert set(s) == {"groups", "rows", "rows_per_group", "oom_splits", "hit_cap", "stopped_at_line",
                      "max_batch_tokens", "start_batch_tokens", "failed_attempts", "budget_changes",
                      "memory_budget_gib", "peak_estimate_gib", "attn_implementation", "tokenize_s", "prepare_wait_s", "generate_s"}
    verify_groups = 2  # 16 verifier requests at batch 8; route/cue calls add their own groups
    assert s["rows"] >= 16 and s["groups"] >= verify_groups and s["rows_per_group"] == s["rows"] / s["groups"]
    est = {i: 1000 for i in range(16)}
    monkeypatch.setattr(tiny_engine, "budget", TokenBudget(4000))  # 4 rows of 1000 padded tokens
    assert [len(g) for g in sub_batches(tiny_engine, list(range(16)), est)] == [4, 4, 4, 4]


def test_static_cache_option_gives_the_same_outputs(tiny_model, synth_set):
    """compile=True: static KV cache (compiled only on CUDA); on the CPU the outputs must not change."""
    from adaptrubric_local.engine.hf import HFEngine, HFEngineConfig

    t = load_trajectories(synth_set).trajectories[:3]
    reqs = [Request(prompt="Judge this.", images=[s.screenshot for s in x.steps[:2]], max_new_tokens=6) for x in t]
    outs = {}
    for flag in (False, True):
        eng = HFEngine(HFEngineConfig(model=str(tiny_model), max_new_tokens=6, compile=flag))
        try:
            outs[flag] = [o.text for o in eng.generate(reqs)]
        finally:
            eng.close()
    assert outs[True] == outs[False] and all(outs[True])




# ---------------------------------------------------------------------------------------------- planted bugs
def test_visual_token_budget_counts_merged_32px_tokens_not_16px_patches():
    """10 phone frames under a 5,760-token budget keep ~576 tokens each (a 32x32-pixel merged token),
    not ~144 (the budget wrongly spent in 16x16-pixel patches)."""
    sizes = target_sizes([(2400, 1080)] * 10, ImageConfig(max_visual_tokens=5760))
    tokens = [(h // 32) * (w // 32) for h, w in sizes]
    assert sum(tokens) <= 5760
    assert all(0.85 * 576 <= t <= 576 for t in tokens), tokens
    native = target_sizes([(2400, 1080)], ImageConfig(max_visual_tokens=None))[0]
    assert (native[0] // 32) * (native[1] // 32) > 576  # the processor's own resolution is larger: the budget bit


class ForceByPrompt:
    """Forces each row's text by what its prompt holds: rows whose prompt contains `marker` get
    `texts[0]`, the others `texts[1]` (whatever order the rows are in)."""

    def __init__(self, marker, targets, prompt_len):
        self.marker, self.targets, self.prompt_len = marker, targets, prompt_len

    def __call__(self, input_ids, scores):
        j = input_ids.shape[1] - self.prompt_len
        forced = torch.full_like(scores, float("-inf"))
        for r in range(input_ids.shape[0]):
            t = self.targets[0 if bool((input_ids[r, :self.prompt_len] == self.marker).any()) else 1]
            forced[r, t[min(j, len(t) - 1)]] = 0.0
        return forced


def _force_by_prompt(monkeypatch, engine, marker_token, texts):
    tok = engine.tokenizer
    marker = tok.convert_tokens_to_ids(marker_token)
    targets = [[*tok.encode(t, add_special_tokens=False), tok.convert_tokens_to_ids("<|im_end|>")] for t in texts]
    real = engine.model.generate

    def generate(**kw):
        kw["logits_processor"] = [*list(kw.get("logits_processor") or []), ForceByPrompt(marker, targets, kw["input_ids"].shape[1])]
        return real(**kw)

    monkeypatch.setattr(engine.model, "generate", generate)


def test_vote_samples_belong_to_their_own_request(tiny_model, synth_set, monkeypatch):
    from adaptrubric_local.engine.hf import HFEngine, HFEngineConfig

    yes = "Done.\nSCORE: 1\nEVIDENCE_SUFFICIENT: yes\nMISSING_EVIDENCE: none"
    no = "Not done.\nSCORE: 0\nEVIDENCE_SUFFICIENT: yes\nMISSING_EVIDENCE: none"
    eng = HFEngine(HFEngineConfig(model=str(tiny_model), votes=3, max_new_tokens=40))
    try:
        _force_by_prompt(monkeypatch, eng, "<|quad_start|>", [yes, no])
        t = load_trajectories(synth_set).trajectories
        imgs = [[s.screenshot for s in x.steps[:2]] for x in t[:4]]
        reqs = [Request(prompt="Judge the first.", images=imgs[0]),
                Request(prompt="Judge the second <|quad_start|>.", images=imgs[1]),
                Request(prompt="Judge the third, a longer prompt than the others.", images=imgs[2]),
                Request(prompt="Judge <|quad_start|> the fourth.", images=imgs[3])]
        outs = eng.generate(reqs)
        assert [[s for s, _ in o.samples] for o in outs] == [[no] * 3, [yes] * 3, [no] * 3, [yes] * 3]
        assert [o.text for o in outs] == [no, yes, no, yes]
        # through the pipeline: each trajectory's vote comes from its own samples
        trajs = t[:4]
        trajs[1].instruction += " <|quad_start|>"
        trajs[2].instruction += " <|quad_start|>"
        v = AdaptRubric(eng, PipelineConfig(fine=False, verify_max_new_tokens=40)).score(trajs)
        assert [x.score for x in v] == [0, 1, 1, 0] and all(x.status == "ok" for x in v)
    finally:
        eng.close()


def test_fake_engine_stops_after_the_line_and_reports_the_cap():
    from adaptrubric_local.engine.fake import ScriptedEngine

    eng = ScriptedEngine(script=lambda r: BLOCK + CHATTER)
    stopped, capped, free = eng.generate([Request(prompt="p", stop_after_line="MISSING_EVIDENCE:"),
                                          Request(prompt="p", max_new_tokens=5),
                                          Request(prompt="p", max_new_tokens=500)])
    assert stopped.text == BLOCK and not stopped.hit_cap
    assert capped.hit_cap and capped.text == "Looks done.\nSCORE: 1\nEVIDENCE_SUFFICIENT:" and capped.completion_tokens == 5
    assert free.text == BLOCK + CHATTER and not free.hit_cap


def _gpu_bench():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "eval" / "gpu_bench.py"
    spec = importlib.util.spec_from_file_location("gpu_bench", path)
    bench = importlib.util.module_from_spec(spec)
    sys.modules["gpu_bench"] = bench  # dataclasses look their module up there
    try:
        spec.loader.exec_module(bench)
    finally:
        sys.modules.pop("gpu_bench", None)
    return bench


def test_gpu_bench_tiny_runs_the_engine_and_the_reference(tmp_path, capsys):
    """`eval/gpu_bench.py --tiny`: the GPU benchmark's code path on the CPU, small sizes; the attention
    implementation is the engine's own choice (here the CPU's per-row path), not a fixed "sdpa"."""
    bench = _gpu_bench()
    out = tmp_path / "gpu.md"
    rc = bench.main(["--tiny", "--n-traj", "4", "--new-tokens", "3", "--no-options", "--out", str(out)])
    printed = capsys.readouterr().out.strip().splitlines()
    assert rc == 0 and printed[-1].startswith("ratio=") and float(printed[-1][6:]) > 0
    report = out.read_text()
    assert "| native | engine | 3 |" in report and "| native | reference | 3 |" in report and "cap 512" in report
    assert "not a GPU measurement" in report and "attention `sdpa_padded_prefill`" in report
    same = {line.split("|")[1].strip(): line.split("|")[11].strip() for line in report.splitlines()
            if "| reference |" in line}
    # fp32, same model object, same pixels: native resolution matches exactly. Under the cap the two sides
    # batch the rows differently (token budget vs fixed batch), and the random tiny model has near-tied
    # logits that a different float summation order can flip: there at least a third must match (2/6 seen).
    hits, n = (int(x) for x in same["native"].split("/"))
    assert hits == n, same
    cap = next(v for k, v in same.items() if k.startswith("cap"))
    hits, n = (int(x) for x in cap.split("/"))
    assert hits * 3 >= n, same


def test_engine_defaults_are_the_papers_and_options_validate():
    from adaptrubric_local.engine.hf import HFEngineConfig

    cfg = HFEngineConfig()
    assert cfg.max_visual_tokens is None and ImageConfig().max_visual_tokens is None  # processor resolution
    assert cfg.max_new_tokens == 1024 and cfg.max_batch_tokens is None and cfg.compile is False
    for bad in (dict(max_batch_tokens=0), dict(max_visual_tokens=2), dict(max_new_tokens=0), dict(temperature=0)):
        with pytest.raises(ValueError):
            HFEngineConfig(**bad)
    assert HFEngineConfig(max_visual_tokens=6144, max_batch_tokens=100_000, compile=True).max_visual_tokens == 6144


def test_the_token_budget_learns_from_out_of_memory_and_the_summary_says_so(tiny_engine, synth_set, tmp_path):
    """Injected OOM above 2 rows over 24 verifier requests (one generate call): every trajectory is
    scored, at most 3 attempts fail (halving alone, with every group starting at full size again, failed
    9), and the budget and its changes are in the engine stats and `verdicts.summary.json`."""
    import dataclasses

    from adaptrubric_local.engine.hf import HFEngine
    from adaptrubric_local.scoring import score_file

    eng = HFEngine(dataclasses.replace(tiny_engine.config, max_batch_size=8, max_new_tokens=8),
                   loaded=(tiny_engine.model, tiny_engine.processor))
    attempts = []
    eng.inject_oom = lambda n: attempts.append(n) or n > 2
    pipe = AdaptRubric(eng, PipelineConfig(router="rules", fine=False, trajectories_per_batch=24,
                                           verify_max_new_tokens=8))
    summary = score_file(pipe, synth_set, tmp_path / "v.jsonl", progress=False)
    lines = [json.loads(x) for x in (tmp_path / "v.jsonl").read_text().splitlines()]
    assert len(lines) == 24 and all(v["status"] != "error" for v in lines)
    failed = [n for n in attempts if n > 2]
    assert sum(attempts) - sum(failed) == 24 and 1 <= len(failed) <= 3, attempts
    s = json.loads((tmp_path / "v.summary.json").read_text())["engine"]
    assert s == summary["engine"] and s["failed_attempts"] == len(failed)
    assert s["start_batch_tokens"] == 262_144 and s["max_batch_tokens"] < s["start_batch_tokens"]
    assert s["budget_changes"] and s["budget_changes"][-1]["to"] == s["max_batch_tokens"]
    assert all({"group", "from", "to", "why"} <= set(c) for c in s["budget_changes"])
    eng.close()


def test_gpu_bench_times_the_vision_tower_inside_the_prefill_window(tiny_engine, tmp_path, monkeypatch):
    """transformers 5.24 runs the vision tower in `generate` before the prefill forward: the meter's
    window opens when the tower starts, and its FLOPs are counted (a tower slowed by 0.3 s shows in the
    prefill seconds; the forward's own pre-hook never saw the images)."""
    bench = _gpu_bench()
    model = tiny_engine.model
    visual = model.model.visual
    real = type(visual).forward

    def slow(self, *a, **kw):
        time.sleep(0.3)
        return real(self, *a, **kw)

    monkeypatch.setattr(type(visual), "forward", slow)
    meter = bench.PrefillMeter(model, cuda=False)
    try:
        req = Request(prompt="Judge.", images=[make_png(tmp_path / "a.png", 3)], max_new_tokens=2)
        tiny_engine.generate([req])
    finally:
        meter.close()
    _lm, vis, _head = bench.param_counts(model)
    assert meter.seconds >= 0.3
    assert meter.flops > 2 * vis * 4  # the tower's FLOPs over the image's patches are in


def test_gpu_bench_reference_runs_under_the_engines_out_of_memory_rules(tiny_engine, synth_set, monkeypatch):
    """Injected OOM above 2 rows: the reference halves the failed batch and learns a token budget as the
    engine does, so both sides fail about as often and neither is left with a smaller batch."""
    import dataclasses

    from adaptrubric_local.engine.hf import HFEngine

    bench = _gpu_bench()
    eng = HFEngine(dataclasses.replace(tiny_engine.config, max_batch_size=8, max_new_tokens=3),
                   loaded=(tiny_engine.model, tiny_engine.processor))
    eng.inject_oom = lambda n: n > 2
    trajs = load_trajectories(synth_set).trajectories[:16]
    meter = bench.PrefillMeter(tiny_engine.model, cuda=False)
    real = bench._reference_batch
    sizes = []

    def batch(model, processor, engine, chunk, new_tokens, device):
        sizes.append(len(chunk))
        if len(chunk) > 2:
            raise torch.OutOfMemoryError("CUDA out of memory (injected)")
        return real(model, processor, engine, chunk, new_tokens, device)

    monkeypatch.setattr(bench, "_reference_batch", batch)
    try:
        er, log = bench.run_engine(eng, trajs, 3, "native", meter, cuda=False)
        rr = bench.run_reference(tiny_engine.model, tiny_engine.processor, eng, log, 3, 8, "native", meter, False)
    finally:
        meter.close()
        eng.close()
    assert len(rr.texts) == len(log) and 1 <= er.failed <= 3 and 1 <= rr.failed <= 3, (er.failed, rr.failed, sizes)
    assert max(sizes[rr.failed:]) <= 2 and "token budget" in rr.note
