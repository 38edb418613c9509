"""TRL GRPO with AdaptRubric rewards on the policy's OWN rollouts (TRL 1.16.0, `rollout_func`).

The rollout function runs the policy, turns each sampled completion into a GUI episode (here a toy
environment: the policy's first token picks one of the recorded candidate episodes of the task; a
real setup would execute the actions on an emulator and record its screenshots) and returns the
episodes under the extra key `trajectory`, which TRL passes to `rewards.trl_reward`.

    python examples/trl_grpo.py --fake-verifier       # scripted verifier (passes episodes labelled 1): learns
    python examples/trl_grpo.py --fake-verifier --judge   # a scripted student that is always wrong, checked by
                                                      # a scripted judge: adaptrubric/judge_agreement 0 in the logs
    python examples/trl_grpo.py                       # tiny RANDOM verifier: its outputs are noise, so every
                                                      # verdict is unparsed (reward None, adaptrubric/unparsed_rate 1.0)
    ADAPTRUBRIC_CONFIG=reward.yaml python examples/trl_grpo.py   # your verifier settings (model, ...)
    ADAPTRUBRIC_SERVICE_URL=http://127.0.0.1:8000 python examples/trl_grpo.py   # a running `adaptrubric serve`

Everything is built offline (random weights); the point is the wiring, not the learning curve. It
prints one JSON line per logged step; `--verbose` also shows TRL's own log dicts and the libraries'
warnings (bitsandbytes' optional CPU kernel, deprecations), hidden otherwise as the `adaptrubric`
commands hide them.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import tempfile
from pathlib import Path


def tiny_policy(seed: int = 0):
    """A 2-layer random Qwen3 causal LM and a small Qwen-style tokenizer, no hub access."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from adaptrubric_local.dry_run import tokenizer_corpus
    from adaptrubric_local.engine.tiny import build_tokenizer

    tok = build_tokenizer(tokenizer_corpus())
    torch.manual_seed(seed)
    cfg = Qwen3Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, head_dim=16, max_position_embeddings=512,
                      pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, bos_token_id=None)
    return Qwen3ForCausalLM(cfg), tok


