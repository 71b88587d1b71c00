"""The results database on the minicluster's GlusterFS volume, written from two nodes at once.

There, SQLite's WAL lost one node's commits without an error; the database
uses a rollback journal and a lock folder on such a volume (resultsdb,
sharedfs). One writer on each node appends 20 runs at the same moment:
afterwards every run a writer recorded is in the database, and a writer that
stopped said why in one line.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time

import pytest
from conftest import REPO
from minicluster_fixture import require_minicluster, running_minicluster
from test_resultsdb import sweep, write_study

pytestmark = pytest.mark.slurm

RUNS_PER_NODE = 20
#: seconds for srun and the imports, so both writers start appending together
START_DELAY_S = 15
WRITER = """
import json, sys, time
from tierbench import resultsdb
jobs = json.load(open(sys.argv[1]))
while time.time() < jobs["start"]:
    time.sleep(0.01)
recorded = []
for job in jobs["runs"]:
    try:
        run = resultsdb.append(jobs["db"], **job, scale="smoke", executor="slurm")
    except resultsdb.ResultsError as error:
        print(f"tierbench: {error}", file=sys.stderr)
        break
    recorded.append(run["run_id"])
print(json.dumps(recorded))
"""


@pytest.fixture(scope="module")
def cluster():
    require_minicluster()
    yield from running_minicluster()


def write_jobs(folder, node, db, start):
    """A node's studies as the pipeline leaves them, and the file its writer reads."""
    runs = []
    for i in range(RUNS_PER_NODE):
        study_dir, paths = write_study(folder, node, f"study{i}", sweep(blocks=("4k",)))
        runs.append(
            {
                "machine": node,
                "study": study_dir.name,
                "raw": paths,
                "results": str(study_dir / "results.csv"),
                "summary": str(study_dir / "summary.csv"),
                "provenance": str(study_dir / "provenance" / "tiers.json"),
                "nodes": str(study_dir / "provenance" / "nodes.json"),
            }
        )
    jobs = folder / f"{node}.json"
    jobs.write_text(json.dumps({"db": str(db), "start": start, "runs": runs}))
    return jobs


def test_two_nodes_appending_at_once_lose_no_run(cluster, tmp_path):
    db = cluster.shared / f"results-{os.getpid()}" / "tierbench.sqlite"
    start = time.time() + START_DELAY_S
    nodes = cluster.nodes[:2]
    jobs = {node: write_jobs(tmp_path / "studies", node, db, start) for node in nodes}
    env = {**os.environ, **cluster.env, "PYTHONPATH": str(REPO / "workflow")}
    writers = {
        node: subprocess.Popen(
            ["srun", "-w", node, sys.executable, "-c", WRITER, str(jobs[node])],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for node in nodes
    }
    said = {node: writer.communicate(timeout=600) for node, writer in writers.items()}
    recorded = {}
    for node, (out, err) in said.items():
        assert writers[node].returncode == 0, f"{node}: {err}"
        recorded[node] = json.loads(out.strip().splitlines()[-1])
        errors = [line for line in err.splitlines() if line.startswith("tierbench: ")]
        if len(recorded[node]) < RUNS_PER_NODE:  # it stopped: said why, in one line
            assert len(errors) == 1 and "database:" in errors[0], f"{node}: {err}"
    conn = sqlite3.connect(db)
    try:
        present = {row[0] for row in conn.execute("SELECT run_id FROM runs")}
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()
    for node in nodes:
        assert set(recorded[node]) <= present, f"{node}: a recorded run is missing"
    assert len(present) == sum(len(runs) for runs in recorded.values())
    print({node: len(runs) for node, runs in recorded.items()}, "runs recorded")
    assert sorted(p.name for p in db.parent.iterdir()) == ["tierbench.sqlite"]  # no lock left
