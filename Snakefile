"""tierbench: which storage tier should a job's scratch and output go to?

Table of contents: the configuration is validated, the rules of each workload
are included, and `all` builds the report of the configured study
(`paper` builds the five document studies and their report).
"""

import gc

from snakemake.utils import min_version, validate

min_version("9.0")


configfile: "config/config.yaml"


validate(config, "workflow/schemas/config.schema.yaml")


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/preflight.smk"
include: "workflow/rules/fio.smk"
include: "workflow/rules/pv.smk"
include: "workflow/rules/fe_proxy.smk"
include: "workflow/rules/cfd_proxy.smk"
include: "workflow/rules/dd.smk"
include: "workflow/rules/stream.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/paper.smk"


rule all:
    default_target: True
    input:
        "results/report.html",


# Everything made so far (Snakemake's modules, the rules, the expanded matrix)
# lives until the run ends. Freezing it spares the garbage collector from
# scanning it again at every full collection while the DAG is built: about
# half of the collector's time in a dry run of 1,000+ jobs.
gc.freeze()
