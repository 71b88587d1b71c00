"""The paper target: one command builds all five document studies and their verdicts."""

import re

import pytest

STUDIES = ["fe_tmpfs", "cfd_dcpmm", "ramdisk_macos", "tmpfs_advent", "eagle_local"]
WORKLOADS = {
    "fe_tmpfs": {"fio", "fe_proxy"},
    "cfd_dcpmm": {"cfd_proxy"},
    "ramdisk_macos": {"pv"},
    "tmpfs_advent": {"dd", "stream"},
    "eagle_local": {"dd", "stream"},
}


@pytest.mark.parametrize("scale", ["smoke", "default", "full"])
def test_paper_dry_run_lists_every_study(pipeline, scale):
    done = pipeline("-n", "paper", "--config", f"scale={scale}")
    output = done.stdout
    for study in STUDIES:
        raw = set(re.findall(rf"results/testbox/{study}/raw/(\w+)/", output))
        assert raw >= WORKLOADS[study], (study, raw)
        assert f"results/testbox/{study}/verdict.json" in output
        assert f"results/testbox/{study}/figures/paper" in output
    assert "results/testbox/paper.html" in output


def test_each_study_file_runs_alone(pipeline):
    for study in STUDIES:
        done = pipeline(
            "-n", "--configfile", f"config/studies/{study}.yaml", "--config", "scale=smoke"
        )
        assert f"results/testbox/{study}/verdict.json" in done.stdout
        assert "results/testbox/report.html" in done.stdout
