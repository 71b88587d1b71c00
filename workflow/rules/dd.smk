"""dd: the documents' sequential write from /dev/zero, and the page-cache cliff."""


rule dd:
    """One repetition of one dd point, in its own run folder on the tier."""
    input:
        unpack(benchmark_inputs("dd")),
    output:
        "results/{study}/raw/dd/{experiment}/{tier}/{point}/rep{rep}.json",
    log:
        "results/{study}/logs/dd/{experiment}/{tier}/{point}/rep{rep}.log",
    conda:
        "../../envs/dd.yaml"
    resources:
        bench=bench_slots("dd"),
        runtime=bench_runtime("dd"),
        mem_mb=bench_mem_mb("dd"),
        nodes=1,
        slurm_partition=SLURM_PARTITION,
        slurm_extra=BENCH_SLURM_EXTRA,
    params:
        spec=run_spec("dd"),
    shell:
        "python -m tierbench.workloads.dd --spec {params.spec:q} --out {output} 2> {log}"
