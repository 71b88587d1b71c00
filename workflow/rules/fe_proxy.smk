"""fe_proxy: a genetic algorithm over a non-linear FE model, solver output on the tier."""


rule fe_proxy:
    """One repetition of one fe_proxy point: the whole optimisation on `cores` workers."""
    input:
        unpack(benchmark_inputs("fe_proxy")),
    output:
        "results/{study}/raw/fe_proxy/{experiment}/{tier}/{point}/rep{rep}.json",
    log:
        "results/{study}/logs/fe_proxy/{experiment}/{tier}/{point}/rep{rep}.log",
    conda:
        "../../envs/fe.yaml"
    threads: point_resource("fe_proxy", "threads")
    resources:
        bench=bench_slots("fe_proxy"),
        runtime=bench_runtime("fe_proxy"),
        mem_mb=bench_mem_mb("fe_proxy"),
        nodes=1,
        slurm_partition=SLURM_PARTITION,
        slurm_extra=BENCH_SLURM_EXTRA,
    params:
        spec=run_spec("fe_proxy"),
    shell:
        "python -m tierbench.workloads.fe_proxy --spec {params.spec:q} --out {output} 2> {log}"
