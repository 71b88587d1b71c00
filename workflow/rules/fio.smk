"""fio: worst-case random I/O and sequential throughput per block size."""


rule fio:
    """One repetition of one fio point, in its own run folder on the tier."""
    input:
        unpack(benchmark_inputs("fio")),
    output:
        "results/{study}/raw/fio/{experiment}/{tier}/{point}/rep{rep}.json",
    log:
        "results/{study}/logs/fio/{experiment}/{tier}/{point}/rep{rep}.log",
    conda:
        "../../envs/fio.yaml"
    threads: point_resource("fio", "threads")
    resources:
        bench=bench_slots("fio"),
        runtime=bench_runtime("fio"),
        mem_mb=bench_mem_mb("fio"),
        nodes=1,
        slurm_partition=SLURM_PARTITION,
        slurm_extra=BENCH_SLURM_EXTRA,
    params:
        spec=run_spec("fio"),
    shell:
        "python -m tierbench.workloads.fio --spec {params.spec:q} --out {output} 2> {log}"
