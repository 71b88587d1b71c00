"""The results database's command line: append a finished study run (the pipeline's
record_run), rebuild the database from the raw records, list, export and import runs.

    python -m tierbench.resultsdb_cli {append,rebuild,list,export,import} ...
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from pathlib import Path

from .resultsdb import (
    DB_HELP,
    ResultsError,
    append,
    connect,
    default_db,
    git_commit,
    rebuild,
    runs,
)
from .resultsdb_export import export, import_file, read_export


def _summary_line(run: dict) -> str:
    return (
        f"{run['run_id']}  {run['machine']:<16} {run['study']:<16} "
        f"scale={run['scale'] or '-':<8} {run['executor']:<5} {run['records']:>5} records  "
        f"{run['started']} .. {run['finished']}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    database = default_db()
    commands = parser.add_subparsers(dest="command", required=True)
    add = commands.add_parser("append", help="record one finished study run")
    add.add_argument("--db", default=database, help=DB_HELP)
    add.add_argument("--machine", required=True)
    add.add_argument("--study", required=True)
    add.add_argument("--scale")
    add.add_argument("--executor", help="the Snakemake executor (slurm, local, ...)")
    add.add_argument("--noise-threshold", type=float, default=0.25)
    add.add_argument("--results", required=True)
    add.add_argument("--summary", required=True)
    add.add_argument("--verdict")
    add.add_argument("--provenance", required=True, help="provenance/tiers.json")
    add.add_argument("--nodes", help="provenance/nodes.json")
    add.add_argument("--out", required=True, help="<study>/run.json: what was recorded")
    add.add_argument("raw", nargs="+")
    again = commands.add_parser("rebuild", help="a new database from the raw records")
    again.add_argument("--results-dir", default="results")
    again.add_argument(
        "--db", help=f"default: {database} for results/, else <results-dir>/tierbench.sqlite"
    )
    again.add_argument("--fresh", action="store_true", help="drop runs not on disk")
    show = commands.add_parser("list", help="the recorded runs, one line each")
    show.add_argument("--db", default=database, help=DB_HELP)
    show.add_argument("--machine")
    out = commands.add_parser("export", help="a machine's runs in one file")
    out.add_argument("--db", default=database, help=DB_HELP)
    out.add_argument("--machine", required=True)
    out.add_argument("--run", help="only this run id (or a unique prefix)")
    out.add_argument("--out", required=True)
    into = commands.add_parser("import", help="merge an export into the database")
    into.add_argument("--db", default=database, help=DB_HELP)
    into.add_argument("file")
    args = parser.parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except ResultsError as error:
        print(f"tierbench: {error}", file=sys.stderr)
        return 2


def _cmd_append(args) -> int:
    run = append(
        args.db,
        args.machine,
        args.study,
        args.raw,
        args.results,
        args.summary,
        args.provenance,
        nodes=args.nodes,
        verdict=args.verdict,
        scale=args.scale,
        executor=args.executor,
        commit=git_commit(),
        noise_threshold=args.noise_threshold,
    )
    Path(args.out).write_text(json.dumps({**run, "database": str(args.db)}, indent=1) + "\n")
    replaced = f"; replaced {', '.join(run['replaced'])}" if run["replaced"] else ""
    print(f"recorded {_summary_line(run)} in {args.db}{replaced}", file=sys.stderr)
    return 0


def _existing(db: str) -> sqlite3.Connection:
    if not Path(db).is_file():
        raise ResultsError(f"no results database at {db} (a finished study run creates it)")
    return connect(db)


def _cmd_rebuild(args) -> int:
    results_dir = Path(args.results_dir)
    if not results_dir.is_dir():
        raise ResultsError(f"no results folder {results_dir}")
    db = Path(args.db) if args.db else results_dir / "tierbench.sqlite"
    if not args.db and results_dir == Path("results"):  # the configured one
        db = Path(default_db())
    rebuilt, carried = rebuild(results_dir, db, keep_others=not args.fresh)
    print(f"rebuilt {db}: {rebuilt} runs from raw records, {carried} carried over", file=sys.stderr)
    return 0


def _cmd_list(args) -> int:
    conn = _existing(args.db)
    try:
        for run in runs(conn, args.machine):
            print(_summary_line(run))
    finally:
        conn.close()
    return 0


def _cmd_export(args) -> int:
    conn = _existing(args.db)
    try:
        count = export(conn, Path(args.out), args.machine, args.run)
    finally:
        conn.close()
    print(f"exported {count} runs of {args.machine} to {args.out}", file=sys.stderr)
    return 0


def _cmd_import(args) -> int:
    read_export(Path(args.file))  # refuse a bad file before the database is even created
    imported = import_file(args.db, Path(args.file))
    for run in imported:
        print(f"imported {_summary_line(run)}", file=sys.stderr)
    return 0


COMMANDS = {
    "append": _cmd_append,
    "rebuild": _cmd_rebuild,
    "list": _cmd_list,
    "export": _cmd_export,
    "import": _cmd_import,
}


if __name__ == "__main__":
    raise SystemExit(main())
