"""The results database: appends, re-runs, rebuild, export/import, network file systems."""

from __future__ import annotations

import gzip
import json
import multiprocessing
import sqlite3
import time
from pathlib import Path

import pytest
import yaml
from tierbench import aggregate, locks, matrix, resultsdb, resultsdb_cli, sharedfs
from tierbench.errors import ConfigError
from tierbench.records import FAILED, metric, no_value

HOST = {
    "host": "node1",
    "kernel": "6.1.0",
    "os": "Debian 12",
    "cpu_model": "Test CPU",
    "cores": 8,
    "memory_bytes": 16 * 2**30,
    "slurm_job_id": None,
}


def fio_point(tier, tier_class, block, values, unit="MB/s", name="write_bandwidth"):
    """One point of a synthetic fio sweep: its spec fields and one value per repetition."""
    return {
        "experiment": "seq",
        "workload": "fio",
        "tier": tier,
        "tier_class": tier_class,
        "point": f"block_size={block}",
        "params": {"block_size": block, "size": "1M", "direct": True},
        "metrics": {name: (unit, values)},
    }


def write_record(study_dir, study, point, rep, metrics, started, host=HOST):
    spec = {
        "study": study,
        "experiment": point["experiment"],
        "workload": point["workload"],
        "tier": point["tier"],
        "tier_path": f"/scratch/{point['tier']}",
        "tier_class": point["tier_class"],
        "max_bytes": None,
        "point": point["point"],
        "params": point["params"],
        "repetition": rep,
        "phase": "warmup" if rep == 0 else "measured",
        "description": "",
    }
    record = {
        "spec": spec,
        "context": {"host": host, "tier": {"fs_type": "tmpfs", "source": "tmpfs"}},
        "started_at": started,
        "duration_s": 1.5,
        "metrics": metrics,
        "extra": {},
    }
    path = study_dir / resultsdb.raw_path(spec)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1, sort_keys=True))
    return str(path)


def write_study(results, machine, study, points, day=1, verdict=None, failed_point=False):
    """results/<machine>/<study>/ as the pipeline leaves it: raw records, CSVs, provenance."""
    study_dir = Path(results) / machine / study
    paths, second = [], 0
    for point in points:
        reps = len(next(iter(point["metrics"].values()))[1])
        for rep in range(reps + 1):  # repetition 0 is the warm-up
            index = max(rep - 1, 0)
            metrics = [metric(n, v[index], u) for n, (u, v) in point["metrics"].items()]
            second += 1
            started = f"2026-01-{day:02d}T00:{second // 60:02d}:{second % 60:02d}+00:00"
            paths.append(write_record(study_dir, study, point, rep, metrics, started))
    if failed_point:
        bad = fio_point("disk", "disk", "1g", [0.0])
        paths.append(
            write_record(
                study_dir, study, bad, 1, [no_value(FAILED, "No space left")], f"2026-01-{day:02d}"
            )
        )
    provenance = study_dir / "provenance"
    provenance.mkdir(parents=True, exist_ok=True)
    tiers = {
        "host": HOST,
        "tools": {"fio": "fio-3.33", "python": "3.11.2"},
        "tiers": {"shm": {"path": "/dev/shm", "class": "shm", "fs_type": "tmpfs"}},
    }
    (provenance / "tiers.json").write_text(json.dumps(tiers))
    assert (
        aggregate.main(
            [
                "--results",
                str(study_dir / "results.csv"),
                "--summary",
                str(study_dir / "summary.csv"),
                "--nodes",
                str(provenance / "nodes.json"),
                *paths,
            ]
        )
        == 0
    )
    if verdict is not None:
        (study_dir / "verdict.json").write_text(json.dumps(verdict))
    return study_dir, paths


def append_study(db, study_dir, paths, **meta):
    verdict = study_dir / "verdict.json"
    return resultsdb.append(
        db,
        study_dir.parent.name,
        study_dir.name,
        paths,
        study_dir / "results.csv",
        study_dir / "summary.csv",
        study_dir / "provenance" / "tiers.json",
        nodes=study_dir / "provenance" / "nodes.json",
        verdict=verdict if verdict.exists() else None,
        **{"scale": "smoke", "executor": "local", "noise_threshold": 0.25, **meta},
    )


