"""cfd_proxy: OpenFOAM-style MPI output, single runs and ensembles (document 001)."""


rule cfd_proxy:
    """One repetition of one cfd_proxy point: ensemble x ranks MPI processes.

    The launcher is the `mpi` resource (`mpiexec` locally, `srun --mpi=pmix`
    under the Slurm executor, see mpi_launcher in common.smk); `tasks` is
    every rank of every ensemble member, all in one allocation. Memory is
    asked per CPU so that each member's `srun --exact` gets its share and the
    members run side by side; no `nodes`, so Slurm may spread a large
    ensemble over several nodes.
    """
    input:
        unpack(benchmark_inputs("cfd_proxy")),
    output:
        "results/{study}/raw/cfd_proxy/{experiment}/{tier}/{point}/rep{rep}.json",
    log:
        "results/{study}/logs/cfd_proxy/{experiment}/{tier}/{point}/rep{rep}.log",
    conda:
        "../../envs/cfd.yaml"
    threads: point_resource("cfd_proxy", "threads")
    resources:
        bench=bench_slots("cfd_proxy"),
        mpi=mpi_launcher,
        tasks=point_resource("cfd_proxy", "tasks"),
        cpus_per_task=1,
        runtime=bench_runtime("cfd_proxy"),
        mem_mb_per_cpu=bench_mem_mb_per_cpu("cfd_proxy"),
        slurm_partition=SLURM_PARTITION,
        slurm_extra=BENCH_SLURM_EXTRA,
    params:
        spec=run_spec("cfd_proxy"),
    shell:
        "python -m tierbench.workloads.cfd_proxy --launcher {resources.mpi:q}"
        " --spec {params.spec:q} --out {output} 2> {log}"
