"""The workload registry: one declaration per workload, and everything follows from it."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import MACHINE, REPO
from tierbench import matrix, pagecache, rundir, schemas, workload_docs
from tierbench.workloads import HOOK_DEFAULTS, Pair, Workload, get, registry

#: a workload a user could add: one module plus its schema, nothing else edited
TOY_MODULE = '''
"""toy: writes one file of `size` bytes to its run folder and reports how long it took."""

import time

from .. import pagecache
from ..records import metric
from . import Tool, Workload


def planned_bytes(params):
    return params["size"]


def page_cache(params, limits):
    return pagecache.buffered_write("toy buffered write", params["size"], limits)


def run(job):
    output = job.folder.path / "toy.bin"
    start = time.perf_counter()
    output.write_bytes(b"x" * job.params["size"])
    elapsed = time.perf_counter() - start
    return [metric("toy_time", elapsed, "s"), metric("toy_bytes", output.stat().st_size, "B")]


WORKLOAD = Workload(
    name="toy",
    summary="writes one small file",
    run=run,
    tools=(Tool("dd"),),
    headline=("toy_time",),
    planned_bytes=planned_bytes,
    page_cache=page_cache,
)
'''
TOY_SCHEMA = """
$schema: "https://json-schema.org/draft/2020-12/schema"
type: object
additionalProperties: false
properties:
  size:
    description: bytes to write
    type: integer
    minimum: 1
    default: 4096
"""
TOY_STUDY = """
study: toystudy
repetitions: 2
warmup: false
experiments:
  - name: small
    workload: toy
    tiers: [shm, disk]
    params: {size: [1024, 2048]}
"""


def toy_declaration(source: str) -> Workload:
    """The toy module's WORKLOAD, imported as the registry would, without adding a file."""
    spec = importlib.util.spec_from_loader("tierbench.workloads.toy", loader=None)
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "tierbench.workloads"
    exec(compile(textwrap.dedent(source), "toy.py", "exec"), module.__dict__)
    return module.WORKLOAD


def test_a_new_workload_brings_its_page_cache_rule_and_without_one_reads_unknown():
    limits = {"ram": 1 << 30, "dirty_limit": 1 << 20}
    toy = toy_declaration(TOY_MODULE)
    small, large = {"size": 4096}, {"size": 4 << 20}
    assert pagecache.assess(toy, small, "disk", limits)["page_cache"] == pagecache.IN_MEMORY
    assert pagecache.assess(toy, large, "nvme", limits)["page_cache"] == pagecache.DEVICE
    assert pagecache.assess(toy, large, "tmpfs", limits)["page_cache"] == pagecache.RAM_TIER
    plain = toy_declaration(TOY_MODULE.replace("    page_cache=page_cache,\n", ""))
    found = pagecache.assess(plain, small, "disk", limits)
    assert (
        found["page_cache"] == pagecache.UNKNOWN
        and "no page-cache rule" in found["page_cache_reason"]
    )


def test_every_module_with_a_declaration_is_registered():
    names = set(registry())
    assert {"fio", "dd", "pv", "stream", "fe_proxy", "cfd_proxy"} <= names
    modules = {p.stem for p in (REPO / "workflow/tierbench/workloads").rglob("*.py")}
    assert names <= modules


def test_a_workload_in_a_sub_package_is_registered_under_its_own_name(tmp_path, monkeypatch):
    """An application, its proxy and their helpers may share a sub-package of workloads/:
    the workload keeps its module's name, and get() imports that module only."""
    import tierbench.workloads as package

    folder = tmp_path / "toys"
    folder.mkdir()
    (folder / "__init__.py").write_text('"""A toy application and its helper."""\n')
    (folder / "toy.py").write_text(
        textwrap.dedent(TOY_MODULE)
        .replace("from .. import", "from ... import")
        .replace("from ..records", "from ...records")
        .replace("from . import", "from .. import")
    )
    (folder / "toy_helper.py").write_text("raise ImportError('a helper get() need not import')\n")
    caches = (package.modules, package.registry, package.get)
    monkeypatch.setattr(package, "__path__", [*package.__path__, str(tmp_path)])
    for cached in caches:
        cached.cache_clear()
    try:
        assert package.modules()["toy"] == "toys.toy"
        toy = package.get("toy")
        assert toy.name == "toy" and toy.run.__module__ == "tierbench.workloads.toys.toy"
    finally:
        monkeypatch.undo()
        for cached in caches:
            cached.cache_clear()
        for name in [m for m in sys.modules if m.startswith("tierbench.workloads.toys")]:
            del sys.modules[name]
    assert "toy" not in package.modules()


def test_a_misspelt_hook_fails_when_declared():
    with pytest.raises(TypeError, match="planed_bytes"):
        Workload(name="x", summary="", run=print, family="fio", planed_bytes=len)
    with pytest.raises(TypeError, match="must be a function"):
        Workload(name="x", summary="", run=print, family="fio", threads=4)


