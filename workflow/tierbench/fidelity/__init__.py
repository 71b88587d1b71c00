"""Does each proxy behave like the application it stands for? A table and a verdict per proxy.

A study that holds a proxy and its real application (``cfd_proxy`` and
``openfoam``, ``fe_proxy`` and ``calculix``) is compared point by point: a
proxy point and a real point on the same tier with the same shape (the
parameters of its declaration's ``stands_for``, a :class:`Pair`), side by side:

- files and folders per write (per evaluation for FE), and bytes per write;
- the mix of file-system calls per write, from an experiment with
  ``count_syscalls: true`` (strace): (calls of the point - calls of its
  no-write baseline) / writes; for FE, per increment;
- the compute: the time per step without writes (the no-write baseline's,
  else the steps without a write of the writing run); for FE, the evaluation
  time without field output. It sets what share of a step a write is, and so
  the tier ratio: to a proxy that computes a tenth of what the application
  does, a write is a far larger part of its step;
- the I/O cost per write: measured within each run where the workload does
  (the pair's ``cost_metric``, with each run's standard error ``<cost_metric>_se``
  inside its interval where the workload gives one: a cost fitted from one run's
  few writes may be known to no better than itself), else the time with writes
  minus without (from untraced experiments: a traced run's times mean
  nothing); for FE, per increment, since each solver takes its own number of
  increments, and without field output (``frd_every: 0``) as neither runs
  with none at all, and how much of it each spent in the kernel (system calls
  and page faults, where the file system's work is: the pair's
  ``cost_kernel_metric``) beside the line;
- the tier ratio each sees: the headline time on a device tier / a RAM tier;
- over shapes that differ only in size (cells per rank, elements), the I/O
  cost per write split into a fixed part and a part per MB, proxy beside real
  (shown, not judged): which of the two a cost line that is off is off by.

The verdict: *faithful* when files and folders per write match and the 95%
bootstrap interval (:mod:`tierbench.intervals`) of the proxy/real ratio of
bytes per write, of the compute and of the I/O cost per write lies within
[0.9, 1.1] at every compared point; *differs* when a count differs or an
interval lies wholly outside the band; *within noise* otherwise (an interval
straddles a band edge, or a quantity could not be measured), with what was
undecided.

    python -m tierbench.fidelity --results results.csv --summary summary.csv \
        --out fidelity.json [--traced rep1.json ...]
"""

from .points import DIFFERS, FAITHFUL, NOT_COMPARED, WITHIN_NOISE, difference_ratio, pairs
from .regions import outside_region
from .study import fidelity, main

__all__ = [
    "DIFFERS",
    "FAITHFUL",
    "NOT_COMPARED",
    "WITHIN_NOISE",
    "difference_ratio",
    "fidelity",
    "main",
    "outside_region",
    "pairs",
]
