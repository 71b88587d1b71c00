"""One results database for every machine and run: its store, what a run is, append and
rebuild (the command line is resultsdb_cli; an export file, resultsdb_export).

Each finished study run is appended to ``results/tierbench.sqlite`` (SQLite;
``database:`` in config.yaml moves it): the run's identity and provenance,
the tidy measured values (results.csv), the summary rows with status and
reason (summary.csv), the verdicts and the raw JSON records themselves, so an
export carries everything and the database can be rebuilt from the raw
records on disk.

A run id is a hash of the machine, the study and the raw records' start
times and specs: appending the same run again replaces it, and a run that
shares any raw record with an earlier run of the same machine and study
(a re-run job, a partly re-measured study) supersedes it, in one transaction.
Writers take the write lock up front (``BEGIN IMMEDIATE``) and wait for each
other (busy timeout), so two studies finishing at once both land.

On a local file system the database uses SQLite's WAL journal. WAL needs
every writer on one host, so on a network file system (NFS, Lustre,
GlusterFS...; see sharedfs) it gets a rollback journal instead, each write is
made under a lock folder that holds across hosts, on a connection opened
after the lock is taken and closed before it is released, and every write is
read back before the lock goes: a file system that drops a commit raises an
error then and there. One that cannot hold a database at all is refused.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sqlite3
import subprocess
import sys
import time
import zlib
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from . import aggregate, locks, sharedfs
from .records import LEADING_COLUMNS, TRAILING_COLUMNS, utc_now

SCHEMA_VERSION = 1
BUSY_TIMEOUT_S = 120.0
REPO = Path(__file__).resolve().parents[2]
DEFAULT_DB = "results/tierbench.sqlite"
DB_HELP = "default: TIERBENCH_DB, else `database:` in config/config.yaml, else " + DEFAULT_DB
#: what to do when the database's file system cannot be trusted with it
WHERE_INSTEAD = (
    "put the database on a local disk of the host that runs Snakemake: set `database:` in "
    "config/config.yaml (for ./tierbench list/compare/export/import: TIERBENCH_DB or --db)"
)

RUN_COLUMNS = [
    "run_id",
    "machine",
    "study",
    "scale",
    "git_commit",
    "config_hash",
    "tool_versions",
    "started",
    "finished",
    "executor",
    "noise_threshold",
    "records",
    "recorded_at",
]
POINT_COLUMNS = ["experiment", "workload", "tier", "tier_class", "host", "point", "params"]
MEASUREMENT_COLUMNS = (
    POINT_COLUMNS
    + [c for c in TRAILING_COLUMNS if c not in ("study",)]
    + aggregate.PAGE_CACHE_COLUMNS
)
SUMMARY_COLUMNS = POINT_COLUMNS + aggregate.STATISTICS + aggregate.PAGE_CACHE_COLUMNS
VERDICT_COLUMNS = ["document", "position", "lesson", "status", "text", "low", "high", "data"]
PROVENANCE_COLUMNS = ["name", "data"]
RAW_COLUMNS = ["key", "path", "record"]
#: table -> its columns after run_id, in order
TABLES = {
    "measurements": MEASUREMENT_COLUMNS,
    "summary": SUMMARY_COLUMNS,
    "verdicts": VERDICT_COLUMNS,
    "provenance": PROVENANCE_COLUMNS,
    "raw": RAW_COLUMNS,
}

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS runs (
  run_id TEXT PRIMARY KEY, machine TEXT NOT NULL, study TEXT NOT NULL, scale TEXT,
  git_commit TEXT, config_hash TEXT, tool_versions TEXT, started TEXT, finished TEXT,
  executor TEXT, noise_threshold REAL, records INTEGER, recorded_at TEXT);
CREATE INDEX IF NOT EXISTS runs_machine ON runs (machine, study, started);
CREATE TABLE IF NOT EXISTS measurements (run_id TEXT NOT NULL, {", ".join(MEASUREMENT_COLUMNS)});
CREATE INDEX IF NOT EXISTS measurements_run ON measurements (run_id);
CREATE TABLE IF NOT EXISTS summary (run_id TEXT NOT NULL, {", ".join(SUMMARY_COLUMNS)});
CREATE INDEX IF NOT EXISTS summary_run ON summary (run_id);
CREATE TABLE IF NOT EXISTS verdicts (run_id TEXT NOT NULL, {", ".join(VERDICT_COLUMNS)});
CREATE INDEX IF NOT EXISTS verdicts_run ON verdicts (run_id);
CREATE TABLE IF NOT EXISTS provenance (run_id TEXT NOT NULL, name TEXT, data TEXT);
CREATE INDEX IF NOT EXISTS provenance_run ON provenance (run_id);
CREATE TABLE IF NOT EXISTS raw (run_id TEXT NOT NULL, key TEXT, path TEXT, record BLOB);
CREATE INDEX IF NOT EXISTS raw_run ON raw (run_id);
CREATE INDEX IF NOT EXISTS raw_key ON raw (key);
"""


