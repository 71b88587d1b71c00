"""Byte sizes as people write them in configs (``64MiB``, ``4k``, ``1g``)."""

from __future__ import annotations

import re

_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([kmgtp]?)(i?)(b?)\s*$", re.IGNORECASE)
_POWER = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5}


def parse_size(value: int | str) -> int:
    """Return bytes for an integer or a size string.

    Suffixes follow dd: ``k``, ``M``, ``KiB``, ``MiB`` are powers of 1024;
    ``kB``, ``MB``, ``GB`` (a ``B`` without ``i``) are powers of 1000, as dd
    and the documents print them.
    """
    if isinstance(value, bool):
        raise ValueError(f"not a size: {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"size must not be negative: {value}")
        return value
    match = _SIZE.match(str(value))
    if not match:
        raise ValueError(f"not a size: {value!r} (expected e.g. 4k, 64MiB, 1GB)")
    number, prefix, binary, byte = match.groups()
    power = _POWER[prefix.lower()]
    decimal = bool(byte) and not binary and power > 0
    base = 1000 if decimal else 1024
    return int(float(number) * base**power)


def format_size(n_bytes: float) -> str:
    """Short binary size for captions: 4 KiB, 64 MiB, 1.5 GiB."""
    value = float(n_bytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            text = f"{value:.1f}".rstrip("0").rstrip(".")
            return f"{text} {unit}"
        value /= 1024
    raise AssertionError("unreachable")
