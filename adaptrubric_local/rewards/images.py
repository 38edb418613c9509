"""Screenshots carried inside a request instead of named by a path: for a reward service on another
machine than the rollouts, whose screenshots are not on its disk.

A step's `screenshot` may be a `data:image/<type>;base64,<data>` URL, or raw bytes from Python (in
JSON they travel as a data URL). `ImageStore` decodes one, checks it (`check_image`, from the header
before any pixel is decoded) and writes it to a private temporary folder (mode 0700) under a name derived
from its content, so the pipeline reads it like any other screenshot; closing the store deletes the
folder. Sizes in bytes are the caller's limit (the service's request cap). `data_url` is the reverse,
for clients. Knows nothing about trajectories' other fields, HTTP or models.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import io
import os
import re
import shutil
import tempfile
import threading
import warnings
from pathlib import Path
from typing import Any

DEFAULT_MAX_PIXELS = 50_000_000  # an 8K frame is 33 Mpx; PIL itself refuses only above 179 Mpx
FORMATS = {"PNG": ("png", "image/png"), "JPEG": ("jpg", "image/jpeg"), "WEBP": ("webp", "image/webp"),
           "BMP": ("bmp", "image/bmp")}
_DATA_URL = re.compile(r"data:(?P<mime>[\w.+-]+/[\w.+-]+)?(?P<params>(?:;[^;,]*)*),", re.I)
_MAGIC = ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"), (b"BM", "image/bmp"))


def is_inline(value: Any) -> bool:
    """Whether a screenshot value carries the image itself (bytes or a data URL) rather than a path."""
    return isinstance(value, (bytes, bytearray, memoryview)) or (isinstance(value, str)
                                                                 and value[:5].lower() == "data:")


def decode(value: Any, where: str) -> bytes:
    """The image bytes of an inline screenshot (bytes, or a base64 data URL of an image type)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    m = _DATA_URL.match(value)
    if not m:
        raise ValueError(f"{where}: not a data URL (expected 'data:image/png;base64,...')")
    mime = (m.group("mime") or "").lower()
    if not mime.startswith("image/"):
        raise ValueError(f"{where}: data URL of type {mime or 'text/plain'!r}, expected an image (image/png, ...)")
    if "base64" not in [p.strip().lower() for p in m.group("params").split(";")]:
        raise ValueError(f"{where}: data URL is not base64-encoded (expected ';base64,')")
    payload = re.sub(r"\s+", "", value[m.end():])
    try:
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"{where}: data URL holds invalid base64 ({exc})") from None


def check_image(raw: bytes, where: str, max_pixels: int = DEFAULT_MAX_PIXELS) -> str:
    """The PIL format name of `raw`: a still image in a format screenshots come in (PNG, JPEG, WebP, BMP), at
    most `max_pixels` pixels (a giant image or a decompression bomb is refused), and a body that PIL's
    `verify` accepts (a PNG's chunk checksums; a JPEG is checked when the engine decodes it); ValueError
    naming `where` otherwise."""
    from PIL import Image, UnidentifiedImageError

    problem = None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)  # the limit below decides
            with Image.open(io.BytesIO(raw)) as im:
                fmt, (w, h), frames = im.format, im.size, getattr(im, "n_frames", 1)
                if fmt not in FORMATS:
                    problem = f"inline image in {fmt} format; accepted: {', '.join(FORMATS)}"
                elif w * h > max_pixels:
                    problem = f"inline image of {w}x{h} = {w * h:,} pixels > limit {max_pixels:,} (max_image_pixels)"
                elif frames != 1:
                    problem = f"inline image is animated ({frames} frames); send one still frame"
                else:
                    im.verify()
    except Image.DecompressionBombError as exc:
        problem = f"inline image refused as a decompression bomb: {exc}"
    except UnidentifiedImageError:
        problem = "inline data is not an image PIL can read"
    except Exception as exc:  # PIL raises many types on malformed bodies
        problem = f"inline image is corrupt: {type(exc).__name__}: {exc}"
    if problem:
        raise ValueError(f"{where}: {problem}")
    return fmt


class ImageStore:
    """Inline screenshots written to a private temporary folder for the time of one scoring call.
    Thread-safe; a context manager; identical images share one file."""

    def __init__(self, max_pixels: int = DEFAULT_MAX_PIXELS, parent: str | None = None):
        if max_pixels < 1:
            raise ValueError(f"max_pixels must be >= 1, got {max_pixels}")
        self.max_pixels, self._parent = max_pixels, parent
        self.folder: Path | None = None  # the temporary folder (None until the first image arrives)
        self._lock = threading.Lock()

    def put(self, value: Any, where: str) -> str:
        """Decode and check one inline screenshot; the path of its file."""
        raw = decode(value, where)
        ext = FORMATS[check_image(raw, where, self.max_pixels)][0]
        with self._lock:
            if self.folder is None:
                self.folder = Path(tempfile.mkdtemp(prefix="adaptrubric-inline-", dir=self._parent))
            path = self.folder / f"{hashlib.sha256(raw).hexdigest()[:32]}.{ext}"
            if not path.exists():
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as fh:
                    fh.write(raw)
        return str(path)

    def close(self) -> None:
        """Delete the folder and every image in it."""
        with self._lock:
            d, self.folder = self.folder, None
        if d is not None:
            shutil.rmtree(d, ignore_errors=True)

    def __enter__(self) -> ImageStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def mime_of(raw: bytes) -> str:
    """The image type of `raw` from its first bytes (PNG, JPEG, WebP, BMP); 'image/unknown' otherwise,
    which the receiving side refuses with a message."""
    if raw[:4] == b"RIFF" and raw[8:12] == b"WEBP":
        return "image/webp"
    for magic, mime in _MAGIC:
        if raw.startswith(magic):
            return mime
    return "image/unknown"


def data_url(value: Any) -> str:
    """`value` (bytes, a data URL, or a path to an image file) as a base64 data URL."""
    if isinstance(value, str) and is_inline(value):
        return value
    raw = bytes(value) if isinstance(value, (bytes, bytearray, memoryview)) else Path(value).read_bytes()
    return f"data:{mime_of(raw)};base64,{base64.b64encode(raw).decode('ascii')}"