class ResultsError(Exception):
    """A problem the user must fix, said in one line (the CLI exits 2)."""


# --- values: one spelling whether they come from JSON, a DataFrame or a CSV ---------


def canon(value):
    """The database spelling of a cell: None for missing, numbers as numbers.

    A CSV read back turns "" into NaN, "42" into 42 and 4096.0 into 4096; the
    same value from a raw record or a DataFrame must be stored the same way,
    so appends (from the CSVs) and rebuilds (from the records) agree.
    """
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, float):
        if math.isnan(value):
            return None
        return int(value) if value.is_integer() and abs(value) < 2**53 else value
    if isinstance(value, int):
        return value
    text = str(value)
    if text in ("", "nan", "NaN"):
        return None
    if text in ("True", "False"):
        return text == "True"
    try:
        return canon(float(text))
    except ValueError:
        return text


def _json(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def frame_rows(frame: pd.DataFrame, columns: list[str]) -> list[tuple]:
    """Rows of results.csv or summary.csv as database rows; parameters go into one JSON cell."""
    skip = set(LEADING_COLUMNS) | set(TRAILING_COLUMNS) | set(SUMMARY_COLUMNS) | {"study"}
    params = [c for c in frame.columns if c not in skip]
    rows = []
    for record in frame.to_dict("records"):
        cells = {key: canon(record.get(key)) for key in columns if key != "params"}
        values = {key: canon(record[key]) for key in params}
        cells["params"] = _json({k: v for k, v in values.items() if v is not None})
        rows.append(tuple(cells[key] for key in columns))
    return rows


def read_csv(path: str | Path) -> pd.DataFrame:
    """A study's CSV with floats exactly as written (the rebuild must give the same numbers)."""
    try:
        return pd.read_csv(path)  # pandas 3 parses floats exactly (round trip) by default
    except (OSError, ValueError) as error:
        raise ResultsError(f"cannot read {path}: {error}") from None


def read_json(path: str | Path):
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError) as error:
        raise ResultsError(f"cannot read {path}: {error}") from None


# --- what a run is -----------------------------------------------------------------


def record_key(record: dict) -> str:
    """A raw record's identity: when it started and what it measured."""
    return hashlib.sha256(
        _json({"started_at": record.get("started_at"), "spec": record.get("spec")}).encode()
    ).hexdigest()[:20]


def run_id_of(machine: str, study: str, keys: list[str]) -> str:
    """Deterministic: the same records of the same machine and study give the same id."""
    text = "\0".join([machine, study, *sorted(keys)])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def config_hash(records: list[dict]) -> str:
    """Hash of the points as configured (each spec without repetition and phase)."""
    specs = {
        _json({k: v for k, v in r["spec"].items() if k not in ("repetition", "phase")})
        for r in records
    }
    return hashlib.sha256("\n".join(sorted(specs)).encode()).hexdigest()[:16]


def raw_path(spec: dict) -> str:
    """Where a record lives under its study folder, whatever path it was read from."""
    return "raw/{workload}/{experiment}/{tier}/{point}/rep{repetition}.json".format(**spec)


