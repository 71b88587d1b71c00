"""tierbench: a reproducible benchmark study of storage tiers.

The package holds everything the Snakemake rules call: expanding the config
into experiment points, running one point of a workload inside its own run
folder on a tier, probing hosts and tiers, and turning raw records into tidy
tables, figures and the report.
"""

__version__ = "0.1.0"
