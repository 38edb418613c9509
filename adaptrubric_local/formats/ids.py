"""A compact set of ids for data sets of millions of records: each id is kept as its 16-byte BLAKE2b
digest in one sorted array (16 bytes an id, against about 100 for a Python set of strings), so the
checks that need every id of a data set (repeated ids, what a verdict file already holds) cost memory
that grows by megabytes, not by the records. Two different ids share a digest with a probability
below 1e-26 for a million ids; the set treats them as one, as git treats equal hashes.

Knows nothing about trajectories or verdicts: it holds strings.
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterable

import numpy as np

DIGEST = 16


def digest(i: str) -> bytes:
    """The 16-byte key an id is kept under."""
    return hashlib.blake2b(i.encode("utf-8", "surrogatepass"), digest_size=DIGEST).digest()


def key(i: str) -> bytes:
    """`digest(i)` as an array of digests holds it (numpy's fixed-width bytes drop trailing NULs): what
    a digest array's items compare equal to."""
    return digest(i).rstrip(b"\0")


def keys(ids: Iterable[str]) -> np.ndarray:
    """The `key`s of `ids`, in order, as an array of digests."""
    return np.array([key(i) for i in ids], dtype=f"S{DIGEST}")


class IdBuilder:
    """Collects ids (appending their digests to one buffer) and freezes them into an `IdSet`."""

    def __init__(self):
        self._buf = bytearray()

    def add(self, i: str) -> None:
        """Add one id."""
        self._buf += digest(i)

    def add_key(self, i: str | None) -> None:
        """Add one id, or an empty key for a record without one (kept for its position)."""
        self._buf += digest(i) if i is not None else bytes(DIGEST)

    def __len__(self) -> int:
        return len(self._buf) // DIGEST

    def take(self) -> np.ndarray:
        """The digests in the order they were added; the buffer is released (add nothing more)."""
        keys = np.frombuffer(self._buf, dtype=f"S{DIGEST}").copy() if self._buf else np.zeros(0, dtype=f"S{DIGEST}")
        self._buf = bytearray()
        return keys

    def freeze(self) -> IdSet:
        """The ids added so far, as a sorted set (the buffer is released)."""
        return IdSet(self.take())


class IdSet:
    """Sorted digests: `in` by binary search; `repeated()` the digests added more than once."""

    def __init__(self, keys: np.ndarray, presorted: bool = False):
        if not presorted:
            keys.sort()
        same = keys[1:] == keys[:-1] if len(keys) > 1 else np.zeros(0, dtype=bool)
        self._repeated = frozenset(keys[1:][same].tolist()) if same.any() else frozenset()
        self._keys = np.unique(keys) if self._repeated else keys

    @classmethod
    def of(cls, ids: Iterable[str]) -> IdSet:
        """The set of `ids`."""
        return cls(keys(ids))

    def __len__(self) -> int:
        return len(self._keys)

    @property
    def keys(self) -> np.ndarray:
        """The sorted digests, each once."""
        return self._keys

    def without(self, ids: Iterable[str]) -> np.ndarray:
        """The sorted digests less those of `ids`."""
        drop = keys(ids)
        return self._keys[~np.isin(self._keys, drop)] if len(drop) else self._keys

    def has_keys(self, keys: np.ndarray, chunk: int = 1 << 16) -> np.ndarray:
        """For each digest of `keys`, whether it is in the set (binary search, a chunk at a time, so the
        temporaries stay small)."""
        out = np.zeros(len(keys), dtype=bool)
        if not len(self._keys):
            return out
        for a in range(0, len(keys), chunk):
            part = keys[a:a + chunk]
            k = np.minimum(np.searchsorted(self._keys, part), len(self._keys) - 1)
            out[a:a + chunk] = self._keys[k] == part
        return out

    def index(self, i: str) -> int:
        """The position of id `i` among `keys`, or -1."""
        wanted = key(i)
        k = int(np.searchsorted(self._keys, wanted))
        return k if k < len(self._keys) and self._keys[k] == wanted else -1

    def __contains__(self, i: str) -> bool:
        return self.index(i) >= 0

    def is_repeated(self, i: str) -> bool:
        """Whether the id was added more than once (few are, in any real data set)."""
        return bool(self._repeated) and key(i) in self._repeated

    def repeated_count(self) -> int:
        """How many ids were added more than once."""
        return len(self._repeated)
