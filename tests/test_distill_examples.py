"""Training examples and the collator (distill/examples.py): the training input is the scoring input,
prompt and target are tokenised apart so the prompt ids are an exact prefix of the training row, the
SCORE digit's position and the teacher's probability travel with the batch."""
import json

import pytest

from adaptrubric_local.distill.examples import Collator, Example


def test_training_input_is_the_scoring_input(tiny_engine, dist):
    from adaptrubric_local.distill.evaluate import pipeline_from_manifest, split_data
    from adaptrubric_local.distill.examples import Collator, examples, read_split
    from adaptrubric_local.engine.images import normalise
    from adaptrubric_local.pipeline import AdaptRubric

    rec = read_split(dist, "train")[0]
    ex = examples([rec], dist, target="full")[0]
    batch = Collator(tiny_engine.encoder, tiny_engine.images.cfg)([ex])
    pipe = AdaptRubric(tiny_engine, pipeline_from_manifest(json.loads((dist / "manifest.json").read_text())))
    _, loaded, _ = split_data(dist, "train")
    traj = next(t for t in loaded.trajectories if t.id == rec["id"])
    req = pipe.verifier_request(pipe.prepare(traj))
    enc = tiny_engine.encode([req], tiny_engine.images.process([req.images]))
    n = enc["input_ids"].shape[1]
    assert batch["input_ids"][0, :n].tolist() == enc["input_ids"][0].tolist()  # same chat template and image tokens
    assert normalise(batch["pixel_patches"], tiny_engine.images.cfg).equal(enc["pixel_values"])  # same images
    assert batch["image_grid_thw"].equal(enc["image_grid_thw"])
    labels = batch["labels"][0]
    assert (labels[:n] == -100).all() and (labels[n:] != -100).all()  # loss on the response only
    response = tiny_engine.tokenizer.decode(labels[n:].tolist())
    assert response == rec["verify"]["response"] + "<|im_end|>"


def test_prompt_ids_are_an_exact_prefix_of_the_training_row(token_engine, tmp_path):
    """A reasoning parser leaves the answer starting with newlines; Qwen's vocabulary (and the tiny
    one) merges newline runs, so tokenising prompt + target together would end the prompt in a token
    scoring never produces. Prompt and target are tokenised apart. On both tiny tokenizers (the real
    Qwen3 one too)."""
    from adaptrubric_local.engine.base import Request

    from conftest import make_png

    imgs = [make_png(tmp_path / f"{k}.png", k) for k in range(2)]
    target = "\n\nThe final screen shows it.\nSCORE: 1\nEVIDENCE_SUFFICIENT: yes\nMISSING_EVIDENCE: none"
    ex = Example("x", "verify", "Judge the task.", imgs, "Answer now.", target, teacher_score=1, teacher_p=0.8)
    batch = Collator(token_engine.encoder, token_engine.images.cfg)([ex])
    req = Request(prompt=ex.prompt, images=imgs, suffix=ex.suffix)
    prompt = token_engine.encode([req], token_engine.images.process([imgs]))["input_ids"][0].tolist()
    row = batch["input_ids"][0].tolist()
    assert row[:len(prompt)] == prompt
    tok = token_engine.tokenizer
    joint = tok(tok.decode(prompt) + target, add_special_tokens=False)["input_ids"]
    assert joint[:len(prompt)] != prompt  # this tokenizer does merge across the boundary
    labels = batch["labels"][0]
    assert (labels[:len(prompt)] == -100).all()
    assert tok.decode(labels[len(prompt):].tolist()) == target.lstrip() + "<|im_end|>"
    digit = int(batch["score_pos"][0])
    assert tok.decode([row[digit]]) == "1" and tok.decode(row[digit - 3:digit]).endswith("SCORE: ")
    assert float(batch["teacher_p"][0]) == pytest.approx(0.8)