def git_commit() -> str | None:
    """The checkout's commit, with ``-dirty`` when tracked files differ from it."""
    try:
        head = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        if head.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def _finished(record: dict) -> str:
    started = pd.Timestamp(record["started_at"])
    return (started + pd.Timedelta(seconds=float(record.get("duration_s") or 0))).isoformat()


def _executor(executor: str | None, records: list[dict]) -> str:
    """'slurm' or 'local': what the pipeline said, else whether the jobs had Slurm job ids."""
    if executor:
        return "slurm" if executor.startswith("slurm") else "local"
    ids = [r.get("context", {}).get("host", {}).get("slurm_job_id") for r in records]
    return "slurm" if any(ids) else "local"


def verdict_rows(verdict_doc: dict | None) -> list[tuple]:
    """verdict.json as rows; keys beyond lesson/status/text (intervals...) are kept in `data`."""
    if not verdict_doc:
        return []
    document = verdict_doc.get("document")
    rows = []
    for position, verdict in enumerate(verdict_doc.get("verdicts", [])):
        low, high = verdict.get("low"), verdict.get("high")
        rows.append(
            (
                document,
                position,
                verdict.get("lesson"),
                verdict.get("status"),
                verdict.get("text"),
                canon(low) if isinstance(low, (int, float)) else None,
                canon(high) if isinstance(high, (int, float)) else None,
                _json(verdict),
            )
        )
    return rows


def build_run(
    machine: str,
    study: str,
    records: list[dict],
    results: pd.DataFrame,
    summary: pd.DataFrame,
    tiers: dict | None,
    nodes: list | None,
    verdict: dict | None,
    *,
    scale: str | None = None,
    executor: str | None = None,
    commit: str | None = None,
    noise_threshold: float | None = None,
    recorded_at: str | None = None,
) -> dict:
    """Everything the database holds of one run, as table -> rows (the export's shape too)."""
    if not records:
        raise ResultsError(f"study {study} of machine {machine}: no raw records to record")
    keys = [record_key(r) for r in records]
    run_id = run_id_of(machine, study, keys)
    tiers = tiers or {}
    run = {
        "run_id": run_id,
        "machine": machine,
        "study": study,
        "scale": scale,
        "git_commit": commit,
        "config_hash": config_hash(records),
        "tool_versions": _json(tiers.get("tools", {})),
        "started": min(r["started_at"] for r in records),
        "finished": max(_finished(r) for r in records),
        "executor": _executor(executor, records),
        "noise_threshold": noise_threshold,
        "records": len(records),
        "recorded_at": recorded_at or utc_now(),
    }
    raw = sorted((key, raw_path(r["spec"]), _json(r)) for key, r in zip(keys, records, strict=True))
    return {
        "run": run,
        "measurements": frame_rows(results, MEASUREMENT_COLUMNS),
        "summary": frame_rows(summary, SUMMARY_COLUMNS),
        "verdicts": verdict_rows(verdict),
        "provenance": [("tiers", _json(tiers)), ("nodes", _json(nodes or []))],
        "raw": raw,
    }


# --- the database ------------------------------------------------------------------


def default_db() -> str:
    """The CLI's database: TIERBENCH_DB, else `database:` of config/config.yaml, else default."""
    if os.environ.get("TIERBENCH_DB"):
        return os.environ["TIERBENCH_DB"]
    try:
        config = yaml.safe_load((REPO / "config" / "config.yaml").read_text()) or {}
    except (OSError, yaml.YAMLError):
        config = {}
    return str(config.get("database") or DEFAULT_DB)


def file_system(path: str | Path) -> str:
    """The type of the file system under the database; refuses one that cannot hold it."""
    fs_type = sharedfs.fs_type_of(path)
    if sharedfs.kind_of(fs_type) == sharedfs.UNTRUSTED:
        raise ResultsError(
            f"{path} is on {fs_type}, which cannot hold a SQLite database safely: {WHERE_INSTEAD}"
        )
    return fs_type


