"""One benchmark rule per workload of the registry (tierbench.workloads).

A job runs one repetition of one point: it names the point on its command line
and reads the rest (parameters, tier) from the study's plan.json. MPI
workloads also get their launcher: `mpiexec` locally, `srun --mpi=pmix` under
the Slurm executor (see mpi_launcher in common.smk). A proxy's repetition waits
for its application's (partner_run in common.smk) and its rule has the higher
priority, so the pair runs back to back. Under Slurm the jobs are packed into a
few allocations, one Slurm job each (allocation_group in common.smk).
"""

for workload in WORKLOADS.values():

    rule:
        name:
            workload.name
        input:
            unpack(benchmark_inputs(workload.name)),
        output:
            RAW.replace("{workload}", workload.name),
        log:
            RAW_LOG.replace("{workload}", workload.name),
        priority: 1 if workload.stands_for else 0
        group:
            allocation_group(workload.name)
        conda:
            f"../../envs/{workload.env}.yaml"
        threads: bench_threads(workload.name)
        resources:
            **benchmark_resources(workload),
        params:
            point=job_point(workload.name),
            launcher=launcher_option(workload),
            partner=partner_option(workload),
        shell:
            RUN_POINT
