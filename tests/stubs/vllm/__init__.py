"""Import stub for vLLM, used only by tests/test_rewards_openrlhf.py (put on sys.path by that test, never
installed). OpenRLHF 0.11.2 imports vllm at module level (trainer/ray/vllm_engine.py:7-12,
trainer/ppo_utils/samples_generator.py:7) on paths that never generate with it here; vLLM itself needs a
GPU build. Only the names those imports need; nothing here generates text."""
__version__ = "0.0.0+stub"


class SamplingParams:
    """The attributes OpenRLHF's executors read and set (utils/agent.py:62-94, 220-224)."""

    def __init__(self, max_tokens=None, logprobs=None, temperature=1.0, **kwargs):
        self.max_tokens, self.logprobs, self.temperature = max_tokens, logprobs, temperature
        self.__dict__.update(kwargs)