@contextmanager
def one_writer(path: str | Path):
    """One writer at a time across hosts on a network file system; nothing on a local one.

    Yields the file system's type. SQLite failing there is said in one line
    with where to put the database instead.
    """
    fs_type = file_system(path)
    if sharedfs.kind_of(fs_type) == sharedfs.LOCAL:
        yield fs_type
        return
    try:
        with locks.exclusive(f"{path}.lock", across_hosts=True):
            yield fs_type
    except locks.LockError as error:
        raise ResultsError(str(error)) from None
    except sqlite3.DatabaseError as error:
        raise ResultsError(
            f"{path} on {fs_type}: SQLite failed ({error}); {WHERE_INSTEAD}"
        ) from None


def connect(path: str | Path) -> sqlite3.Connection:
    """Open (creating if needed) the database, waiting for other writers.

    WAL on a local file system; a rollback journal, set under the cross-host
    lock, on a network one.
    """
    path = Path(path)
    with one_writer(path) as fs_type:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            if sharedfs.journal_mode(fs_type) == "wal":
                _use_wal(conn, path)
            else:
                _use_rollback_journal(conn, path)
            _create_schema(conn, path)
        except BaseException:
            conn.close()
            raise
    return conn


def _use_wal(conn: sqlite3.Connection, path: Path) -> None:
    for attempt in range(50):  # switching to WAL needs a moment alone with the file
        try:
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            break
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or attempt == 49:
                raise
            time.sleep(0.05 * (attempt + 1))
    if mode.lower() != "wal":
        raise ResultsError(f"{path}: the file system refused SQLite's WAL journal ({mode})")
    conn.execute("PRAGMA synchronous = NORMAL")


def _use_rollback_journal(conn: sqlite3.Connection, path: Path) -> None:
    """DELETE journal, synced at every commit: no shared memory between hosts needed."""
    mode = conn.execute("PRAGMA journal_mode = DELETE").fetchone()[0]
    if mode.lower() != "delete":
        raise ResultsError(f"{path}: SQLite kept the {mode} journal instead of DELETE")
    conn.execute("PRAGMA synchronous = FULL")


def _create_schema(conn: sqlite3.Connection, path: Path) -> None:
    with transaction(conn):
        for statement in SCHEMA.split(";"):
            if statement.strip():
                conn.execute(statement)
        found = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if found is None:
            conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        elif int(found[0]) != SCHEMA_VERSION:
            raise ResultsError(
                f"{path} has schema version {found[0]}, this tierbench reads {SCHEMA_VERSION}: "
                "rebuild it with `python -m tierbench.resultsdb rebuild`"
            )


