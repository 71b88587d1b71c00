"""pv: document 002's sequential write from /dev/zero into the void and each tier."""


rule pv:
    """One repetition of one pv point: into /dev/null, or a file in a run folder on the tier."""
    input:
        unpack(benchmark_inputs("pv")),
    output:
        "results/{study}/raw/pv/{experiment}/{tier}/{point}/rep{rep}.json",
    log:
        "results/{study}/logs/pv/{experiment}/{tier}/{point}/rep{rep}.log",
    conda:
        "../../envs/pv.yaml"
    resources:
        bench=bench_slots("pv"),
        runtime=bench_runtime("pv"),
        mem_mb=bench_mem_mb("pv"),
        nodes=1,
        slurm_partition=SLURM_PARTITION,
        slurm_extra=BENCH_SLURM_EXTRA,
    params:
        spec=run_spec("pv"),
    shell:
        "python -m tierbench.workloads.pv --spec {params.spec:q} --out {output} 2> {log}"
