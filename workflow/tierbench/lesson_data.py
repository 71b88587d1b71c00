"""What a lesson's verdict reads of a study: its runs by point (with their samples for the
intervals), the rows a selector picks, the tier a role names, and numbers as verdicts print
them. Nothing here judges; :mod: does.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from . import intervals, pagecache, workloads
from .intervals import Interval
from .tiers import DEVICE_CLASSES, LOCAL_DEVICE, NETWORK, RAM, classes_of
from .units import format_value

#: the roles a lesson picks its tiers by; any other name is a tier class (fuse)
ROLES = {
    "ram": classes_of(RAM), "local_device": classes_of(LOCAL_DEVICE),
    "network": classes_of(NETWORK), "device": DEVICE_CLASSES,
}  # fmt: skip
#: the columns that name one point's metric in results.csv and summary.csv
POINT_METRIC = ["experiment", "workload", "tier", "point", "metric"]
IN_MEMORY = "may_stay_in_memory"


class Runs:
    """Each point's measured repetitions (results.csv), found from its summary row."""

    def __init__(self, results: pd.DataFrame | None):
        self.given = results is not None
        self._samples: dict[tuple, intervals.Sample] = {}
        if results is None or results.empty:
            return
        rows = results[(results["phase"] == "measured") & (results["status"] == "ok")]
        stamps = rows["started_at"] if "started_at" in rows.columns else [None] * len(rows)
        rows = rows.assign(_started=intervals.epoch_seconds(stamps))
        keys = rows[POINT_METRIC].astype(str)
        for key, group in rows.groupby([keys[c] for c in POINT_METRIC], sort=False):
            values = group["value"].astype(float).tolist()
            repetitions = pd.to_numeric(group["repetition"]).astype(int).tolist()
            self._samples[key] = intervals.sample(values, repetitions, group["_started"].tolist())

    def sample(self, row: pd.Series, metric: str | None = None) -> intervals.Sample:
        """The point's repetitions of its own metric, or of another ``metric`` of it."""
        key = tuple(str(row[c]) for c in POINT_METRIC[:-1]) + (str(metric or row["metric"]),)
        return self._samples.get(key, intervals.Sample(()))

    def relative(self, row: pd.Series, baseline: str) -> intervals.Sample | None:
        """Each run of the point divided by the same run's ``baseline``: the machine's speed,
        which drifts from job to job on a shared machine, cancels. None: a run lacks it."""
        return intervals.per_run(self.sample(row), self.sample(row, baseline))

    def terms(self, *rows: pd.Series, relative_to=()) -> tuple[list, str | None]:
        """The samples and powers of a / b (two points) or (a / b) / (c / d) (four); with
        ``relative_to`` (metrics) each run's value over its own first baseline that every
        run holds. Also returns that baseline, None for the values as measured."""
        samples, used = [self.sample(row) for row in rows], None
        for baseline in relative_to:
            found = [self.relative(row, baseline) for row in rows]
            if all(sample is not None for sample in found):
                samples, used = found, baseline
                break
        powers = (1, -1) if len(rows) == 2 else (1, -1, -1, 1)
        return list(zip(samples, powers, strict=True)), used

    def ratio(self, *rows: pd.Series, relative_to=()) -> tuple[Interval, str | None]:
        """The ratio of :meth:`terms` with its interval, and the baseline it used."""
        terms, used = self.terms(*rows, relative_to=relative_to)
        return self.interval(terms, of=tuple(point_id(row) for row in rows)), used

    def interval(self, terms: list, of: tuple[str, ...] = ()) -> Interval:
        """The product of ``terms`` with its interval, computed from ``of`` (point ids)."""
        interval = intervals.product(terms)
        if interval.n == 0 and not self.given:
            reason = "the per-repetition values (results.csv) of its points"
            interval = Interval(None, None, None, 0, reason=reason)
        return replace(interval, of=of)


def point_id(row: pd.Series) -> str:
    """A summary row's point as the study's plan names it: workload/experiment/tier/point."""
    return "/".join(str(row[key]) for key in ("workload", "experiment", "tier", "point"))