def sweep(factor=1.0, blocks=("4k", "64k", "1m")):
    return [
        fio_point(tier, cls, block, [factor * v for v in (100.0, 101.0, 99.5)])
        for tier, cls in (("shm", "shm"), ("disk", "disk"))
        for block in blocks
    ]


VERDICT = {
    "document": "000",
    "verdicts": [
        {
            "lesson": "tmpfs helps a little",
            "status": "reproduced",
            "text": "1.2x",
            "low": 1.1,
            "high": 1.3,
            "comparisons": [{"label": "r", "published": 1.2, "ours": 1.2, "unit": "x"}],
        },
    ],
}


def table(db, name):
    """Every row of a table (run ids and all), sorted, for comparing two databases."""
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute(f"SELECT * FROM {name}").fetchall()
    finally:
        conn.close()
    if name == "raw":
        rows = [(r[0], r[1], r[2], resultsdb.zlib.decompress(r[3])) for r in rows]
    if name == "runs":  # when it was recorded is the one thing a rebuild cannot know
        rows = [r[:-1] for r in rows]
    return sorted(rows, key=repr)


ALL_TABLES = ["runs", "measurements", "summary", "verdicts", "provenance", "raw"]


def test_append_records_every_table(tmp_path):
    study_dir, paths = write_study(tmp_path / "results", "ws", "default", sweep(), verdict=VERDICT)
    db = tmp_path / "results" / "tierbench.sqlite"
    run = append_study(db, study_dir, paths, scale="default")
    assert run["machine"] == "ws" and run["records"] == len(paths) == 24
    assert run["started"] == "2026-01-01T00:00:01+00:00"
    assert json.loads(run["tool_versions"])["fio"] == "fio-3.33"
    # 6 points x 4 runs (warm-up included) x 1 metric
    assert len(table(db, "measurements")) == 24
    assert len(table(db, "summary")) == 6
    verdict = table(db, "verdicts")[0]
    assert verdict[2:8] == (0, "tmpfs helps a little", "reproduced", "1.2x", 1.1, 1.3)
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    params = conn.execute("SELECT DISTINCT params FROM summary").fetchall()
    assert json.loads(params[0][0])["direct"] is True


def test_reappend_replaces_the_run(tmp_path):
    study_dir, paths = write_study(tmp_path / "r", "ws", "default", sweep())
    db = tmp_path / "db.sqlite"
    first = append_study(db, study_dir, paths)
    second = append_study(db, study_dir, paths)
    assert first["run_id"] == second["run_id"] and second["replaced"] == []
    assert len(table(db, "runs")) == 1 and len(table(db, "measurements")) == 24


def test_rerun_job_supersedes_the_run_it_shares_records_with(tmp_path):
    """A job re-run changes one record: the run id changes and the old run goes."""
    study_dir, paths = write_study(tmp_path / "r", "ws", "default", sweep())
    db = tmp_path / "db.sqlite"
    old = append_study(db, study_dir, paths)
    record = json.loads(Path(paths[1]).read_text())
    record["started_at"] = "2026-02-01T00:00:00+00:00"
    Path(paths[1]).write_text(json.dumps(record))
    new = append_study(db, study_dir, paths)
    assert new["run_id"] != old["run_id"] and new["replaced"] == [old["run_id"]]
    assert [r[0] for r in table(db, "runs")] == [new["run_id"]]
    assert len(table(db, "measurements")) == 24


def test_another_machine_or_date_is_another_run(tmp_path):
    db = tmp_path / "db.sqlite"
    for machine, day in (("ws", 1), ("ws", 2), ("laptop", 1)):
        study_dir, paths = write_study(tmp_path / f"r{day}", machine, "default", sweep(), day=day)
        append_study(db, study_dir, paths)
    assert len(table(db, "runs")) == 3