@contextmanager
def transaction(conn: sqlite3.Connection):
    """BEGIN IMMEDIATE: take the write lock first, so no reader upgrades into a deadlock."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _delete_runs(conn: sqlite3.Connection, run_ids: list[str]) -> None:
    for table in [*TABLES, "runs"]:
        conn.executemany(f"DELETE FROM {table} WHERE run_id = ?", [(r,) for r in run_ids])


def superseded_runs(conn: sqlite3.Connection, run: dict, keys: list[str]) -> list[str]:
    """Runs this one replaces: itself, and runs of its machine and study sharing a raw record."""
    found = conn.execute(
        "SELECT DISTINCT raw.run_id FROM raw JOIN runs USING (run_id)"
        " WHERE runs.machine = ? AND runs.study = ?"
        " AND raw.key IN (SELECT value FROM json_each(?))",
        (run["machine"], run["study"], json.dumps(keys)),
    ).fetchall()
    return sorted({run["run_id"], *(row[0] for row in found)})


def store(conn: sqlite3.Connection, payload: dict) -> list[str]:
    """Write one run (inside the caller's transaction); returns the run ids it replaced."""
    run = payload["run"]
    keys = [row[0] for row in payload["raw"]]
    replaced = superseded_runs(conn, run, keys)
    _delete_runs(conn, replaced)
    conn.execute(
        f"INSERT INTO runs ({', '.join(RUN_COLUMNS)}) VALUES ({', '.join('?' * len(RUN_COLUMNS))})",
        [run[c] for c in RUN_COLUMNS],
    )
    for table, columns in TABLES.items():
        rows = payload[table]
        if table == "raw":
            rows = [(k, p, zlib.compress(r.encode(), 6)) for k, p, r in rows]
        conn.executemany(
            f"INSERT INTO {table} (run_id, {', '.join(columns)}) VALUES (?{', ?' * len(columns)})",
            [(run["run_id"], *row) for row in rows],
        )
    return [r for r in replaced if r != run["run_id"]]


def write_runs(db: str | Path, payloads: list[dict]) -> list[list[str]]:
    """Store runs in one transaction and read them back; returns the runs each one replaced.

    On a network file system the lock is held from opening the file to the
    read-back, so each writer opens the file only after the last one closed
    it (what NFS's close-to-open consistency promises to make visible).
    """
    with one_writer(db) as fs_type:
        conn = connect(db)
        try:
            with transaction(conn):
                replaced = [store(conn, payload) for payload in payloads]
        finally:
            conn.close()
        check_present(db, fs_type, payloads)
    return replaced


def check_present(db: str | Path, fs_type: str, payloads: list[dict]) -> None:
    """Each run read back on a new connection: a file system that drops commits is caught now."""
    conn = sqlite3.connect(db, timeout=BUSY_TIMEOUT_S)
    try:
        for payload in payloads:
            run_id = payload["run"]["run_id"]
            found, records = conn.execute(
                "SELECT (SELECT count(*) FROM runs WHERE run_id = ?),"
                " (SELECT count(*) FROM raw WHERE run_id = ?)",
                (run_id, run_id),
            ).fetchone()
            if found != 1 or records != len(payload["raw"]):
                raise ResultsError(
                    f"{db} on {fs_type or 'an unknown file system'} lost run {run_id} right "
                    f"after its commit (read back {records} of {len(payload['raw'])} records): "
                    f"{WHERE_INSTEAD}"
                )
    finally:
        conn.close()


def load_run(conn: sqlite3.Connection, run_id: str) -> dict:
    """One run back out of the database, in the shape build_run makes (for export)."""
    row = conn.execute(
        f"SELECT {', '.join(RUN_COLUMNS)} FROM runs WHERE run_id = ?", (run_id,)
    ).fetchone()
    if row is None:
        raise ResultsError(f"no run {run_id} in the database")
    payload = {"run": dict(zip(RUN_COLUMNS, row, strict=True))}
    for table, columns in TABLES.items():
        rows = conn.execute(
            f"SELECT {', '.join(columns)} FROM {table} WHERE run_id = ? ORDER BY rowid", (run_id,)
        ).fetchall()
        if table == "raw":
            rows = [(k, p, zlib.decompress(r).decode()) for k, p, r in rows]
        payload[table] = [tuple(r) for r in rows]
    return payload


def runs(conn: sqlite3.Connection, machine: str | None = None) -> list[dict]:
    where, args = ("WHERE machine = ?", (machine,)) if machine else ("", ())
    rows = conn.execute(
        f"SELECT {', '.join(RUN_COLUMNS)} FROM runs {where} ORDER BY machine, study, started",
        args,
    ).fetchall()
    return [dict(zip(RUN_COLUMNS, r, strict=True)) for r in rows]


def _run_rows(conn: sqlite3.Connection, where: str = "", args: tuple = ()) -> list[dict]:
    cursor = conn.execute(f"SELECT * FROM runs {where} ORDER BY started", args)
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def named_runs(conn: sqlite3.Connection, selector: str) -> tuple[list[dict], bool]:
    """The runs a command line names, oldest first, and whether it named a machine: every
    run of that machine, or the one run whose id starts with ``selector`` (4 characters at
    least); a ResultsError that lists the machines otherwise."""
    machine_runs = _run_rows(conn, "WHERE machine = ?", (selector,))
    if machine_runs:
        return machine_runs, True
    found = _run_rows(conn, "WHERE run_id LIKE ?", (selector + "%",)) if selector else []
    if len(found) != 1 or len(selector) < 4:
        everything = _run_rows(conn)
        machines = ", ".join(sorted({r["machine"] for r in everything})) or "none"
        what = "is ambiguous" if len(found) > 1 else "is neither a machine nor a run"
        raise ResultsError(
            f"{selector!r} {what} in the results database (machines: {machines}; "
            "runs: ./tierbench list)"
        )
    return found, False


# --- append: the pipeline's record_run ---------------------------------------------


def load_raw(paths: list[str]) -> list[dict]:
    return [read_json(p) for p in paths]


def append(
    db: str | Path,
    machine: str,
    study: str,
    raw: list[str],
    results: str | Path,
    summary: str | Path,
    provenance: str | Path | None,
    nodes: str | Path | None = None,
    verdict: str | Path | None = None,
    **meta,
) -> dict:
    """Record one finished study run; returns its run table row."""
    records = load_raw(raw)
    payload = build_run(
        machine,
        study,
        records,
        read_csv(results),
        read_csv(summary),
        read_json(provenance) if provenance else None,
        read_json(nodes) if nodes else aggregate.node_provenance(raw),
        read_json(verdict) if verdict else None,
        **meta,
    )
    (replaced,) = write_runs(db, [payload])
    return {**payload["run"], "replaced": replaced}


# --- rebuild from the raw records on disk ------------------------------------------


def study_dirs(results_dir: Path) -> list[Path]:
    """results/<machine>/<study>/ folders that hold raw records."""
    return sorted(p.parent for p in results_dir.glob("*/*/raw") if p.is_dir())


def rebuild_payload(study_dir: Path, default_noise: float = 0.25) -> dict:
    """A run from its raw records, re-aggregated; run.json (if any) gives scale and commit."""
    paths = sorted(str(p) for p in (study_dir / "raw").rglob("rep*.json"))
    records = load_raw(paths)
    meta = read_json(study_dir / "run.json") if (study_dir / "run.json").is_file() else {}
    noise = meta.get("noise_threshold")
    noise = default_noise if noise is None else noise
    frame = aggregate.load_records(paths)
    tiers_path = study_dir / "provenance" / "tiers.json"
    verdict_path = study_dir / "verdict.json"
    return build_run(
        study_dir.parent.name,
        study_dir.name,
        records,
        frame,
        aggregate.summarise(frame, noise),
        read_json(tiers_path) if tiers_path.is_file() else None,
        aggregate.node_provenance(paths),
        read_json(verdict_path) if verdict_path.is_file() else None,
        scale=meta.get("scale"),
        executor=meta.get("executor"),
        commit=meta.get("git_commit"),
        noise_threshold=meta.get("noise_threshold"),
        recorded_at=meta.get("recorded_at"),
    )


def _remove_journal(db: Path) -> None:
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)


