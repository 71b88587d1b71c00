"""The published numbers: every table of every document, typed in, parses."""

import pytest
from tierbench import reference

DATA = reference.load()


def rows(document, table=None):
    found = DATA[DATA["document"] == document]
    return found if table is None else found[found["table"] == table]


def test_all_five_documents_are_there():
    assert sorted(DATA["document"].unique()) == ["000", "001", "002", "003", "004"]
    assert DATA["value"].notna().all() and (DATA["value"] > 0).all()


@pytest.mark.parametrize(
    ("document", "table", "count"),
    [
        ("000", "fio_worst_case", 6),  # 3 drives x read/write
        ("000", "optimisation_wall_time", 7),  # HDD once, SSD and tmpfs at 30/16/8 cores
        ("001", "time_per_step_single_vs_ensemble", 12),  # 2 tiers x 3 intervals x 2
        ("001", "derived_bandwidth", 4),
        ("001", "files_created", 6),
        ("002", "pv_throughput", 41),  # the void once, 4 sinks x 10 repetitions
        ("003", "stream", 4),
        ("003", "dd", 4),
        ("004", "dd_1M_x_10k", 4),
        ("004", "dd_10M_x_10k", 2),
    ],
)
def test_counts_per_table(document, table, count):
    assert len(rows(document, table)) == count


def test_units_are_converted():
    tmpfs = rows("000", "fio_worst_case").query("tier == 'tmpfs' and metric == 'read_bandwidth'")
    assert tmpfs["canonical_value"].iloc[0] == pytest.approx(359.782)
    void = rows("002").query("tier == 'void'")
    assert void["canonical_value"].iloc[0] == pytest.approx(13.5 * 1024**3 / 1e6)
    lustre = rows("001", "derived_bandwidth").query("tier == 'Lustre' and ensemble == 1")
    assert lustre["canonical_value"].iloc[0] == pytest.approx(1010)


def test_document_arithmetic_holds():
    """The derived numbers agree with the tables they come from (to the document's rounding)."""
    steps = rows("001", "time_per_step_single_vs_ensemble").set_index(
        ["tier", "write_interval", "ensemble"]
    )["value"]
    bandwidth = rows("001", "derived_bandwidth").set_index(["tier", "ensemble"])["value"]
    single = 7.5 / (steps[("Lustre", "1", 1)] - steps[("Lustre", "100", 1)])
    assert single == pytest.approx(bandwidth[("Lustre", 1)], rel=0.02)
    fsdax = 7.5 / (steps[("fsdax", "1", 1)] - steps[("fsdax", "100", 1)])
    assert fsdax == pytest.approx(bandwidth[("fsdax", 1)], rel=0.02)
    files = rows("001", "files_created").set_index(["ranks", "metric"])["value"]
    assert files[(192, "files_created")] == 192 * 100 * 8
    assert files[(768, "dirs_created")] == 768 * 100 * 3
    ssd = rows("002").query("tier == 'SSD'")["value"]
    assert ssd.median() == pytest.approx(304.5)
