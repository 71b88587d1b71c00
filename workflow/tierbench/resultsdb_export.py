"""A machine's runs in one file, and such a file merged into another results database:
how results travel between checkouts and machines (``./tierbench export`` / ``import``).
The file is gzip'd JSON of each run as the database holds it, raw records included, with
a format name and version that an import checks before it writes anything.
"""

from __future__ import annotations

import gzip
import json
import os
import sqlite3
import zlib
from pathlib import Path

from .records import utc_now
from .resultsdb import (
    RUN_COLUMNS,
    TABLES,
    ResultsError,
    _json,
    load_run,
    run_id_of,
    runs,
    write_runs,
)

#: the marker and version an import checks before it writes anything
EXPORT_FORMAT = "tierbench-results-export"
EXPORT_VERSION = 1


def export(conn: sqlite3.Connection, out: Path, machine: str, run_id: str | None = None) -> int:
    """One gzip'd JSON file with a machine's runs (or one run); returns how many runs."""
    chosen = [r["run_id"] for r in runs(conn, machine)]
    if not chosen:
        known = ", ".join(sorted({r["machine"] for r in runs(conn)})) or "none"
        raise ResultsError(f"no runs of machine {machine!r} in the database (machines: {known})")
    if run_id is not None:
        matches = [r for r in chosen if r.startswith(run_id)]
        if len(matches) != 1:
            raise ResultsError(
                f"machine {machine} has no run {run_id!r} (runs: {', '.join(chosen)})"
            )
        chosen = matches
    body = {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "exported_at": utc_now(),
        "machine": machine,
        "runs": [_export_run(load_run(conn, r)) for r in chosen],
    }
    tmp = out.with_name(f"{out.name}.tmp-{os.getpid()}")
    with gzip.open(tmp, "wt", encoding="utf-8") as handle:
        json.dump(body, handle, separators=(",", ":"))
    os.replace(tmp, out)
    return len(chosen)


def _export_run(payload: dict) -> dict:
    out = {"run": payload["run"]}
    for table, columns in TABLES.items():
        rows = payload[table]
        if table == "raw":  # readable records, not strings of JSON
            rows = [(k, p, json.loads(r)) for k, p, r in rows]
        out[table] = {"columns": columns, "rows": [list(r) for r in rows]}
    return out


def read_export(path: Path) -> list[dict]:
    """Parse and check an export completely before anything is written."""
    try:
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            body = json.load(handle)
    except FileNotFoundError:
        raise ResultsError(f"{path}: no such file") from None
    except (OSError, EOFError, zlib.error, ValueError) as error:
        raise ResultsError(
            f"{path} is not a readable tierbench export (corrupt or truncated: {error})"
        ) from None
    if not isinstance(body, dict) or body.get("format") != EXPORT_FORMAT:
        raise ResultsError(f"{path} is not a tierbench export (no '{EXPORT_FORMAT}' marker)")
    if body.get("version") != EXPORT_VERSION:
        raise ResultsError(
            f"{path} is export version {body.get('version')}; this tierbench reads "
            f"version {EXPORT_VERSION}"
        )
    try:
        return [_import_run(entry) for entry in body["runs"]]
    except (KeyError, TypeError, ValueError) as error:
        raise ResultsError(f"{path}: malformed run in the export ({error!r})") from None


def _import_run(entry: dict) -> dict:
    run = {key: entry["run"][key] for key in RUN_COLUMNS}
    payload = {"run": run}
    for table, columns in TABLES.items():
        if entry[table]["columns"] != columns:
            raise ValueError(f"table {table} has columns {entry[table]['columns']}")
        rows = [tuple(r) for r in entry[table]["rows"]]
        if any(len(r) != len(columns) for r in rows):
            raise ValueError(f"table {table} has a row of the wrong length")
        if table == "raw":
            rows = [(k, p, _json(r)) for k, p, r in rows]
        payload[table] = rows
    keys = [row[0] for row in payload["raw"]]
    if run_id_of(run["machine"], run["study"], keys) != run["run_id"]:
        raise ValueError(f"run {run['run_id']} does not match its raw records")
    return payload


def import_file(db: str | Path, path: Path) -> list[dict]:
    """Merge an export into the database, all runs in one transaction."""
    payloads = read_export(path)
    write_runs(db, payloads)
    return [p["run"] for p in payloads]
