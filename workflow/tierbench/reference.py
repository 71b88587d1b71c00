"""The numbers each paper study's document publishes, typed into config/reference/*.csv.

Each row keeps the document's own value and unit; :func:`load` adds the value
in tierbench's units (MB/s for throughput, s for time) so ours and theirs can
be put side by side.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

REFERENCE_DIR = Path(__file__).resolve().parents[2] / "config" / "reference"
COLUMNS = [
    "document", "study", "table", "tier", "tier_class", "block_size", "cores",
    "write_interval", "ranks", "ensemble", "file_size", "repetition", "metric",
    "value", "unit", "note",
]  # fmt: skip
#: unit -> (tierbench unit, factor to multiply by)
CANONICAL = {
    "KB/s": ("MB/s", 1e-3),
    "MB/s": ("MB/s", 1.0),
    "GB/s": ("MB/s", 1e3),
    "KiB/s": ("MB/s", 1024 / 1e6),
    "MiB/s": ("MB/s", 1024**2 / 1e6),
    "GiB/s": ("MB/s", 1024**3 / 1e6),
    "s": ("s", 1.0),
    "MB": ("B", 1e6),
    "GB": ("B", 1e9),
    "files": ("files", 1.0),
    "dirs": ("dirs", 1.0),
}


def load(directory: str | Path = REFERENCE_DIR) -> pd.DataFrame:
    """Every reference row, with ``canonical_value`` and ``canonical_unit`` added."""
    frames = []
    for path in sorted(Path(directory).glob("*.csv")):
        frame = pd.read_csv(path, dtype={"document": str, "write_interval": str})
        if list(frame.columns) != COLUMNS:
            raise ValueError(f"{path}: columns must be {COLUMNS}")
        frames.append(frame)
    data = pd.concat(frames, ignore_index=True)
    unknown = sorted(set(data["unit"]) - set(CANONICAL))
    if unknown:
        raise ValueError(f"reference units without a conversion: {unknown}")
    data["canonical_unit"] = data["unit"].map(lambda u: CANONICAL[u][0])
    data["canonical_value"] = data["value"] * data["unit"].map(lambda u: CANONICAL[u][1])
    return data
