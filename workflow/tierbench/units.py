"""Byte sizes and durations as people write them in configs (``64MiB``, ``4k``, ``2h``), and
measured values as the verdicts, tables and captions show them."""

from __future__ import annotations

import math
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


#: the multiples a value of these units may be shown in, largest first: a value takes the
#: first it reaches, else the last (0.9996 ms rounds to 1 ms first, so never 1e+03 us)
MULTIPLES = {
    "B": ((1e9, "GB"), (1e6, "MB"), (1e3, "kB"), (1.0, "B")),
    "s": ((1.0, "s"), (1e-3, "ms"), (1e-6, "us")),
    "MB/s": ((1e3, "GB/s"), (1.0, "MB/s")),
}


def multiple(value: float, unit: str) -> tuple[float, str]:
    """(size, name) of the multiple of ``unit`` that ``value`` is shown in; (1, unit) for a
    unit without multiples."""
    steps = MULTIPLES.get(unit, ((1.0, unit),))
    rounded = abs(float(f"{value:.3g}"))
    return next((step for step in steps if rounded >= step[0]), steps[-1])


def format_value(
    value: float | None, unit: str = "", *, scaled: bool = False, ratio: bool = False
) -> str:
    """One way to write a measured value: ``n/a`` when there is none (or it is not finite),
    else three significant digits without an exponent (``0.0123``, ``12.3``, ``12,300``) and
    the unit after a space.

    ``scaled``: in the unit's readable multiple (``1.5 MB``, ``12 ms``; bytes whole).
    ``ratio``: two decimals however near 1, so 1.00 and 1.03 read apart (``0.97``, ``12.3``,
    ``1,234``; below 0.1 two significant digits).
    """
    if value is None or not math.isfinite(value):
        return "n/a"
    if ratio:
        text = _ratio_text(value)
    else:
        value = float(f"{value:.3g}")
        if scaled:
            size, unit = multiple(value, unit)
            value = round(value, 0) if unit == "B" else value / size
        text = f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return f"{text} {unit}" if unit else text


def _ratio_text(value: float) -> str:
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}" if abs(value) >= 0.1 or value == 0 else f"{value:.2g}"


_DURATION = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(min|m|h|d|s)?\s*$", re.IGNORECASE)
_MINUTES = {"s": 1 / 60, "m": 1, "min": 1, "h": 60, "d": 24 * 60}
#: Slurm's own form: [days-]hours:minutes:seconds, minutes:seconds or minutes
_SLURM_TIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")


def parse_duration_minutes(value: int | str) -> int:
    """Whole minutes (rounded up) of ``90``, ``30min``, ``2h``, ``1d`` or Slurm's ``1-12:00:00``.

    A bare number is minutes, as Slurm reads ``--time``.
    """
    if isinstance(value, bool):
        raise ValueError(f"not a duration: {value!r}")
    if isinstance(value, int | float):
        return max(0, math.ceil(value))
    text = str(value).strip()
    match = _DURATION.match(text)
    if match:
        number, unit = match.groups()
        return math.ceil(float(number) * _MINUTES[(unit or "min").lower()])
    match = _SLURM_TIME.match(text)
    if not match:
        raise ValueError(f"not a duration: {value!r} (expected e.g. 90, 30min, 2h, 1-12:00:00)")
    days, first, second, third = (int(x) if x else 0 for x in match.groups())
    if match.group(1):  # days-hours[:minutes[:seconds]]
        hours, minutes, seconds = first, second, third
    elif match.group(4):  # hours:minutes:seconds
        hours, minutes, seconds = first, second, third
    else:  # minutes[:seconds]
        hours, minutes, seconds = 0, first, second
    return math.ceil(days * 1440 + hours * 60 + minutes + seconds / 60)
