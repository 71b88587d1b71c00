"""Checks before any benchmark writes a byte, and the provenance of every tier."""


rule preflight:
    """Tier paths, free space and tools for a study; one message per problem."""
    output:
        "results/{study}/preflight.json",
    log:
        "results/{study}/logs/preflight.log",
    conda:
        "../../envs/python.yaml"
    resources:
        runtime=10,
        mem_mb=1000,
        slurm_partition=SLURM_PARTITION,
    params:
        spec=preflight_spec,
    shell:
        "python -m tierbench.preflight --spec {params.spec:q} --out {output} 2> {log}"


rule probe:
    """File system, device, host and tool versions behind each tier of a study."""
    input:
        "results/{study}/preflight.json",
    output:
        "results/{study}/provenance/tiers.json",
    log:
        "results/{study}/logs/probe.log",
    conda:
        "../../envs/python.yaml"
    resources:
        runtime=10,
        mem_mb=1000,
        slurm_partition=SLURM_PARTITION,
    params:
        tiers=lambda wildcards: json.dumps(
            {name: TIERS[name] for name in study_tiers(wildcards.study)}
        ),
    shell:
        "python -m tierbench.probe --tiers {params.tiers:q} --out {output} 2> {log}"