def matches(column: pd.Series, wanted) -> pd.Series:
    """Equality that treats 1, 1.0 and "1" alike (CSV columns mix ints, floats and text)."""
    try:
        target = float(wanted)
    except (TypeError, ValueError):
        return column.astype(str) == str(wanted)
    return pd.to_numeric(column, errors="coerce") == target


def show(interval: Interval) -> str:
    """``1.03x [0.97, 1.10]``; the interval's reason when there is none."""
    estimate = f"{format_value(interval.estimate, ratio=True)}x"
    if interval.known:
        low, high = (format_value(end, ratio=True) for end in (interval.low, interval.high))
        return f"{estimate} [{low}, {high}]"
    return f"{estimate} [no interval: needs {interval.reason.removeprefix('needs ')}]"


def _page_cache(row: pd.Series) -> str:
    """A row's page-cache state; a file-creating point on a network tier reached the server,
    whatever a record made before that rule (pagecache.reaches_server) says."""
    declared = workloads.find(str(row.get("workload", "")))
    if pagecache.reaches_server(declared, str(row.get("tier_class", ""))):
        return pagecache.DEVICE
    return str(row.get("page_cache", "") or "")


def _in_memory(rows) -> tuple[bool, str]:
    """Whether every row's point may have stayed in the page cache, and the first reason."""
    if not rows or any(_page_cache(r) != IN_MEMORY for r in rows):
        return False, ""
    return True, str(rows[0].get("page_cache_reason", "") or "")


def _on_device(rows) -> list:
    return [row for row in rows if row.get("tier_class") in DEVICE_CLASSES]


# --- selecting: a lesson's rows, its tiers and the points of each ratio ------------------


def select(frame: pd.DataFrame, selector: dict) -> pd.DataFrame:
    """The rows of a selector: its workload, metric, experiment and parameter values
    (``where``: a parameter the table has no column for does not narrow it), and with
    ``varying`` only the experiment that varies that parameter most, where one does."""
    rows = frame
    wanted = {k: selector[k] for k in ("workload", "metric", "experiment") if k in selector}
    for key, value in (wanted | (selector.get("where") or {})).items():
        if key in rows.columns:
            rows = rows[matches(rows[key], value)]
    if (varying := selector.get("varying")) in rows.columns:
        counts = rows.groupby("experiment")[varying].nunique()
        if len(counts) and counts.max() > 1:
            rows = rows[rows["experiment"] == counts.idxmax()]
    return rows


def pick_tier(rows: pd.DataFrame, spec: dict) -> str | None:
    """A tier of the first role (of a list) the rows hold: the first by name, or with
    ``pick`` the one whose single row has the highest (lowest) median."""
    roles = spec["role"] if isinstance(spec["role"], list) else [spec["role"]]
    for role in roles:
        found = sorted(rows.loc[rows["tier_class"].isin(ROLES.get(role, (role,))), "tier"].unique())
        if found:
            break
    if "pick" not in spec:
        return found[0] if found else None
    singles = [rows[rows["tier"] == tier] for tier in found]
    singles = [single.iloc[0] for single in singles if len(single) == 1]
    extreme = max if spec["pick"] == "highest" else min
    return extreme(singles, key=lambda row: row["median"])["tier"] if singles else None


def _value(rows: pd.DataFrame, key: str, wanted, shared: list[pd.DataFrame]):
    """A point's parameter value: as given; the largest or smallest its tier's rows hold; or
    with ``largest_shared`` the largest every tier of the ratio holds. None: there is none."""
    if wanted == "largest_shared":
        held = [set(pd.to_numeric(s[key], errors="coerce").dropna()) for s in shared]
        found = sorted(set.intersection(*held) if held else ())[-1:]
    elif wanted in ("largest", "smallest"):
        found = sorted(pd.to_numeric(rows[key], errors="coerce").dropna())
        found = found[-1:] if wanted == "largest" else found[:1]
    else:
        return wanted
    number = float(found[0]) if found else None
    return None if number is None else int(number) if number.is_integer() else number
