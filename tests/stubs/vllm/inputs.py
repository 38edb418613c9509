"""vllm.inputs stub (see __init__.py): TokensPrompt is a TypedDict in vLLM."""


class TokensPrompt(dict):
    pass