def _append_worker(db, jobs, barrier):
    barrier.wait()
    for study_dir, paths in jobs:
        append_study(db, Path(study_dir), paths)


def test_concurrent_appends_lose_nothing(tmp_path):
    """Three processes append four runs each at the same moment: all twelve land."""
    db = tmp_path / "results" / "tierbench.sqlite"
    workers = 3
    jobs = [
        [
            write_study(tmp_path / "results", f"m{w}", f"study{i}", sweep(blocks=("4k", "1m")))
            for i in range(4)
        ]
        for w in range(workers)
    ]
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(workers)
    processes = [
        context.Process(target=_append_worker, args=(db, jobs[w], barrier)) for w in range(workers)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(120)
    assert [p.exitcode for p in processes] == [0] * workers
    assert len(table(db, "runs")) == 12
    assert len(table(db, "measurements")) == 12 * 4 * 4
    assert len(table(db, "raw")) == 12 * 16


def test_rebuild_gives_the_rows_the_appends_gave(tmp_path):
    results = tmp_path / "results"
    db = results / "tierbench.sqlite"
    for machine, study, verdict in (
        ("ws", "default", None),
        ("ws", "fe_tmpfs", VERDICT),
        ("laptop", "default", None),
    ):
        study_dir, paths = write_study(
            results, machine, study, sweep(), verdict=verdict, failed_point=True
        )
        run = append_study(db, study_dir, paths)
        (study_dir / "run.json").write_text(json.dumps(run))
    appended = {name: table(db, name) for name in ALL_TABLES}
    rebuilt_db = tmp_path / "rebuilt.sqlite"
    assert (
        resultsdb_cli.main(["rebuild", "--results-dir", str(results), "--db", str(rebuilt_db)]) == 0
    )
    for name in ALL_TABLES:
        assert table(rebuilt_db, name) == appended[name], name
    failed = [r for r in appended["summary"] if r[10] == "failed"]
    assert len(failed) == 3 and failed[0][11] == "No space left"


def test_rebuild_keeps_runs_no_longer_on_disk(tmp_path):
    results, db = tmp_path / "results", tmp_path / "results" / "tierbench.sqlite"
    elsewhere, paths = write_study(tmp_path / "elsewhere", "cluster", "default", sweep())
    append_study(db, elsewhere, paths)
    study_dir, paths = write_study(results, "ws", "default", sweep())
    append_study(db, study_dir, paths)
    assert resultsdb.rebuild(results, db) == (1, 1)
    assert sorted(r[1] for r in table(db, "runs")) == ["cluster", "ws"]
    assert resultsdb.rebuild(results, db, keep_others=False) == (1, 0)
    assert [r[1] for r in table(db, "runs")] == ["ws"]


def test_export_import_round_trip_loses_nothing(tmp_path):
    db = tmp_path / "cluster.sqlite"
    for study, verdict in (("default", None), ("fe_tmpfs", VERDICT)):
        study_dir, paths = write_study(tmp_path / "r", "cluster", study, sweep(), verdict=verdict)
        append_study(db, study_dir, paths)
    other, paths = write_study(tmp_path / "r", "laptop", "default", sweep(0.5))
    append_study(db, other, paths)
    export = tmp_path / "cluster.tierbench.json.gz"
    args = ["export", "--db", str(db), "--machine", "cluster", "--out", str(export)]
    assert resultsdb_cli.main(args) == 0
    laptop_db = tmp_path / "laptop.sqlite"
    assert resultsdb_cli.main(["import", "--db", str(laptop_db), str(export)]) == 0
    assert resultsdb_cli.main(["import", "--db", str(laptop_db), str(export)]) == 0  # idempotent
    conn = sqlite3.connect(db)
    cluster_runs = {r[0] for r in conn.execute("SELECT run_id FROM runs WHERE machine='cluster'")}
    for name in ALL_TABLES:
        original = [r for r in table(db, name) if r[0] in cluster_runs]
        assert table(laptop_db, name) == original, name
    full = sqlite3.connect(db).execute("SELECT * FROM runs").fetchall()
    imported = sqlite3.connect(laptop_db).execute("SELECT * FROM runs").fetchall()
    assert sorted(imported) == sorted(r for r in full if r[0] in cluster_runs)  # recorded_at too


def test_export_of_one_run_and_of_an_unknown_machine(tmp_path, capsys):
    db = tmp_path / "db.sqlite"
    study_dir, paths = write_study(tmp_path / "r", "ws", "default", sweep())
    run = append_study(db, study_dir, paths)
    out = tmp_path / "one.gz"
    args = ["export", "--db", str(db), "--machine", "ws", "--run", run["run_id"][:8]]
    assert resultsdb_cli.main([*args, "--out", str(out)]) == 0
    assert len(json.loads(gzip.decompress(out.read_bytes()))["runs"]) == 1
    missing = tmp_path / "none.gz"
    args = ["export", "--db", str(db), "--machine", "nope", "--out", str(missing)]
    assert resultsdb_cli.main(args) == 2
    assert "no runs of machine 'nope'" in capsys.readouterr().err and not missing.exists()


def _bad_exports(tmp_path, good: Path) -> dict[str, Path]:
    data = good.read_bytes()
    body = json.loads(gzip.decompress(data))
    files = {
        "truncated": data[: len(data) // 2],
        "corrupt": data[:20] + bytes(b ^ 0xFF for b in data[20:60]) + data[60:],
        "not gzip": b"hello, this is text",
        "foreign": gzip.compress(json.dumps({"format": "something-else"}).encode()),
        "newer": gzip.compress(json.dumps({**body, "version": 99}).encode()),
        "malformed": gzip.compress(
            json.dumps({**body, "runs": [{**body["runs"][0], "summary": {"rows": 1}}]}).encode()
        ),
    }
    tampered = json.loads(json.dumps(body))
    tampered["runs"][0]["raw"]["rows"].pop()
    files["tampered"] = gzip.compress(json.dumps(tampered).encode())
    paths = {}
    for name, content in files.items():
        paths[name] = tmp_path / f"{name.replace(' ', '_')}.gz"
        paths[name].write_bytes(content)
    return paths


def test_import_refuses_bad_files_and_writes_nothing(tmp_path, capsys):
    db = tmp_path / "db.sqlite"
    study_dir, paths = write_study(tmp_path / "r", "ws", "default", sweep())
    append_study(db, study_dir, paths)
    good = tmp_path / "good.gz"
    resultsdb_cli.main(["export", "--db", str(db), "--machine", "ws", "--out", str(good)])
    target = tmp_path / "target.sqlite"
    capsys.readouterr()
    for name, path in _bad_exports(tmp_path, good).items():
        assert resultsdb_cli.main(["import", "--db", str(target), str(path)]) == 2, name
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and str(path) in err, (name, err)
        assert not target.exists(), name
    # into an existing database: still nothing written
    append_study(target, study_dir, paths)
    before = {name: table(target, name) for name in ALL_TABLES}
    for path in _bad_exports(tmp_path, good).values():
        assert resultsdb_cli.main(["import", "--db", str(target), str(path)]) == 2
    assert {name: table(target, name) for name in ALL_TABLES} == before


def test_cli_append_writes_run_json_and_list_shows_it(tmp_path, capsys):
    study_dir, paths = write_study(tmp_path / "results", "ws", "default", sweep())
    db = tmp_path / "results" / "tierbench.sqlite"
    args = [
        "append", "--db", str(db), "--machine", "ws", "--study", "default", "--scale", "smoke",
        "--executor", "slurm-jobstep", "--results", str(study_dir / "results.csv"),
        "--summary", str(study_dir / "summary.csv"),
        "--provenance", str(study_dir / "provenance" / "tiers.json"),
        "--out", str(study_dir / "run.json"), *paths,
    ]  # fmt: skip
    assert resultsdb_cli.main(args) == 0
    run = json.loads((study_dir / "run.json").read_text())
    assert run["executor"] == "slurm" and run["scale"] == "smoke" and run["records"] == 24
    capsys.readouterr()
    assert resultsdb_cli.main(["list", "--db", str(db)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and lines[0].startswith(run["run_id"]) and "ws" in lines[0]


def test_list_without_a_database_says_so(tmp_path, capsys):
    assert resultsdb_cli.main(["list", "--db", str(tmp_path / "none.sqlite")]) == 2
    assert "no results database" in capsys.readouterr().err


@pytest.mark.parametrize(
    "value, expected",
    [("", None), (float("nan"), None), ("42", 42), (4096.0, 4096), ("4k", "4k"),
     ("True", True), (True, True), (0.5, 0.5)],
)  # fmt: skip
def test_canon_spells_csv_and_json_values_alike(value, expected):
    assert resultsdb.canon(value) == expected
    assert type(resultsdb.canon(value)) is type(expected)


# --- on a network file system ------------------------------------------------------


@pytest.fixture
def on_fs(monkeypatch):
    """Put every database on a file system of the given type (the seam: sharedfs.fs_type_of)."""

    def put(fs_type):
        monkeypatch.setattr(sharedfs, "fs_type_of", lambda path, table=None: fs_type)

    return put


def journal(db):
    conn = sqlite3.connect(db)
    try:
        return conn.execute("PRAGMA journal_mode").fetchone()[0]
    finally:
        conn.close()


def test_a_local_database_keeps_wal(tmp_path, on_fs):
    on_fs("ext4")
    study_dir, paths = write_study(tmp_path / "r", "ws", "default", sweep())
    append_study(tmp_path / "db.sqlite", study_dir, paths)
    assert journal(tmp_path / "db.sqlite") == "wal"
    assert not (tmp_path / "db.sqlite.lock").exists()


@pytest.mark.parametrize("fs_type", ["nfs4", "lustre", "fuse.glusterfs", "cifs"])
def test_a_network_database_gets_a_rollback_journal_and_no_lock_left(tmp_path, on_fs, fs_type):
    on_fs(fs_type)
    study_dir, paths = write_study(tmp_path / "r", "ws", "default", sweep())
    run = append_study(tmp_path / "db.sqlite", study_dir, paths)
    assert journal(tmp_path / "db.sqlite") == "delete"
    assert [r[0] for r in table(tmp_path / "db.sqlite", "runs")] == [run["run_id"]]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["db.sqlite", "r"]  # no -wal, no lock


def test_a_wal_database_moved_to_a_network_file_system_leaves_wal(tmp_path, on_fs):
    study_dir, paths = write_study(tmp_path / "r", "ws", "default", sweep())
    db = tmp_path / "db.sqlite"
    append_study(db, study_dir, paths)
    assert journal(db) == "wal"
    on_fs("nfs")
    study_dir, paths = write_study(tmp_path / "r2", "laptop", "default", sweep())
    append_study(db, study_dir, paths)
    assert journal(db) == "delete" and len(table(db, "runs")) == 2


def test_concurrent_appends_on_a_network_file_system_lose_nothing(tmp_path, on_fs):
    on_fs("fuse.glusterfs")
    test_concurrent_appends_lose_nothing(tmp_path)  # forked workers inherit the fake
    assert journal(tmp_path / "results" / "tierbench.sqlite") == "delete"


def _cli_append(tmp_path, db):
    study_dir, paths = write_study(tmp_path / "results", "ws", "default", sweep())
    return [
        "append", "--db", str(db), "--machine", "ws", "--study", "default",
        "--results", str(study_dir / "results.csv"), "--summary", str(study_dir / "summary.csv"),
        "--provenance", str(study_dir / "provenance" / "tiers.json"),
        "--out", str(study_dir / "run.json"), *paths,
    ]  # fmt: skip


def test_an_untrusted_file_system_is_refused_in_one_line(tmp_path, on_fs, capsys):
    on_fs("fuse.s3fs")
    db = tmp_path / "bucket" / "tierbench.sqlite"
    args = _cli_append(tmp_path, db)
    capsys.readouterr()
    assert resultsdb_cli.main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "fuse.s3fs" in err and "`database:` in config/config.yaml" in err and "local disk" in err
    assert not db.exists() and not db.parent.exists()


def test_a_commit_the_file_system_drops_is_an_error_not_a_silent_loss(
    tmp_path, on_fs, monkeypatch, capsys
):
    on_fs("fuse.glusterfs")
    monkeypatch.setattr(resultsdb, "store", lambda conn, payload: [])  # the write vanishes
    args = _cli_append(tmp_path, tmp_path / "db.sqlite")
    capsys.readouterr()
    assert resultsdb_cli.main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "on fuse.glusterfs lost run" in err and "read back 0 of 24 records" in err
    assert "`database:` in config/config.yaml" in err
    assert not (tmp_path / "db.sqlite.lock").exists()  # the lock went with the error


def test_a_lock_held_too_long_fails_the_append_with_who_holds_it(
    tmp_path, on_fs, monkeypatch, capsys
):
    on_fs("nfs4")
    monkeypatch.setattr(locks, "LOCK_TIMEOUT_S", 0.3)
    lock = tmp_path / "db.sqlite.lock"
    lock.mkdir()
    owner = {"host": "node2", "pid": 77, "since": time.time(), "token": "t"}
    (lock / locks.OWNER_FILE).write_text(json.dumps(owner))
    args = _cli_append(tmp_path, tmp_path / "db.sqlite")
    capsys.readouterr()
    assert resultsdb_cli.main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "node2 pid 77" in err and f"remove {lock}" in err
    assert not (tmp_path / "db.sqlite").exists()


def test_import_and_rebuild_on_a_network_file_system(tmp_path, on_fs):
    on_fs("lustre")
    results = tmp_path / "results"
    db = results / "tierbench.sqlite"
    study_dir, paths = write_study(results, "ws", "default", sweep())
    (study_dir / "run.json").write_text(json.dumps(append_study(db, study_dir, paths)))
    export = tmp_path / "ws.gz"
    assert (
        resultsdb_cli.main(["export", "--db", str(db), "--machine", "ws", "--out", str(export)])
        == 0
    )
    other = tmp_path / "other.sqlite"
    assert resultsdb_cli.main(["import", "--db", str(other), str(export)]) == 0
    assert table(other, "raw") == table(db, "raw")
    assert resultsdb.rebuild(results, db) == (1, 0)
    assert journal(db) == "delete" and len(table(db, "runs")) == 1
    assert sorted(p.name for p in results.iterdir()) == ["tierbench.sqlite", "ws"]


def test_the_cli_finds_the_configured_database(tmp_path, monkeypatch, capsys):
    study_dir, paths = write_study(tmp_path / "results", "ws", "default", sweep())
    db = tmp_path / "local disk" / "tierbench.sqlite"
    append_study(db, study_dir, paths)
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.yaml").write_text(f"database: {db}\n")
    monkeypatch.setattr(resultsdb, "REPO", tmp_path)
    monkeypatch.delenv("TIERBENCH_DB", raising=False)
    assert resultsdb.default_db() == str(db)
    assert resultsdb_cli.main(["list"]) == 0
    assert "ws" in capsys.readouterr().out
    monkeypatch.setenv("TIERBENCH_DB", str(tmp_path / "elsewhere.sqlite"))
    assert resultsdb_cli.main(["list"]) == 2
    assert "elsewhere.sqlite" in capsys.readouterr().err


def test_the_config_names_the_database():
    config = yaml.safe_load((resultsdb.REPO / "config" / "config.yaml").read_text())
    assert config["database"] == resultsdb.DEFAULT_DB
    matrix.validate_config({**config, "database": "/local/tierbench.sqlite"})
    with pytest.raises(ConfigError, match="database"):
        matrix.validate_config({**config, "database": 3})
