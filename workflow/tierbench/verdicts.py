"""Does each document's lesson hold on this hardware? A verdict per lesson, with numbers.

Absolute numbers differ between machines, so every lesson is tested as a
ratio measured in one run (e.g. fio worst case RAM tier / disk tier next to
the optimisation's wall time disk / RAM tier) and set beside the same ratio
from the document. Which tier is "fast" and which "slow" comes from the tier
*classes* (RAM-backed vs device-backed), never from which one measured
faster, so each verdict can come out either way. A lesson the run cannot
test (a tier class missing, a sweep too small) is *inconclusive*, with the
reason.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd

from . import reference

REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE = "reproduced", "not_reproduced", "inconclusive"
RAM_CLASSES = ("shm", "tmpfs", "pmem-fsdax")
DEVICE_CLASSES = ("disk", "nvme", "ssd", "hdd", "nfs", "lustre", "gpfs", "beegfs")


@dataclass
class Comparison:
    """One normalised number: the same ratio from the document and from this run."""

    label: str
    published: float | None
    ours: float | None
    unit: str = "x"


@dataclass
class Verdict:
    lesson: str
    status: str
    text: str
    comparisons: list[Comparison] = field(default_factory=list)


def _ok(summary: pd.DataFrame) -> pd.DataFrame:
    return summary[summary["status"] == "ok"]


def _matches(column: pd.Series, wanted) -> pd.Series:
    """Equality that treats 1, 1.0 and "1" alike (CSV columns mix ints, floats and text)."""
    try:
        target = float(wanted)
    except (TypeError, ValueError):
        return column.astype(str) == str(wanted)
    return pd.to_numeric(column, errors="coerce") == target


def _value(frame: pd.DataFrame, **where) -> float | None:
    rows = frame
    for key, wanted in where.items():
        if key not in rows.columns:
            return None
        rows = rows[_matches(rows[key], wanted)]
    return float(rows["median"].iloc[0]) if len(rows) == 1 else None


def _tiers(frame: pd.DataFrame, classes: tuple[str, ...]) -> list[str]:
    return sorted(frame.loc[frame["tier_class"].isin(classes), "tier"].unique())


def _fmt(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.2f}"


def _published(ref: pd.DataFrame, **where) -> float:
    rows = ref
    for key, wanted in where.items():
        rows = rows[_matches(rows[key], wanted)]
    if len(rows) != 1:
        raise KeyError(f"reference has {len(rows)} rows for {where}")
    return float(rows["canonical_value"].iloc[0])


def _missing(lesson: str, what: str) -> Verdict:
    return Verdict(lesson, INCONCLUSIVE, f"Not testable in this run: {what}.")


def _extreme_tier(frame, tiers, metric, pick):
    """The tier of ``tiers`` with the highest (pick=max) or lowest median of ``metric``."""
    values = {t: _value(frame, tier=t, metric=metric) for t in tiers}
    values = {t: v for t, v in values.items() if v is not None}
    return (pick(values, key=values.get), values) if values else (None, values)


# --- document 000: tmpfs for a GA over a non-linear FE model -------------------------


def document_000(summary: pd.DataFrame, ref: pd.DataFrame) -> list[Verdict]:
    lesson = (
        "A tier far faster (10x or more) in fio's worst case buys the real job only a "
        "little: the optimisation runs less than 1.5x faster"
    )
    ok = _ok(summary)
    fio = ok[ok["workload"] == "fio"]
    worst = fio[fio["rw"].astype(str) == "randrw"] if "rw" in fio.columns else fio.iloc[0:0]
    job = ok[(ok["workload"] == "fe_proxy") & (ok["metric"] == "wall_time")]
    ram_tiers, device_tiers = _tiers(worst, RAM_CLASSES), _tiers(worst, DEVICE_CLASSES)
    if not ram_tiers or not device_tiers or job.empty:
        return [_missing(lesson, "needs a RAM-backed tier, a device tier and the FE optimisation")]
    fast, _ = _extreme_tier(worst, ram_tiers, "write_bandwidth", max)
    slow, _ = _extreme_tier(worst, device_tiers, "write_bandwidth", min)
    fio_ratio = _value(worst, tier=fast, metric="write_bandwidth") / _value(
        worst, tier=slow, metric="write_bandwidth"
    )
    common = set(job[job["tier"] == fast]["cores"]) & set(job[job["tier"] == slow]["cores"])
    if not common:
        return [_missing(lesson, f"no core count ran on both {fast} and {slow}")]
    cores = int(max(common))
    slow_time, fast_time = _value(job, tier=slow, cores=cores), _value(job, tier=fast, cores=cores)
    if slow_time is None or fast_time is None:
        return [_missing(lesson, f"no single wall time per tier on {cores} cores")]
    job_ratio = slow_time / fast_time
    pub_fio = _published(ref, table="fio_worst_case", tier="tmpfs", metric="write_bandwidth") / (
        _published(ref, table="fio_worst_case", tier="SSD", metric="write_bandwidth")
    )
    pub_job = _published(ref, table="optimisation_wall_time", tier="SSD", cores=30) / (
        _published(ref, table="optimisation_wall_time", tier="tmpfs", cores=30)
    )
    numbers = (
        f"fio worst case: {fast}/{slow} = {_fmt(fio_ratio)}x (published tmpfs/SSD "
        f"{_fmt(pub_fio)}x); FE optimisation wall time on {cores} cores: {slow}/{fast} = "
        f"{job_ratio:.2f}x (published SSD/tmpfs on 30 cores {pub_job:.2f}x)"
    )
    comparisons = [
        Comparison("fio worst case, RAM tier / disk tier", pub_fio, fio_ratio),
        Comparison("FE optimisation wall time, disk tier / RAM tier", pub_job, job_ratio),
    ]
    if fio_ratio < 10:
        status = INCONCLUSIVE
        text = f"{numbers}. The tiers differ by less than 10x in fio, too little to test it."
    elif job_ratio < 1.5:
        status, text = REPRODUCED, f"{numbers}: lesson reproduced."
    else:
        status = NOT_REPRODUCED
        text = f"{numbers}: the job gains 1.5x or more; not reproduced."
    return [Verdict(lesson, status, text, comparisons)]


# --- document 001: OpenFOAM output on DCPMM vs Lustre --------------------------------


def document_001(summary: pd.DataFrame, ref: pd.DataFrame) -> list[Verdict]:
    ok = _ok(summary)
    steps = ok[(ok["workload"] == "cfd_proxy") & (ok["metric"] == "time_per_step")]
    if "file_handler" in steps.columns:
        steps = steps[steps["file_handler"].astype(str) == "uncollated"]
    if "ensemble" in steps.columns:
        # compare points of one experiment: the one that varies the ensemble size
        varied = steps.groupby("experiment")["ensemble"].nunique()
        if len(varied) and varied.max() > 1:
            steps = steps[steps["experiment"] == varied.idxmax()]
    ram_tiers, device_tiers = _tiers(steps, RAM_CLASSES), _tiers(steps, DEVICE_CLASSES)
    lessons = (
        "Writing every step costs the parallel/device tier far more than the fast tier",
        "At write interval 100 the tier does not matter (within 10%)",
        "Concurrent ensembles hurt the slow tier more than the fast one",
    )
    if not ram_tiers or not device_tiers:
        return [_missing(lesson, "needs a RAM-backed tier and a device tier") for lesson in lessons]
    fast, slow = ram_tiers[0], device_tiers[0]
    ranks = steps["ranks"].max() if "ranks" in steps.columns else None

    def t(tier, interval, ensemble=1):
        return _value(steps, tier=tier, write_interval=interval, ensemble=ensemble, ranks=ranks)

    def pub(tier, interval, ensemble=1):
        return _published(
            ref,
            table="time_per_step_single_vs_ensemble",
            tier=tier,
            write_interval=interval,
            ensemble=ensemble,
        )

    verdicts = []
    # 1: write every step
    ours = (t(slow, 1), t(fast, 1))
    published = pub("Lustre", 1) / pub("fsdax", 1)
    if None in ours:
        verdicts.append(_missing(lessons[0], "no write-interval-1 point on both tiers"))
    else:
        ratio = ours[0] / ours[1]
        text = (
            f"time per step at write interval 1: {slow}/{fast} = {ratio:.2f}x "
            f"(published Lustre/fsdax {published:.2f}x)"
        )
        status = REPRODUCED if ratio > 1.1 else NOT_REPRODUCED
        verdicts.append(
            Verdict(
                lessons[0],
                status,
                f"{text}: {'reproduced' if status == REPRODUCED else 'not reproduced'}.",
                [Comparison("time/step at interval 1, slow / fast tier", published, ratio)],
            )
        )
    # 2: rare writes do not matter
    ours = (t(slow, 100), t(fast, 100))
    published = pub("Lustre", 100) / pub("fsdax", 100)
    if None in ours:
        verdicts.append(_missing(lessons[1], "no write-interval-100 point on both tiers"))
    else:
        ratio = ours[0] / ours[1]
        status = REPRODUCED if abs(ratio - 1) <= 0.1 else NOT_REPRODUCED
        verdicts.append(
            Verdict(
                lessons[1],
                status,
                f"time per step at write interval 100: {slow}/{fast} = {ratio:.2f}x "
                f"(published {published:.2f}x): "
                f"{'reproduced' if status == REPRODUCED else 'not reproduced'}.",
                [Comparison("time/step at interval 100, slow / fast tier", published, ratio)],
            )
        )
    # 3: ensembles
    ensembles = (
        sorted(e for e in steps["ensemble"].unique() if int(e) > 1) if "ensemble" in steps else []
    )
    if not ensembles:
        verdicts.append(_missing(lessons[2], "no ensemble points"))
    else:
        size = int(ensembles[-1])
        slow_growth = (t(slow, 1, size) or 0) / (t(slow, 1) or float("nan"))
        fast_growth = (t(fast, 1, size) or 0) / (t(fast, 1) or float("nan"))
        pub_slow = pub("Lustre", 1, 5) / pub("Lustre", 1)
        pub_fast = pub("fsdax", 1, 5) / pub("fsdax", 1)
        if not (slow_growth > 0 and fast_growth > 0):
            verdicts.append(_missing(lessons[2], "ensemble points missing at write interval 1"))
        else:
            status = REPRODUCED if slow_growth > fast_growth * 1.05 else NOT_REPRODUCED
            verdicts.append(
                Verdict(
                    lessons[2],
                    status,
                    f"time per step, ensemble of {size} / single run at write interval 1: "
                    f"{slow} {slow_growth:.2f}x, {fast} {fast_growth:.2f}x (published, "
                    f"ensemble of 5: Lustre {pub_slow:.2f}x, fsdax {pub_fast:.2f}x): "
                    f"{'reproduced' if status == REPRODUCED else 'not reproduced'}.",
                    [
                        Comparison("ensemble / single, slow tier", pub_slow, slow_growth),
                        Comparison("ensemble / single, fast tier", pub_fast, fast_growth),
                    ],
                )
            )
    return verdicts


# --- document 002: RAM disk and bindfs on macOS ------------------------------------


def document_002(summary: pd.DataFrame, ref: pd.DataFrame) -> list[Verdict]:
    lessons = (
        "A FUSE (bindfs) mount over a RAM disk is slower than the plain disk",
        "A RAM disk takes a sequential write faster than the disk",
    )
    ok = _ok(summary)
    pv = ok[(ok["workload"] == "pv") & (ok["metric"] == "throughput")]
    fuse, device, ram = _tiers(pv, ("fuse",)), _tiers(pv, DEVICE_CLASSES), _tiers(pv, RAM_CLASSES)
    pub = ref[ref["table"] == "pv_throughput"].groupby("tier")["canonical_value"].median()
    checks = (
        (lessons[0], fuse, "bindfs", "FUSE over RAM", lambda ratio: ratio < 1),
        (lessons[1], ram, "RAM disk", "RAM disk", lambda ratio: ratio > 1),
    )
    verdicts = []
    for lesson, tiers, published_sink, label, holds in checks:
        if not tiers or not device:
            reason = "needs pv numbers on this sink and on a device tier"
            skipped = summary[(summary["workload"] == "pv") & (summary["status"] != "ok")]
            if len(skipped):
                reason += f" ({'; '.join(sorted(set(skipped['reason'].astype(str))))})"
            verdicts.append(_missing(lesson, reason))
            continue
        ratio = _value(pv, tier=tiers[0]) / _value(pv, tier=device[0])
        published = pub[published_sink] / pub["SSD"]
        status = REPRODUCED if holds(ratio) else NOT_REPRODUCED
        verdicts.append(
            Verdict(
                lesson,
                status,
                f"pv throughput {tiers[0]}/{device[0]} = {ratio:.2f}x (published "
                f"{published_sink}/SSD {published:.2f}x): {status.replace('_', ' ')}."
                + (
                    " A buffered write of this size may end in the page cache, which can "
                    "take data faster than a new tmpfs file"
                    if tiers is ram and status == NOT_REPRODUCED
                    else ""
                ),
                [Comparison(f"pv, {label} / disk", published, ratio)],
            )
        )
    return verdicts


# --- document 003: mktemp and tmpfs ------------------------------------------------------


def document_003(summary: pd.DataFrame, ref: pd.DataFrame) -> list[Verdict]:
    lesson = "dd writes faster to tmpfs than to the disk, and stays below the memory bandwidth"
    ok = _ok(summary)
    dd = ok[(ok["workload"] == "dd") & (ok["metric"] == "write_bandwidth")]
    if "sync" in dd.columns:
        dd = dd[dd["sync"].astype(str) == "buffered"]
    stream = ok[(ok["workload"] == "stream") & (ok["metric"] == "triad_bandwidth")]
    ram, device = _tiers(dd, RAM_CLASSES), _tiers(dd, DEVICE_CLASSES)
    if not ram or not device or stream.empty:
        return [_missing(lesson, "needs dd on a RAM tier and a device tier, and STREAM")]
    ram_bw = dd[dd["tier"] == ram[0]]["median"].max()
    disk_bw = dd[dd["tier"] == device[0]]["median"].max()
    triad = float(stream["median"].max())
    pub_ratio = _published(ref, table="dd", tier="tmpfs", metric="throughput") / _published(
        ref, table="dd", tier="home", metric="throughput"
    )
    pub_ceiling = _published(ref, table="dd", tier="tmpfs", metric="throughput") / _published(
        ref, table="stream", metric="triad_bandwidth"
    )
    text = (
        f"dd: {ram[0]}/{device[0]} = {ram_bw / disk_bw:.2f}x (published tmpfs/home "
        f"{pub_ratio:.2f}x); {ram[0]} dd / STREAM triad = {ram_bw / triad:.2f} "
        f"(published {pub_ceiling:.2f})"
    )
    status = REPRODUCED if ram_bw > disk_bw and ram_bw < triad else NOT_REPRODUCED
    word = "reproduced" if status == REPRODUCED else "not reproduced"
    return [
        Verdict(
            lesson,
            status,
            f"{text}: {word}.",
            [
                Comparison("dd, tmpfs / disk", pub_ratio, ram_bw / disk_bw),
                Comparison("dd on tmpfs / STREAM triad", pub_ceiling, ram_bw / triad),
            ],
        )
    ]


# --- document 004: local I/O on Eagle ---------------------------------------------------


def document_004(summary: pd.DataFrame, ref: pd.DataFrame) -> list[Verdict]:
    ok = _ok(summary)
    dd = ok[(ok["workload"] == "dd") & (ok["metric"] == "write_bandwidth")]
    lessons = (
        "A file that fits the page cache writes about as fast to a disk as to /dev/shm",
        "Once the file outgrows the page cache, the disk's own speed shows (the cliff)",
    )
    ram, device = _tiers(dd, RAM_CLASSES), _tiers(dd, DEVICE_CLASSES)
    if not ram or not device:
        return [_missing(lesson, "needs dd on a RAM tier and a device tier") for lesson in lessons]
    verdicts = []
    blocks = dd[dd["experiment"] == "dd_blocks"]
    if "sync" in blocks.columns:
        blocks = blocks[blocks["sync"].astype(str) == "buffered"]
    small_disk = _value(blocks, tier=device[0], block_size="1M")
    small_ram = _value(blocks, tier=ram[0], block_size="1M")
    pub_small = _published(ref, table="dd_1M_x_10k", tier="SATA spinning disk") / _published(
        ref, table="dd_1M_x_10k", tier="/dev/shm"
    )
    if small_disk is None or small_ram is None:
        verdicts.append(_missing(lessons[0], "no buffered 1M dd point on both tiers"))
    else:
        ratio = small_disk / small_ram
        status = REPRODUCED if ratio >= 0.5 else NOT_REPRODUCED
        verdicts.append(
            Verdict(
                lessons[0],
                status,
                f"dd bs=1M, buffered: {device[0]}/{ram[0]} = {ratio:.2f}x (published SATA "
                f"disk//dev/shm {pub_small:.2f}x): "
                f"{'reproduced' if status == REPRODUCED else 'not reproduced'}.",
                [Comparison("dd 1M, disk / shm (fits the page cache)", pub_small, ratio)],
            )
        )
    cliff = summary[(summary["experiment"] == "cliff") & (summary["workload"] == "dd")]
    verdicts.append(_cliff_verdict(lessons[1], cliff, device[0], ram[0], ref))
    return verdicts


def _cliff_verdict(lesson, cliff, disk, ram, ref) -> Verdict:
    pub = _published(ref, table="dd_10M_x_10k", tier="SATA spinning disk") / _published(
        ref, table="dd_1M_x_10k", tier="SATA spinning disk"
    )
    measured = cliff[(cliff["status"] == "ok") & (cliff["metric"] == "write_bandwidth")]
    if "sync" in measured.columns:
        measured = measured[measured["sync"].astype(str) == "buffered"]
    limits = cliff[(cliff["status"] == "ok") & (cliff["metric"] == "dirty_limit_bytes")]
    sizes = cliff[(cliff["status"] == "ok") & (cliff["metric"] == "bytes")]
    if measured.empty or limits.empty or sizes.empty:
        return _missing(lesson, "no cliff sweep with sizes and the dirty limit")
    limit = float(limits["median"].max())
    largest = float(sizes["median"].max())
    if largest <= limit:
        return _missing(
            lesson,
            f"the largest file ({largest / 2**30:.2f} GiB) stayed below the dirty-page limit "
            f"({limit / 2**30:.2f} GiB); raise max_file_size and the tier's max_bytes, or use "
            "scale=full",
        )

    def drop(tier):
        rows = measured[measured["tier"] == tier]
        rows = rows.assign(fraction=rows["file_fraction"].astype(float)).sort_values("fraction")
        return float(rows["median"].iloc[-1] / rows["median"].iloc[0]) if len(rows) > 1 else None

    disk_drop, ram_drop = drop(disk), drop(ram)
    if disk_drop is None or ram_drop is None:
        return _missing(lesson, "the sweep has fewer than two sizes on a tier")
    status = REPRODUCED if disk_drop < 0.5 and ram_drop > 0.7 else NOT_REPRODUCED
    return Verdict(
        lesson,
        status,
        f"buffered dd, largest / smallest file: {disk} {disk_drop:.2f}x, {ram} {ram_drop:.2f}x "
        f"(published SATA disk 107 GB / 11 GB: {pub:.2f}x; /dev/shm kept its speed): "
        f"{'reproduced' if status == REPRODUCED else 'not reproduced'}.",
        [
            Comparison("dd, large / small file, disk", pub, disk_drop),
            Comparison("dd, large / small file, shm", 1.0, ram_drop),
        ],
    )


DOCUMENTS = {
    "000": document_000,
    "001": document_001,
    "002": document_002,
    "003": document_003,
    "004": document_004,
}


def judge(document: str, summary: pd.DataFrame, ref: pd.DataFrame | None = None) -> list[Verdict]:
    ref = reference.load() if ref is None else ref
    return DOCUMENTS[document](summary, ref[ref["document"] == document])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--document", required=True, choices=sorted(DOCUMENTS))
    parser.add_argument("--summary", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    verdicts = judge(args.document, pd.read_csv(args.summary))
    Path(args.out).write_text(
        json.dumps({"document": args.document, "verdicts": [asdict(v) for v in verdicts]}, indent=1)
        + "\n"
    )
    for verdict in verdicts:
        print(f"[{verdict.status}] {verdict.lesson}: {verdict.text}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
