"""Image preprocessing for Qwen3-VL (engine/images.py): settings, target sizes under the per-image and
per-request caps, the batch layout and per-request errors. The pixel values against transformers' own
processor are checked in test_engine_hf.py (test_pipeline_matches_processor)."""
import pytest
import torch
from PIL import Image

from adaptrubric_local.engine.images import (
    ImageConfig,
    ImagePipeline,
    image_size,
    normalise,
    patchify,
    plan_tokens,
    target_sizes,
)

from conftest import make_png


def test_config_validates_and_derives_its_factor():
    assert ImageConfig().factor == 32  # patch 16, merge 2
    with pytest.raises(ValueError, match="min_pixels"):
        ImageConfig(min_pixels=10, max_pixels=5)
    with pytest.raises(ValueError, match="max_visual_tokens must be >= 4"):
        ImageConfig(max_visual_tokens=3)


def test_config_from_a_processor_reads_its_sizes_and_takes_overrides():
    class Proc:
        size = {"shortest_edge": 64 * 1024, "longest_edge": 256 * 1024}
        patch_size, merge_size, temporal_patch_size = 14, 2, 2
        image_mean, image_std = [0.4, 0.5, 0.6], [0.2, 0.3, 0.4]

    cfg = ImageConfig.from_processor(Proc(), max_visual_tokens=100)
    assert (cfg.patch_size, cfg.factor, cfg.min_pixels, cfg.max_pixels) == (14, 28, 64 * 1024, 256 * 1024)
    assert (cfg.mean, cfg.std, cfg.max_visual_tokens) == ((0.4, 0.5, 0.6), (0.2, 0.3, 0.4), 100)


def test_image_size_is_read_from_the_header_and_follows_a_rewritten_file(tmp_path):
    path = tmp_path / "a.png"
    Image.new("RGB", (30, 20)).save(path)
    assert image_size(str(path)) == (20, 30)  # (height, width)
    import os
    Image.new("RGB", (50, 40)).save(path)
    os.utime(path, ns=(1, 10**18))  # a new version of the file, even within the clock's resolution
    assert image_size(str(path)) == (40, 50)


def test_target_sizes_are_multiples_of_32_within_the_pixel_bounds():
    cfg = ImageConfig()
    for h, w in target_sizes([(2400, 1080), (100, 100), (33, 65)], cfg):
        assert h % 32 == 0 and w % 32 == 0 and cfg.min_pixels <= h * w <= cfg.max_pixels


