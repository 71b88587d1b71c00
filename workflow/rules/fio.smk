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
    resources:
        bench=1,
    params:
        spec=run_spec("fio"),
    shell:
        "python -m tierbench.workloads.fio --spec {params.spec:q} --out {output} 2> {log}"
