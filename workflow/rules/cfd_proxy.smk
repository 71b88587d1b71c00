"""cfd_proxy: OpenFOAM-style MPI output, single runs and ensembles (document 001)."""


rule cfd_proxy:
    """One repetition of one cfd_proxy point: ensemble x ranks MPI processes.

    The launcher is the `mpi` resource (mpiexec here; a Slurm profile sets
    `srun --mpi=pmix`); `tasks` is every rank of every ensemble member.
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
        bench=1,
        mpi="mpiexec",
        tasks=point_resource("cfd_proxy", "tasks"),
        cpus_per_task=1,
    params:
        spec=run_spec("cfd_proxy"),
    shell:
        "python -m tierbench.workloads.cfd_proxy --launcher {resources.mpi:q}"
        " --spec {params.spec:q} --out {output} 2> {log}"
