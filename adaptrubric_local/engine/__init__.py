"""The engine layer: one batched interface (`base`), the engines and what builds them. Importing any
engine module registers the package's own engines first (`build`, which imports no backend)."""
from . import build  # noqa: F401 - its @register_engine lines register the package's engines
