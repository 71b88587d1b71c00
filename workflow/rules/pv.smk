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
        bench=1,
    params:
        spec=run_spec("pv"),
    shell:
        "python -m tierbench.workloads.pv --spec {params.spec:q} --out {output} 2> {log}"