def test_a_proxy_names_an_application_of_the_registry_and_itself():
    proxies = {n: w.stands_for for n, w in registry().items() if w.stands_for is not None}
    assert {"cfd_proxy", "fe_proxy"} <= set(proxies)
    for name, pair in proxies.items():
        assert pair.proxy == name and pair.real in registry() and pair.shape
    other = Pair(proxy="cfd_proxy", real="openfoam", unit="write", shape=("ranks",))
    with pytest.raises(TypeError, match="stands_for must be Pair"):
        Workload(name="toy", summary="", run=print, stands_for=other)


def test_estimate_of_an_unknown_hook_is_an_error_not_a_default():
    with pytest.raises(KeyError, match="no such workload estimate"):
        get("fio").estimate("thread", {})
    assert get("dd").estimate("threads", {}) == HOOK_DEFAULTS["threads"]


@pytest.mark.parametrize("name", [n for n, w in registry().items() if w.mpi])
def test_an_mpi_job_holds_a_core_per_rank(name):
    """Locally, a job's threads keep Snakemake from starting another job on a core one of
    its ranks needs: every rank of every ensemble member."""
    params = matrix.complete(name, {"ranks": 2, "ensemble": 2})
    assert get(name).estimate("threads", params) == get(name).estimate("tasks", params) == 4


def test_config_schema_lists_the_registry_workloads():
    enum = matrix._schema("config.schema.yaml")["$defs"]["experiment"]["properties"]["workload"]
    assert enum["enum"] == list(registry())


@pytest.mark.parametrize("name", sorted(registry()))
def test_schema_documents_every_parameter_and_its_default_is_valid(name):
    """The schema is the one place a parameter is written: every one has a meaning, and
    its default passes the schema itself."""
    properties = schemas.load(get(name).schema)["properties"]
    for parameter, spec in properties.items():
        assert spec.get("description"), f"{name}.{parameter} has no description"
    defaults = schemas.schema_defaults(name)
    errors = matrix._validator(get(name).schema).iter_errors(defaults)
    # errors of the defaults themselves; required keys without a default are not theirs
    assert [e.message for e in errors if e.absolute_path] == []


def test_expansion_fills_in_the_schema_defaults(tmp_path):
    study = {
        "study": "s",
        "experiments": [
            {
                "name": "e",
                "workload": "fio",
                "params": {"rw": "read", "block_size": "4k", "io_mode": "direct", "size": "1MiB"}
                | {"runtime": 1},
            }
        ],
    }
    tiers = {"shm": {"path": str(tmp_path), "class": "shm"}}
    (point,) = matrix.expand_study(study, tiers, "default")
    assert point.params["numjobs"] == 1 and point.params["ioengine"] == "libaio"
    assert point.name == "single"  # defaults are not axes: names do not change


def test_docs_workloads_page_is_up_to_date():
    committed = (REPO / "docs/workloads.md").read_text()
    assert committed == workload_docs.page(), (
        "docs/workloads.md is stale: python -m tierbench.workload_docs > docs/workloads.md"
    )


def test_tools_come_from_the_registry():
    from tierbench import needs, preflight

    assert needs.tools_of([{"workload": "fio"}]) == {"fio": "fio"}
    every = needs.tools_of([{"workload": name} for name in registry()])
    declared = {t.command: t.package for w in registry().values() for t in w.tools}
    assert every == declared
    assert "mpiexec" in every and every["mpiexec"] == "openmpi-bin"
    problems = preflight.check_tools({"fio"})
    assert problems == [] or "apt-get install -y fio" in problems[0]


def test_needs_reads_the_study_a_command_line_runs():
    from tierbench import needs

    default = needs.tools_of(needs.study_experiments([]))
    assert set(default) == {"fio", "gcc"}
    study = REPO / "config/studies/ramdisk_macos.yaml"
    pv = needs.tools_of(needs.study_experiments(["--configfile", str(study)]))
    assert "pv" in pv and "fio" not in pv
    paper = needs.tools_of(needs.study_experiments(["paper"]))
    assert {"fio", "pv", "mpiexec"} <= set(paper)


def test_the_test_suite_gets_every_tool_mounts_and_tracing(capsys):
    from tierbench import needs

    needs.main(["--all"])
    packages = capsys.readouterr().out.split()
    assert {"bindfs", "strace", "calculix-ccx", "fio"} <= set(packages)
    # the cases and decks the project did not write, which the tests run as shipped
    assert {"openfoam-examples", "calculix-ccx-test"} <= set(packages)


