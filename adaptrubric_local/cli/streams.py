"""Where a command's text goes, at the level of file descriptors (so child processes such as vLLM's, and
libraries writing to them directly, are covered): `output_on_stdout` keeps stdout for the command's output
and sends everything else to stderr; `dropping_lines` (for --quiet) drops lines no library setting silences.
Each acts only on the descriptors `sys.stdout` and `sys.stderr` write to (a caller that replaced them, as
pytest does, keeps its own) and is undone afterwards. Knows nothing about the commands.
"""
from __future__ import annotations

import contextlib
import io
import os
import sys
import threading
from collections.abc import Iterator

OUTPUT_ENV = {"VLLM_LOGGING_STREAM": "ext://sys.stderr"}  # vLLM logs to stdout by default (its envs.py)


def _writes_to(stream, fd: int) -> bool:
    """Whether `stream` writes to descriptor `fd`."""
    try:
        return stream.fileno() == fd
    except (AttributeError, ValueError, OSError):
        return False


@contextlib.contextmanager
def env_defaults(values: dict[str, str]) -> Iterator[None]:
    """While the block runs, the environment variables of `values` the user did not set are set; restored after."""
    before = {k: os.environ.get(k) for k in values}
    os.environ.update({k: v for k, v in values.items() if before[k] is None})
    try:
        yield
    finally:
        for k in values:
            os.environ.pop(k, None)
        os.environ.update({k: v for k, v in before.items() if v is not None})


def _like(stream, fd: int) -> io.TextIOWrapper:
    """A text stream on `fd` (left open when it closes) buffered as `stream` is (unbuffered under -u or
    PYTHONUNBUFFERED, line-buffered on a terminal)."""
    raw = isinstance(getattr(stream, "buffer", None), io.RawIOBase)
    return io.TextIOWrapper(open(fd, "wb", buffering=0 if raw else -1, closefd=False), encoding=stream.encoding,
                            errors=stream.errors, line_buffering=stream.line_buffering,
                            write_through=stream.write_through)


@contextlib.contextmanager
def output_on_stdout() -> Iterator[None]:
    """While a command runs, descriptor 1 points at stderr and `sys.stdout` writes to a duplicate of the real
    stdout; vLLM's log handler, which takes `sys.stdout` when set up, is pointed at stderr (OUTPUT_ENV)."""
    with env_defaults(OUTPUT_ENV):
        if not (_writes_to(sys.stdout, 1) and _writes_to(sys.stderr, 2)):
            yield
            return
        real = sys.stdout
        real.flush()
        saved = os.dup(1)
        sys.stdout = _like(real, saved)
        os.dup2(2, 1)
        try:
            yield
        finally:
            with contextlib.suppress(OSError, ValueError):
                sys.stdout.flush()
            sys.stdout = real
            os.dup2(saved, 1)
            os.close(saved)


@contextlib.contextmanager
def dropping_lines(needles: tuple[str, ...]) -> Iterator[None]:
    """While the block runs, lines holding one of `needles` written to descriptor 2 (and to 1 when it points at
    stderr) are dropped, this process's own too; the rest reach stderr in the order written."""
    if not needles or not _writes_to(sys.stderr, 2):  # (sys.stdout may be output_on_stdout's duplicate)
        yield
        return
    sys.stderr.flush()
    real_err, real_out = os.dup(2), os.dup(1)
    also_out = os.path.samestat(os.fstat(1), os.fstat(2))
    read, write = os.pipe()
    os.dup2(write, 2)
    if also_out:
        os.dup2(write, 1)
    os.close(write)
    copier = threading.Thread(target=_copy_lines, args=(read, real_err, [n.encode() for n in needles]),
                              daemon=True, name="stderr-filter")
    copier.start()
    try:
        yield
    finally:
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.flush()
        os.dup2(real_err, 2)
        os.dup2(real_out, 1)
        os.close(real_out)
        copier.join(0.5)  # the pipe ends once every writer is gone (multiprocessing's resource tracker: with us)
        if not copier.is_alive():
            os.close(real_err)


def _copy_lines(read: int, dest: int, needles: list[bytes]) -> None:
    """Copy lines from `read` to `dest` until end of file, leaving out those holding a needle."""
    with open(read, "rb", buffering=0) as src:
        pending = b""
        while chunk := src.read(65536):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                if not any(n in line for n in needles):
                    os.write(dest, line + b"\n")
        if pending and not any(n in pending for n in needles):
            os.write(dest, pending)
