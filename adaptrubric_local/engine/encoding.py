"""Requests to model inputs, from a Qwen3-VL processor alone (no weights): the chat text, each image's
pad token repeated once per visual token, token ids, and left-padded batches with the pixels. The
scoring engine, the distillation collator and the memory planner share this encoder, so a student is
trained on, scored on and planned for the same tokens (a training row: `prompt_ids`, then the
target's own ids). Knows nothing about models, rubrics or verdicts.
"""
from __future__ import annotations

import torch
from torch.nn.utils.rnn import pad_sequence

from ..thinking import prompt_opens
from .base import Request
from .images import BatchImages

IMAGE_PAD = "<|image_pad|>"


class Encoder:
    """A processor's chat template and tokenizer, applied the way the engine feeds Qwen3-VL."""

    def __init__(self, processor, image_token_id: int | None = None, video_token_id: int | None = None):
        self.processor = processor
        self.tokenizer = processor.tokenizer
        self.tokenizer.padding_side = "left"
        tid = self.tokenizer.convert_tokens_to_ids
        self.image_token_id = image_token_id if image_token_id is not None else tid(IMAGE_PAD)
        self.video_token_id = video_token_id if video_token_id is not None else tid("<|video_pad|>")

    def chat_text(self, req: Request) -> str:
        """The request as one user turn and the assistant header, one image slot per image."""
        content = [{"type": "text", "text": req.prompt}] + [{"type": "image"} for _ in req.images]
        if req.suffix:
            content.append({"type": "text", "text": req.suffix})
        return self.processor.apply_chat_template([{"role": "user", "content": content}], tokenize=False,
                                                  add_generation_prompt=True)

    def opens_thinking(self) -> bool:
        """Whether the chat template opens the reply inside `<think>` (a Thinking checkpoint's)."""
        return prompt_opens(self.chat_text(Request(prompt="")))

    def end_ids(self, first) -> list[int]:
        """The ids that end a reply: `first` (the model's own end id or ids), then `<|im_end|>` and
        `<|endoftext|>`, each once."""
        first = list(first) if isinstance(first, (list, tuple)) else [first]
        ends = [*first, *map(self.tokenizer.convert_tokens_to_ids, ("<|im_end|>", "<|endoftext|>"))]
        return [t for n, t in enumerate(ends) if isinstance(t, int) and t >= 0 and t not in ends[:n]]

    @staticmethod
    def expand_images(text: str, tokens: list[int]) -> str:
        """Each image slot's pad token repeated once per visual token of that image."""
        parts = text.split(IMAGE_PAD)
        if len(parts) - 1 != len(tokens):
            raise ValueError(f"prompt has {len(parts) - 1} image slots for {len(tokens)} images")
        return parts[0] + "".join(IMAGE_PAD * n + rest for n, rest in zip(tokens, parts[1:]))

    def prompt_ids(self, reqs: list[Request], tokens: list[list[int]],
                   prefixes: list[str] | None = None) -> list[list[int]]:
        """Each request's prompt token ids (plus an assistant prefix, tokenised with the prompt): the text
        is tokenised with one pad token per image, which is then repeated once per visual token of its
        image (the pad is a special token, so the ids are those of the expanded text, `expand_images`)."""
        texts = [self.chat_text(r) + (prefixes[k] if prefixes else "") for k, r in enumerate(reqs)]
        rows = self.tokenizer(texts, add_special_tokens=False)["input_ids"]
        out = []
        for k, row in enumerate(rows):
            if row.count(self.image_token_id) != len(tokens[k]):  # a pad the tokenizer does not keep whole
                text = self.expand_images(self.chat_text(reqs[k]), tokens[k]) + (prefixes[k] if prefixes else "")
                out.append(self.tokenizer([text], add_special_tokens=False)["input_ids"][0])
                continue
            counts = iter(tokens[k])
            out.append([x for t in row for x in ([t] * next(counts) if t == self.image_token_id else (t,))])
        return out

    def collate(self, rows: list[list[int]], imgs: BatchImages, device=None, pixel_dtype=torch.float32,
                raw_pixels: bool = False) -> dict:
        """Left-padded ids, attention mask, `mm_token_type_ids` (which M-RoPE needs to place image
        tokens), pixels and grids. Pixels are the processor's normalised values (built on `device`
        from uint8, in `pixel_dtype`), or with `raw_pixels` the uint8 patches as `pixel_patches` for
        the caller to normalise where the model runs (`images.normalise`)."""
        seqs = [torch.tensor(r, dtype=torch.long) for r in rows]
        ids = pad_sequence(seqs, batch_first=True, padding_value=self.tokenizer.pad_token_id, padding_side="left")
        mask = pad_sequence([torch.ones_like(s) for s in seqs], batch_first=True, padding_side="left")
        types = torch.zeros_like(ids)
        types[ids == self.image_token_id] = 1
        types[ids == self.video_token_id] = 2
        inputs = {"input_ids": ids, "attention_mask": mask, "mm_token_type_ids": types}
        if device is not None:
            inputs = {k: v.to(device) for k, v in inputs.items()}
        if imgs.patches is not None:
            if raw_pixels:
                inputs["pixel_patches"] = imgs.patches
            else:
                inputs["pixel_values"] = imgs.pixel_values_on(device, pixel_dtype if device is not None
                                                              else torch.float32)
            inputs["image_grid_thw"] = imgs.image_grid_thw.to(device) if device is not None else imgs.image_grid_thw
        return inputs
