"""A distillation folder as training examples, and the collator that turns them into model inputs.

Each record of `train.jsonl`/`val.jsonl` gives up to three examples: the verifier call (prompt,
screenshots, suffix -> the teacher's answer, or only its three verdict lines), the router call and
the cue call (prompt -> the teacher's answer), as `--tasks` asks. Targets never hold hidden
thinking: `<think>` blocks are taken out and leading whitespace stripped (what a reasoning parser
leaves), so `full` trains on the visible reasoning plus the verdict lines. A verifier example also
carries the teacher's P(SCORE=1) when it gave one, and the position of the SCORE digit.

The collator builds the inputs with the scoring engine's own encoder and image settings: the prompt
ids are exactly what scoring feeds the model, the target is tokenised on its own and appended, then
the end-of-turn token; every position but the response's is masked with -100. Screenshots are
decoded where the collator runs (DataLoader workers) and travel as uint8 patches, normalised on the
model's device. Knows nothing about the trainer or the loss.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

from ..thinking import split
from ..verdict import score_value_offset
from .records import read_split

__all__ = ["Collator", "Example", "examples", "read_split", "verdict_lines"]


@dataclass
class Example:
    """One supervised call: a request the engine would send, and the response to learn."""

    id: str
    kind: str  # verify | route | cue
    prompt: str
    images: list[str]
    suffix: str
    target: str
    teacher_score: int | None = None  # verify: the teacher's SCORE
    teacher_p: float | None = None  # verify: the teacher's P(SCORE=1), when it gave one
    weight: float = 1.0  # loss weight (class balancing)


def verdict_lines(verdict: dict) -> str:
    """The three output lines of a parsed verdict."""
    return (f"SCORE: {verdict['score']}\nEVIDENCE_SUFFICIENT: {'yes' if verdict['evidence_sufficient'] else 'no'}\n"
            f"MISSING_EVIDENCE: {verdict['missing_evidence']}")


def visible(text: str) -> str:
    """A teacher answer as a training target: no thinking (`thinking.py`'s definition, which the verdict
    parser uses too), no leading whitespace."""
    return split(text).answer


def examples(records: list[dict], data_dir: str | Path, target: str = "full",
             tasks: tuple[str, ...] = ("verify",)) -> list[Example]:
    """Training examples from records (`target` and `tasks` as TrainConfig checked them); router and cue
    calls shared by several records appear once."""
    root = Path(data_dir)
    out, seen = [], set()
    for r in records:
        if "verify" in tasks:
            v = r["verify"]
            text = visible(v["response"]) if target == "full" else verdict_lines(v["verdict"])
            imgs = [str(p if Path(p).is_absolute() else root / p) for p in v["images"]]
            out.append(Example(r["id"], "verify", v["prompt"], imgs, v.get("suffix", ""), text,
                               teacher_score=v["verdict"]["score"], teacher_p=v.get("p_success")))
        for kind in ("route", "cue"):
            call = r.get(kind) or {}
            if kind in tasks and call.get("prompt") and call.get("response") and call["prompt"] not in seen:
                seen.add(call["prompt"])
                out.append(Example(f"{r['id']}:{kind}", kind, call["prompt"], [], "", visible(call["response"])))
    return out


def target_ids(tokenizer, text: str, end_id: int) -> tuple[list[int], int | None]:
    """(the target's token ids, leading whitespace stripped, followed by the end-of-turn id; the index
    of the token holding the final SCORE digit or None)."""
    text = text.lstrip()
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids, spans = list(enc["input_ids"]), enc["offset_mapping"]
    at = score_value_offset(text)
    digit = None if at is None else next((k for k, (a, b) in enumerate(spans) if a <= at < b), None)
    return [*ids, end_id], digit


class Collator:
    """Examples -> padded model inputs with labels, through the scoring engine's own encoder."""

    def __init__(self, encoder, image_config, end_token: str | None = None):
        self.encoder = encoder
        self.image_config = image_config
        tok = encoder.tokenizer
        self.end_id = tok.convert_tokens_to_ids(end_token or "<|im_end|>")
        if not isinstance(self.end_id, int) or self.end_id < 0:
            self.end_id = tok.eos_token_id
        self._images = None
        self._pid = None

    def _pipeline(self):
        """This process's image pipeline (a DataLoader worker makes its own: thread pools do not fork)."""
        from ..engine.images import ImagePipeline

        if self._pid != os.getpid():
            self._images = ImagePipeline(replace(self.image_config, pin_memory=False,
                                                 workers=min(2, self.image_config.workers)))
            self._pid = os.getpid()
        return self._images

    def rows(self, batch: list[Example], tokens_per_image: list[list[int]]):
        """(token rows, number of target ids per row, SCORE-digit index within each target or None)."""
        from ..engine.base import Request

        reqs = [Request(prompt=e.prompt, images=e.images, suffix=e.suffix, kind=e.kind, tag=e.id) for e in batch]
        prompts = self.encoder.prompt_ids(reqs, tokens_per_image)
        targets = [target_ids(self.encoder.tokenizer, e.target, self.end_id) for e in batch]
        return [p + t for p, (t, _) in zip(prompts, targets)], [len(t) for t, _ in targets], [d for _, d in targets]

    def __call__(self, batch: list[Example]) -> dict:
        import torch

        imgs = self._pipeline().process([e.images for e in batch])
        if imgs.errors:
            k, err = next(iter(imgs.errors.items()))
            raise ValueError(f"example {batch[k].id}: {err}")
        rows, n_target, digits = self.rows(batch, imgs.tokens_per_image)
        enc = self.encoder.collate(rows, imgs, raw_pixels=True)
        width = enc["input_ids"].shape[1]
        labels = torch.full_like(enc["input_ids"], -100)
        score_pos = torch.full((len(batch),), -1, dtype=torch.long)
        for b, (row, n, d) in enumerate(zip(rows, n_target, digits)):
            labels[b, width - n:] = torch.tensor(row[len(row) - n:], dtype=torch.long)  # left padding
            if d is not None and batch[b].kind == "verify":
                score_pos[b] = width - n + d
        return {**enc, "labels": labels, "score_pos": score_pos,
                "teacher_score": torch.tensor([-1 if e.teacher_score is None else e.teacher_score for e in batch]),
                "teacher_p": torch.tensor([float("nan") if e.teacher_p is None else e.teacher_p for e in batch]),
                "weight": torch.tensor([e.weight for e in batch], dtype=torch.float32)}
