"""Requests to model inputs (engine/encoding.py, used by the engine, the distillation collator and the
memory planner): the image pipeline's pixels and the encoder's ids, masks and M-RoPE token types are
exactly what the Qwen3-VL processor builds."""
import torch

from adaptrubric_local import load_trajectories
from adaptrubric_local.engine.base import Request
from adaptrubric_local.engine.images import ImageConfig, ImagePipeline

from conftest import make_png


def test_pipeline_matches_processor(tiny_engine, tmp_path):
    from PIL import Image

    paths = [make_png(tmp_path / f"{i}.png", i, size=(300 + 40 * i, 500)) for i in range(4)]
    pipe = ImagePipeline(ImageConfig.from_processor(tiny_engine.processor.image_processor, max_visual_tokens=None))
    try:
        ours = pipe.process([paths[:2], paths[2:]])
    finally:
        pipe.close()
    ref = tiny_engine.processor.image_processor(images=[Image.open(p).convert("RGB") for p in paths],
                                                return_tensors="pt")
    assert torch.equal(ours.image_grid_thw, ref["image_grid_thw"])
    assert torch.allclose(ours.pixel_values, ref["pixel_values"], atol=1e-5)


def test_engine_inputs_equal_the_processors(token_engine, synth_set):
    """ids, mask, mm_token_type_ids (M-RoPE needs them), pixels and grids, exactly as the processor builds them,
    on the small trained tokenizer and on the real Qwen3 one (at Qwen3-VL's own resolution): the prompt-token
    counts `score` reports are the processor's."""
    from PIL import Image

    eng = token_engine
    t = load_trajectories(synth_set).trajectories
    reqs = [Request(prompt="Judge A.", images=[s.screenshot for s in t[0].steps[:2]], suffix="END"),
            Request(prompt="Judge this longer one, please.", images=[s.screenshot for s in t[1].steps[:3]])]
    ours = eng.encode(reqs, eng.images.process([r.images for r in reqs]))
    ref = eng.processor(text=[eng.encoder.chat_text(r) for r in reqs], padding=True, return_tensors="pt",
                        images=[Image.open(p).convert("RGB") for r in reqs for p in r.images])
    assert set(ref) == set(ours)
    for key in ("input_ids", "attention_mask", "mm_token_type_ids", "image_grid_thw"):
        assert torch.equal(ours[key], ref[key]), key
    assert torch.allclose(ours["pixel_values"], ref["pixel_values"], atol=1e-5)
    assert int(ours["mm_token_type_ids"].sum()) > 0
    outs = eng.generate([Request(prompt=r.prompt, images=r.images, suffix=r.suffix, max_new_tokens=1)
                         for r in reqs])
    assert [o.prompt_tokens for o in outs] == ref["attention_mask"].sum(1).tolist()


def test_raw_pixels_travel_as_uint8_patches(tiny_engine, tmp_path):
    """The collator's form: the same rows, with the uint8 patches the model's device normalises."""
    from adaptrubric_local.engine.images import normalise

    imgs = tiny_engine.images.process([[make_png(tmp_path / "a.png", 1)]])
    rows = tiny_engine.encoder.prompt_ids([Request(prompt="p", images=["x"])], imgs.tokens_per_image)
    raw = tiny_engine.encoder.collate(rows, imgs, raw_pixels=True)
    ref = tiny_engine.encoder.collate(rows, imgs)
    assert "pixel_values" not in raw and raw["pixel_patches"].dtype == torch.uint8
    assert torch.equal(normalise(raw["pixel_patches"], tiny_engine.images.cfg), ref["pixel_values"])
    assert torch.equal(raw["input_ids"], ref["input_ids"])


def test_prompt_ids_tokenize_one_pad_per_image_and_equal_the_expanded_text(tiny_engine, monkeypatch):
    """A native-resolution trajectory is ~25K image pads: the tokenizer sees one pad per image (1.5 s per
    16 such prompts with the real Qwen3 tokenizer when it saw them all, 0.02 s now: eval/bench_tokenize.py),
    and the ids are exactly those of the text with every pad written out."""
    enc = tiny_engine.encoder
    reqs = [Request(prompt="Judge this.", images=["a", "b"], suffix="Answer."), Request(prompt="No images.")]
    tokens = [[2550, 7], []]
    expanded = [enc.expand_images(enc.chat_text(r), t) + "SCORE:" for r, t in zip(reqs, tokens)]
    want = enc.tokenizer(expanded, add_special_tokens=False)["input_ids"]
    seen = []
    real = type(enc.tokenizer).__call__

    def call(self, texts, *a, **kw):
        seen.extend(texts if isinstance(texts, list) else [texts])
        return real(self, texts, *a, **kw)

    monkeypatch.setattr(type(enc.tokenizer), "__call__", call)
    got = enc.prompt_ids(reqs, tokens, prefixes=["SCORE:", "SCORE:"])
    assert got == want
    assert [t.count("<|image_pad|>") for t in seen] == [2, 0]  # one per image, not one per visual token
