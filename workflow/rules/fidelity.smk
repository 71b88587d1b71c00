"""Does each proxy behave like the application it stands for? (tierbench.fidelity)"""


localrules:
    fidelity,


rule fidelity:
    """Proxy beside real application: files, bytes, call mix and I/O cost per write; a verdict."""
    input:
        results=f"{OUT}/{{study}}/results.csv",
        summary=f"{OUT}/{{study}}/summary.csv",
        traced=traced_records,
    output:
        f"{OUT}/{{study}}/fidelity.json",
    log:
        f"{OUT}/{{study}}/logs/fidelity.log",
    conda:
        "../../envs/python.yaml"
    shell:
        "python -m tierbench.fidelity --results {input.results} --summary {input.summary}"
        " --out {output} --traced {input.traced:q} 2> {log}"
