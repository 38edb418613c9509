"""A distillation folder as training examples, and the collator that turns them into model inputs.

Each record of `train.jsonl`/`val.jsonl` gives up to three examples: the verifier call (prompt,
screenshots, suffix -> the teacher's full response, or only its three verdict lines), the router
call and the cue call (prompt -> the teacher's answer), as `--tasks` asks. The collator builds the
inputs with the scoring engine's own `encode` and image pipeline (same chat template, same image
sizes and visual-token budget) and appends the target plus the end-of-turn token as the assistant
response; every position but the response's is masked with -100. Knows nothing about the trainer.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

TASKS = ("verify", "route", "cue")
TARGETS = ("full", "verdict")


@dataclass
class Example:
    """One supervised call: a request the engine would send, and the response to learn."""

    id: str
    kind: str  # verify | route | cue
    prompt: str
    images: list[str]
    suffix: str
    target: str


def read_split(data_dir: str | Path, split: str) -> list[dict]:
    """The records of one split of a distillation folder (see adaptrubric_local.distill.collect)."""
    from adaptrubric_local.distill.collect import read_split as read

    return read(data_dir, split)


def verdict_lines(verdict: dict) -> str:
    """The three output lines of a parsed verdict."""
    return (f"SCORE: {verdict['score']}\nEVIDENCE_SUFFICIENT: {'yes' if verdict['evidence_sufficient'] else 'no'}\n"
            f"MISSING_EVIDENCE: {verdict['missing_evidence']}")


def examples(records: list[dict], data_dir: str | Path, target: str = "full",
             tasks: tuple[str, ...] = ("verify",)) -> list[Example]:
    """Training examples from records; router and cue calls shared by several records appear once."""
    if target not in TARGETS:
        raise ValueError(f"target must be one of {', '.join(TARGETS)}, got {target!r}")
    bad = [t for t in tasks if t not in TASKS]
    if bad:
        raise ValueError(f"unknown task(s) {bad}; choose from {', '.join(TASKS)}")
    root = Path(data_dir)
    out, seen = [], set()
    for r in records:
        v = r["verify"]
        if "verify" in tasks:
            text = v["response"] if target == "full" else verdict_lines(v["verdict"])
            imgs = [str(p if Path(p).is_absolute() else root / p) for p in v["images"]]
            out.append(Example(r["id"], "verify", v["prompt"], imgs, v.get("suffix", ""), text))
        for kind in ("route", "cue"):
            call = r.get(kind) or {}
            if kind in tasks and call.get("prompt") and call.get("response") and call["prompt"] not in seen:
                seen.add(call["prompt"])
                out.append(Example(f"{r['id']}:{kind}", kind, call["prompt"], [], "", call["response"]))
    return out


class Collator:
    """Examples -> padded model inputs with labels, through the scoring engine's own encoder."""

    def __init__(self, engine, end_token: Optional[str] = None):
        self.engine = engine
        tok = engine.tokenizer
        self.end = end_token or ("<|im_end|>" if tok.convert_tokens_to_ids("<|im_end|>") is not None else tok.eos_token)

    def __call__(self, batch: list[Example]) -> dict:
        from adaptrubric_local.engine.base import Request

        reqs = [Request(prompt=e.prompt, images=e.images, suffix=e.suffix, kind=e.kind, tag=e.id) for e in batch]
        imgs = self.engine.images.process([r.images for r in reqs])
        if imgs.errors:
            k, err = next(iter(imgs.errors.items()))
            raise ValueError(f"example {batch[k].id}: {err}")
        prompt_only = self.engine.encode(reqs, imgs)
        enc = self.engine.encode(reqs, imgs, [e.target + self.end for e in batch])
        ids = enc["input_ids"]
        labels = ids.clone().fill_(-100)
        n_full = enc["attention_mask"].sum(1)
        n_prompt = prompt_only["attention_mask"].sum(1)
        for b in range(len(batch)):
            n = int(n_full[b] - n_prompt[b])  # left padding: the response is the last n tokens
            labels[b, ids.shape[1] - n:] = ids[b, ids.shape[1] - n:]
        enc["labels"] = labels
        return enc
