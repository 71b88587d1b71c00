"""The study's plan, checks before any benchmark writes a byte, and the provenance of every tier."""


rule plan:
    """Tiers and complete parameters of every point: what each job of the study reads.

    Under Slurm it also lists the allocations the benchmarks were packed into (not a
    parameter: another packing, e.g. after a cancelled allocation, reruns nothing).
    """
    output:
        f"{OUT}/{{study}}/plan.json",
    log:
        f"{OUT}/{{study}}/logs/plan.log",
    localrule: True
    params:
        plan=lambda wildcards: study_plan(wildcards.study),
    run:
        write_json(
            {**params.plan, **allocation_plan(wildcards.study)},
            output[0],
        )


rule preflight:
    """Tier paths, free space and tools for a study; one message per problem."""
    input:
        f"{OUT}/{{study}}/plan.json",
    output:
        f"{OUT}/{{study}}/preflight.json",
    log:
        f"{OUT}/{{study}}/logs/preflight.log",
    group:
        setup_group
    conda:
        "../../envs/python.yaml"
    resources:
        runtime=10,
        mem_mb=1000,
        slurm_partition=SLURM_PARTITION,
    shell:
        "python -m tierbench.preflight --plan {input} --out {output} 2> {log}"


rule probe:
    """File system, device, host and tool versions behind each tier of a study."""
    input:
        plan=f"{OUT}/{{study}}/plan.json",
        preflight=f"{OUT}/{{study}}/preflight.json",
    output:
        f"{OUT}/{{study}}/provenance/tiers.json",
    log:
        f"{OUT}/{{study}}/logs/probe.log",
    group:
        setup_group
    conda:
        "../../envs/python.yaml"
    resources:
        runtime=10,
        mem_mb=1000,
        slurm_partition=SLURM_PARTITION,
    shell:
        "python -m tierbench.probe --plan {input.plan} --out {output} 2> {log}"