def rebuild(results_dir: Path, db: Path, keep_others: bool = True) -> tuple[int, int]:
    """A new database from the raw records under results_dir; returns (rebuilt, carried over).

    Runs of the old database whose records are no longer on disk (older runs,
    imported runs) are carried over unless keep_others is False. Do not run it
    while a study is being recorded: the file is replaced at the end.
    """
    payloads = [rebuild_payload(d) for d in study_dirs(results_dir)]
    carried = []
    if keep_others and db.is_file():
        try:
            old = connect(db)
            try:
                new_ids = {p["run"]["run_id"] for p in payloads}
                carried = [load_run(old, r["run_id"]) for r in runs(old)]
                carried = [p for p in carried if p["run"]["run_id"] not in new_ids]
            finally:
                old.close()
        except (sqlite3.DatabaseError, ResultsError) as error:
            print(f"old database not read ({error}); rebuilding from disk only", file=sys.stderr)
            carried = []
    tmp = db.with_name(f"{db.name}.rebuild-{os.getpid()}")
    _remove_journal(tmp)
    tmp.unlink(missing_ok=True)
    conn = connect(tmp)
    try:
        with transaction(conn):
            for payload in carried + payloads:  # what is on disk wins
                store(conn, payload)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    _remove_journal(tmp)
    with one_writer(db) as fs_type:
        _remove_journal(db)
        os.replace(tmp, db)
        check_present(db, fs_type, carried + payloads)
    return len(payloads), len(carried)
