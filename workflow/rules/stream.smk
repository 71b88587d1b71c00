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
        bench=1,
    params:
        spec=run_spec("stream"),
    shell:
        "python -m tierbench.workloads.stream --spec {params.spec:q} --out {output} 2> {log}"