@pytest.mark.e2e
def test_a_workload_added_as_the_docs_say_is_run_ranked_and_documented(pipeline):
    """The steps of docs/development.md "Adding a workload", and no other file: the module,
    its schema, no figures of its own (generic), the page docs/workloads.md regenerated; then a
    study of it runs on the test's tiers and the report ranks them on its headline."""
    root = pipeline.root
    (root / "workflow/tierbench/workloads/toy.py").write_text(textwrap.dedent(TOY_MODULE))
    (root / "workflow/schemas/params/toy.schema.yaml").write_text(TOY_SCHEMA)
    on_copy = {**os.environ, "PYTHONPATH": str(root / "workflow")}
    docs = subprocess.run(
        [sys.executable, "-m", "tierbench.workload_docs"],
        cwd=root, env=on_copy, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "## toy\n\nwrites one small file." in docs and "`dd` (Debian: coreutils)" in docs
    study = root / "config/studies/toystudy.yaml"
    study.write_text(TOY_STUDY)
    before_shm = {p.name for p in Path("/dev/shm").iterdir()}
    pipeline("-c1", "--configfile", str(study))
    out = root / "results" / MACHINE / "toystudy"
    plan = json.loads((out / "plan.json").read_text())
    assert {p["params"]["size"] for p in plan["points"].values()} == {1024, 2048}
    preflight = json.loads((out / "preflight.json").read_text())
    assert preflight["ok"] and preflight["largest_point_bytes"]["shm"] == 2048

    # each point's records: its repetitions, each with the toy's metrics and its page cache
    for tier in ("shm", "disk"):
        for size in (1024, 2048):
            folder = out / "raw/toy/small" / tier / f"size={size}"
            records = [json.loads(p.read_text()) for p in sorted(folder.glob("rep*.json"))]
            assert [r["spec"]["repetition"] for r in records] == [1, 2], folder
            for record in records:
                assert record["spec"]["workload"] == "toy" and record["spec"]["tier"] == tier
                metrics = {m["metric"]: m for m in record["metrics"]}
                assert metrics["toy_time"]["status"] == "ok" and metrics["toy_time"]["unit"] == "s"
                assert metrics["toy_time"]["value"] > 0
                assert metrics["toy_bytes"]["value"] == size
                assert record["page_cache"]["page_cache"]
    import pandas as pd

    summary = pd.read_csv(out / "summary.csv")
    assert set(summary["metric"]) == {"toy_time", "toy_bytes"} and (summary["n"] == 2).all()
    # its own page-cache rule judged its points: a few KiB on the disk may stay in memory
    page_cache = dict(zip(summary["tier"], summary["page_cache"], strict=True))
    assert page_cache == {"shm": pagecache.RAM_TIER, "disk": pagecache.IN_MEMORY}
    assert (out / "figures").is_dir() and any((out / "figures").rglob("*.png"))

    # the report's first screen ranks the two tiers on the headline, the slowest at 1x
    html = (root / "results" / MACHINE / "report.html").read_text()
    assert 'data-answer="toy/small"' in html, "no ranking of the toy's tiers in the report"
    answer = html.split('data-answer="toy/small"')[1].split("</table>")[0]
    assert "(toy, toy_time)" in answer
    slowest = re.search(r"speedup vs (\w+)", answer).group(1)
    ranked = re.findall(r"<tr><td>(\w+).*?</td>\s*<td class=\"num\">([\d.]+)x", answer)
    assert sorted(tier for tier, _ in ranked) == ["disk", "shm"] and slowest in ("disk", "shm")
    speedups = [float(speedup) for _, speedup in ranked]
    assert speedups == sorted(speedups, reverse=True)
    assert ranked[-1][0] == slowest and speedups[-1] == 1

    assert list((root / "results/scratch").iterdir()) == []
    assert not {p.name for p in rundir.stale_folders("/dev/shm")} - before_shm


def test_a_tool_the_new_workload_names_but_the_machine_lacks_stops_the_preflight(monkeypatch):
    """The preflight asks the registry for the toy's tools and the table for their package."""
    from tierbench import packages, preflight

    monkeypatch.setitem(packages.PACKAGES, "no-such-toy-tool", "coreutils")  # as the docs say
    toy = toy_declaration(TOY_MODULE.replace('Tool("dd")', 'Tool("no-such-toy-tool")'))
    monkeypatch.setattr(preflight, "get", lambda name: toy if name == "toy" else get(name))
    assert preflight.check_tools({"toy"}) == [
        "tool no-such-toy-tool is not installed (needed by toy); "
        "install it with: sudo apt-get install -y coreutils"
    ]


def test_runner_cli_needs_a_point_with_a_plan(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "tierbench.runner", "--plan", "x.json", "--out", "o.json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(REPO / "workflow"), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode != 0 and "--plan needs --point" in done.stderr


#: Python modules of the job's own code -> the conda package that provides each
CONDA_PACKAGES = {"numpy": "numpy", "yaml": "pyyaml", "jinja2": "jinja2", "mpi4py": "mpi4py"}


@pytest.mark.parametrize("name", sorted(registry()))
def test_a_jobs_conda_env_holds_what_its_workload_imports(name):
    """With --software-deployment-method conda a job runs in its workload's env alone: the
    env must hold every third-party module the runner and that one workload import."""
    code = (
        "import sys; from tierbench.workloads import get; from tierbench import runner; "
        f"get({name!r}); print(' '.join(sorted(m.split('.')[0] for m in sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(REPO / "workflow"), "PATH": "/usr/bin:/bin"},
        check=True,
    )
    imported = set(done.stdout.split())
    env = (REPO / "envs" / f"{get(name).env}.yaml").read_text()
    for module, package in CONDA_PACKAGES.items():
        if module in imported:
            assert f"- {package}=" in env, f"envs/{get(name).env}.yaml lacks {package}"
