"""Bad configuration stops `snakemake -n` before any job, naming the key."""

import pytest


def test_dry_run_lists_the_default_study(pipeline):
    done = pipeline("-n", "--config", "scale=smoke")
    for rule in ("preflight", "probe", "fio", "aggregate", "figures", "report"):
        assert rule in done.stdout, rule


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--config", "no_such_key=1"], "no_such_key"),
        (["--config", "repetitions=zero"], "repetitions"),
        (["--config", "repetitions=0"], "repetitions"),
        (["--config", "scale=huge"], "scale"),
        (["--config", "hardware=no_such_machine"], "no_such_machine"),
    ],
)
def test_bad_config_names_the_key(pipeline, args, named):
    done = pipeline("-n", *args, check=False)
    assert done.returncode != 0
    output = done.stdout + done.stderr
    assert named in output
    assert "Job stats" not in output  # stopped before scheduling anything


def test_bad_experiment_value_names_the_point(pipeline, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "experiments:\n"
        "  - name: tiny\n"
        "    workload: fio\n"
        "    tiers: [shm]\n"
        "    params: {rw: write, block_size: 10M, io_mode: buffered, size: 1M, runtime: 1}\n"
    )
    done = pipeline("-n", "--configfile", str(bad), check=False)
    assert done.returncode != 0
    output = done.stdout + done.stderr
    assert "tiny" in output and "block_size 10M is larger than the file size 1M" in output


def test_unknown_tier_in_experiment(pipeline, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "experiments:\n"
        "  - name: tiny\n"
        "    workload: fio\n"
        "    tiers: [lustre_scratch]\n"
        "    params: {rw: write, block_size: 4k, io_mode: buffered, size: 1M, runtime: 1}\n"
    )
    done = pipeline("-n", "--configfile", str(bad), check=False)
    assert done.returncode != 0 and "lustre_scratch" in done.stdout + done.stderr
