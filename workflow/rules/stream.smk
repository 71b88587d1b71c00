"""STREAM: memory bandwidth, the ceiling of every RAM-backed tier."""


rule stream:
    """One repetition of one STREAM point (tier void: memory, no run folder)."""
    input:
        unpack(benchmark_inputs("stream")),
    output:
        "results/{study}/raw/stream/{experiment}/{tier}/{point}/rep{rep}.json",
    log:
        "results/{study}/logs/stream/{experiment}/{tier}/{point}/rep{rep}.log",
    conda:
        "../../envs/stream.yaml"
    threads: point_resource("stream", "threads")
    resources:
        bench=bench_slots("stream"),
        runtime=bench_runtime("stream"),
        mem_mb=bench_mem_mb("stream"),
        nodes=1,
        slurm_partition=SLURM_PARTITION,
        slurm_extra=BENCH_SLURM_EXTRA,
    params:
        spec=run_spec("stream"),
    shell:
        "python -m tierbench.workloads.stream --spec {params.spec:q} --out {output} 2> {log}"
