"""tierbench: which storage tier should a job's scratch and output go to?

Table of contents: the configuration is validated, one benchmark rule per
workload of the registry is generated, and `all` builds the report of the
configured study, results/<machine>/report.html (`paper` builds the
document studies and their report). <machine> is the hardware file's name, or
the host's when none is given: machines never share a path.
"""

import gc

from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/preflight.smk"
include: "workflow/rules/benchmarks.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/paper.smk"
include: "workflow/rules/fidelity.smk"
include: "workflow/rules/database.smk"


onstart:
    stop_if_slurm_cannot_be_asked()


rule all:
    default_target: True
    input:
        f"{OUT}/report.html",
        deleted_since(f"{OUT}/report.html", [ACTIVE_STUDY]),


# Everything made so far (Snakemake's modules, the rules, the expanded matrix)
# lives until the run ends. Freezing it spares the garbage collector from
# scanning it again at every full collection while the DAG is built: about
# half of the collector's time in a dry run of 1,000+ jobs.
gc.freeze()