def make_rollout_func(candidates: dict[str, list[dict]]):
    """rollout_func(prompts, trainer) -> prompt_ids, completion_ids, logprobs, trajectory (one per completion)."""
    import torch

    def rollout(prompts, trainer):
        tok, model = trainer.processing_class, trainer.model
        # TRL 1.16 hands over the prompts already repeated num_generations times: one rollout per prompt row
        prompt_ids = [tok(p, add_special_tokens=False)["input_ids"] for p in prompts]
        completion_ids, trajectories = [], []
        for p, ids in zip(prompts, prompt_ids):
            with torch.no_grad():
                out = model.generate(torch.tensor([ids]), max_new_tokens=trainer.max_completion_length,
                                     do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
                                     pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
            comp = out[0, len(ids):].tolist()
            completion_ids.append(comp)
            pool = candidates[p]
            trajectories.append(pool[comp[0] % len(pool)])  # the policy's own action decides the episode
        return {"prompt_ids": prompt_ids, "completion_ids": completion_ids, "logprobs": None,
                "trajectory": trajectories}

    return rollout


def scripted_verifier(trajectories: list[dict]):
    """A FakeEngine that passes exactly the episodes labelled 1 (it recognises them by their screenshots)."""
    from adaptrubric_local import FakeEngine
    from adaptrubric_local.dry_run import pipeline_script

    label_of = {s["screenshot"]: t.get("label", 0) for t in trajectories for s in t["steps"]}

    def script(req):
        if req.kind != "verify":
            return pipeline_script(req)
        ok = any(label_of.get(p) == 1 for p in req.images)
        return f"The final screen was checked.\nSCORE: {int(ok)}\nEVIDENCE_SUFFICIENT: yes\nMISSING_EVIDENCE: none"

    return FakeEngine(script=script)


def main(out: str | Path, steps: int = 2, fake_verifier: bool = False, verifier_model: str | None = None,
         judge: bool = False, verbose: bool = False) -> dict:
    """Train `steps` GRPO steps; returns {"log": TRL's log history, "rewards": per-step group rewards,
    "stats": the reward model's stats}. `judge` (with `fake_verifier`): the scripted verifier is a
    student that is always wrong, and a scripted judge checks every reward (spot_check 1.0), whose
    verdict is then the reward."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from adaptrubric_local import load_trajectories, rewards
    from adaptrubric_local.synth import synthesize

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    out = Path(out)
    data = synthesize(out / "episodes", n_tasks=2, candidates=4, size=(90, 200), seed=1)
    trajs = [t.to_dict() for t in load_trajectories(data).trajectories]
    by_task: dict[str, list[dict]] = {}
    for t in trajs:
        by_task.setdefault(t["instruction"], []).append(t)
    if fake_verifier and judge:  # the student answers, the judge checks (docs/student-judge.md)
        wrong = [{**t, "label": 1 - t.get("label", 0)} for t in trajs]  # a student that is always wrong
        rewards.configure(engine=scripted_verifier(wrong), judge_engine=scripted_verifier(trajs),
                          judge={"spot_check": 1.0, "escalate_band": (0.45, 0.55)})  # a band the scripted
        # student's p_success (0.1 or 0.9) is never in: every check is a spot check, so every one counts
    elif fake_verifier:
        rewards.configure(engine=scripted_verifier(trajs))
    elif verifier_model or not (os.environ.get("ADAPTRUBRIC_CONFIG") or os.environ.get("ADAPTRUBRIC_SERVICE_URL")):
        from adaptrubric_local.dry_run import tokenizer_corpus
        from adaptrubric_local.engine.tiny import make_tiny_model

        model_dir = verifier_model or make_tiny_model(out / "tiny-verifier", corpus=tokenizer_corpus())
        rewards.configure(model=str(model_dir), max_new_tokens=16, verify_max_new_tokens=16)
    seen: list[list[float | None]] = []

    def reward(**kw):
        vals = rewards.trl_reward(**kw)
        seen.append(vals)
        return vals

    reward.__name__ = "adaptrubric"
    policy, tok = tiny_policy()
    prompts = list(by_task)
    args = GRPOConfig(output_dir=str(out / "grpo"), use_cpu=True, bf16=False, per_device_train_batch_size=4,
                      num_generations=4, max_completion_length=4, max_steps=steps, logging_steps=1,
                      learning_rate=1e-3, report_to=[], save_strategy="no", seed=0, disable_tqdm=True)
    trainer = GRPOTrainer(model=policy, processing_class=tok, reward_funcs=[reward], args=args,
                          train_dataset=Dataset.from_dict({"prompt": prompts * 4}),
                          rollout_func=make_rollout_func(by_task))
    if not verbose:  # TRL's per-step log dicts on stdout: the example prints its own lines
        from transformers import PrinterCallback

        trainer.remove_callback(PrinterCallback)
    trainer.train()
    return {"log": trainer.state.log_history, "rewards": seen, "stats": rewards.reward_model().stats}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=None, help="working folder (default: a temporary one)")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--fake-verifier", action="store_true", help="scripted verifier instead of a model")
    ap.add_argument("--verifier-model", help="Qwen3-VL folder or hub id for the verifier (default: tiny random)")
    ap.add_argument("--judge", action="store_true", help="with --fake-verifier: a scripted judge checks a student")
    ap.add_argument("--verbose", action="store_true", help="also show TRL's log dicts and the libraries' warnings")
    a = ap.parse_args()
    from adaptrubric_local.cli import quiet_third_party

    with contextlib.nullcontext() if a.verbose else quiet_third_party(restore=False):
        res = main(a.out or tempfile.mkdtemp(), a.steps, a.fake_verifier, a.verifier_model, a.judge, a.verbose)
    for row in res["log"]:
        print(json.dumps({k: row[k] for k in row if k in ("step", "loss", "grad_norm", "reward", "reward_std",
                                                           "frac_reward_zero_std") or k.startswith("adaptrubric")}))
