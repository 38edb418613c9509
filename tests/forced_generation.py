"""A scripted generation for the tiny random models: transformers' own `generate` runs (with the engine's
stopping criteria, logits processors and decoding), but a logits processor placed first makes every row
emit a given text token by token, whatever the random weights say."""
import torch

# a thinking model's output: a verdict drafted inside its thinking (SCORE 1), then the answer (SCORE 0)
DRAFT = ("The agent opened Settings and tapped the Wi-Fi row. A first draft of the verdict:\nSCORE: 1\n"
         "EVIDENCE_SUFFICIENT: yes\nMISSING_EVIDENCE: none\nWait: the last screen still shows Wi-Fi off, so the "
         "toggle did not take. The task failed.\n")
ANSWER = "The final screen shows Wi-Fi off.\nSCORE: 0\nEVIDENCE_SUFFICIENT: yes\nMISSING_EVIDENCE: none\n"


class ForceTokens:
    """Logits processor: row r emits `targets[r]` (token ids), then repeats its last token."""

    def __init__(self, targets: list[list[int]], prompt_len: int):
        self.targets, self.prompt_len = targets, prompt_len

    def __call__(self, input_ids, scores):
        j = input_ids.shape[1] - self.prompt_len
        forced = torch.full_like(scores, float("-inf"))
        for r in range(scores.shape[0]):
            t = self.targets[r % len(self.targets)]
            forced[r, t[min(j, len(t) - 1)]] = 0.0
        return forced


def force(monkeypatch, engine, texts: list[str], end: str = "<|im_end|>") -> list[dict]:
    """Make `engine.model.generate` emit `texts` (one per row of a call, cycling), each followed by `end`;
    returns a list that receives, per call, the new tokens generated and the stopping criteria used."""
    tok = engine.tokenizer
    targets = [tok.encode(t, add_special_tokens=False) + ([tok.convert_tokens_to_ids(end)] if end else [])
               for t in texts]
    calls: list[dict] = []
    real = engine.model.generate

    def generate(**kw):
        plen = kw["input_ids"].shape[1]
        kw["logits_processor"] = [ForceTokens(targets, plen), *list(kw.get("logits_processor") or [])]
        res = real(**kw)
        calls.append({"new_tokens": res.sequences.shape[1] - plen, "stopping": kw.get("stopping_criteria")})
        return res

    monkeypatch.setattr(engine.model, "generate", generate)
    return calls
