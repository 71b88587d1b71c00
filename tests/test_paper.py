"""The paper target: one command builds every document study and its verdicts."""

import re

import pytest
from conftest import REPO
from tierbench import matrix

#: the document studies: each study file with a `document:`, no list of them here
STUDIES = matrix.PAPER_STUDIES


def workloads_of(study: str) -> set[str]:
    """The workloads a study file's experiments run."""
    experiments = matrix.load_yaml(REPO / f"config/studies/{study}.yaml")["experiments"]
    return {experiment["workload"] for experiment in experiments}


@pytest.mark.parametrize("scale", ["smoke", "default", "full"])
def test_paper_dry_run_lists_every_study(pipeline, scale):
    done = pipeline("-n", "paper", "--config", f"scale={scale}")
    output = done.stdout
    for study in STUDIES:
        raw = set(re.findall(rf"results/testbox/{study}/raw/(\w+)/", output))
        assert raw == workloads_of(study), (study, raw)
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