def test_a_visual_token_budget_is_shared_over_a_requests_images():
    sizes = [(2400, 1080)] * 4
    free = target_sizes(sizes, ImageConfig())
    capped = target_sizes(sizes, ImageConfig(max_visual_tokens=1000))
    tokens = sum(h * w // (32 * 32) for h, w in capped)
    assert tokens <= 1000 < sum(h * w // (32 * 32) for h, w in free)


def test_frames_sharing_a_budget_never_exceed_it_together(tmp_path):
    """--max-visual-tokens is the budget of a whole trajectory (and the one an adapter was trained at):
    however many frames, of whatever sizes, their tokens add up to at most the budget, and the budget is
    used (each frame gets about its share, not a fraction of it)."""
    phone, landscape, square = (2400, 1080), (1080, 2400), (1024, 1024)
    frame_sets = [[phone], [square], [landscape], [(1600, 720), (800, 1280)], [phone, square, landscape]]
    for budget in (97, 511, 1000, 2047, 3072, 6143, 6144):
        cfg = ImageConfig(max_visual_tokens=budget)
        for n in range(1, 13):
            for frames in frame_sets:
                sizes = (frames * n)[:n]
                if budget < 4 * n:  # below the floor of 4 tokens per frame
                    continue
                tokens = [h * w // (32 * 32) for h, w in target_sizes(sizes, cfg)]
                assert sum(tokens) <= budget, (budget, sizes, tokens)
                share = min(budget // n, cfg.max_pixels // (32 * 32))  # a frame's share, within the pixel cap
                assert min(tokens) >= 0.5 * share or share < 16, (budget, sizes, tokens)
    # through the engine's own planning and decoding, on files: 6 square frames, a budget of 6,143
    frame = make_png(tmp_path / "square.png", 3, size=(1024, 1024))
    pipe = ImagePipeline(ImageConfig(max_visual_tokens=6143, workers=2))
    try:
        out = pipe.process([[frame] * 6])
    finally:
        pipe.close()
    assert out.errors == {} and out.visual_tokens(0) <= 6143 and out.visual_tokens(0) > 6143 * 0.85
    assert plan_tokens([[frame] * 6], pipe.cfg) == out.tokens_per_image


def test_a_budgeted_size_is_one_the_processor_keeps():
    """A tight budget floors a frame under the processor's min_pixels (qwen-vl-utils' smart_resize does not
    check it after shrinking); the processor would scale such a frame back up, so the target is the size it
    gives: what vLLM's processor, handed the resized frame, keeps (test_engine_vllm_engine.py)."""
    from qwen_vl_utils.vision_process import smart_resize

    cfg = ImageConfig(min_pixels=4 * 1024, max_pixels=1024 * 1024, max_visual_tokens=40)
    sizes = target_sizes([(192, 96)] * 6, cfg)  # 6 tokens each allowed: floored alone, 96 x 32 (3 tokens)
    assert sizes == [(128, 64)] * 6 and all(h * w >= cfg.min_pixels for h, w in sizes)
    for h, w in sizes:  # a fixed point of the processor's own resize
        assert smart_resize(h, w, factor=32, min_pixels=cfg.min_pixels, max_pixels=cfg.max_pixels) == (h, w)


def test_batch_layout_tokens_and_grid(tmp_path):
    a, b = make_png(tmp_path / "a.png", 1, size=(64, 96)), make_png(tmp_path / "b.png", 2, size=(128, 64))
    pipe = ImagePipeline(ImageConfig(workers=2))
    try:
        out = pipe.submit([[a], [a, b]]).result()
    finally:
        pipe.close()
    assert out.errors == {}
    assert out.image_grid_thw.tolist() == [[1, 6, 4], [1, 6, 4], [1, 4, 8]]  # (t, h/16, w/16) per image
    assert out.tokens_per_image == [[6], [6, 8]] and out.visual_tokens(1) == 14
    assert out.patches.dtype == torch.uint8 and out.patches.shape == (24 + 24 + 32, 3 * 16 * 16)
    assert out.pixel_values.shape == (80, 3 * 2 * 16 * 16) and out.pixel_values.dtype == torch.float32
    assert plan_tokens([[a], [a, b], [str(tmp_path / "missing.png")]], pipe.cfg) == [[6], [6, 8], None]


def test_an_unusable_image_fails_only_its_own_request(tmp_path):
    good = make_png(tmp_path / "good.png", 1, size=(64, 64))
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"not an image")
    thin = tmp_path / "thin.png"
    Image.new("RGB", (1, 300)).save(thin)
    pipe = ImagePipeline(ImageConfig(workers=1))
    try:
        out = pipe.process([[good], [str(tmp_path / "nope.png")], [str(broken)], [str(thin)], [good]])
    finally:
        pipe.close()
    assert set(out.errors) == {1, 2, 3}
    assert out.errors[1] == f"{tmp_path / 'nope.png'}: image not found"
    assert out.errors[2].startswith(f"{broken}: cannot read image")
    assert "aspect ratio 300:1" in out.errors[3] and "200:1" in out.errors[3]
    assert out.tokens_per_image == [[4], [], [], [], [4]] and out.patches.shape[0] == 32


def test_normalise_repeats_each_frame_and_scales_like_the_processor():
    cfg = ImageConfig()
    img = torch.randint(0, 256, (1, 3, 32, 32), dtype=torch.uint8)
    patches = patchify(img, cfg)
    values = normalise(patches, cfg)
    assert values.shape == (4, 3 * 2 * 16 * 16)
    first = values[0].view(3, 2, 16 * 16)  # channel, temporal copy, pixel
    assert torch.equal(first[:, 0], first[:, 1])  # the frame repeated over the temporal patch
    expected = (patches[0].view(3, 256).float() / 255 - 0.5) / 0.5
    assert torch.allclose(first[:, 0], expected, atol=1e-6)
