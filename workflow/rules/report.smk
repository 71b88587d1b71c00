"""From raw records to a tidy table, figures and one self-contained report."""


# Small jobs on the files of the run: on a cluster they run where Snakemake
# runs instead of waiting in the queue.
localrules:
    aggregate,
    figures,
    report,


rule aggregate:
    """Tidy rows of every run, and median and spread of every point."""
    input:
        lambda wildcards: raw_records(wildcards.study),
    output:
        results=report(
            "results/{study}/results.csv",
            category="Tables",
            subcategory="{study}",
            caption="../report/results.rst",
        ),
        summary="results/{study}/summary.csv",
        nodes="results/{study}/provenance/nodes.json",
    log:
        "results/{study}/logs/aggregate.log",
    conda:
        "../../envs/python.yaml"
    params:
        noise=config.get("noise_threshold", 0.25),
    shell:
        "python -m tierbench.aggregate --results {output.results} --summary {output.summary}"
        " --nodes {output.nodes} --noise-threshold {params.noise} {input} 2> {log}"


rule figures:
    """One parameterised notebook per figure family (fio, sequential, fe, cfd)."""
    input:
        results="results/{study}/results.csv",
        summary="results/{study}/summary.csv",
        notebook=str(BASE / "notebooks/{family}.ipynb"),
    output:
        figures=report(
            directory("results/{study}/figures/{family}"),
            patterns=["{name}.png"],
            category="Figures",
            subcategory="{study}",
            caption="../report/figure.rst",
        ),
        notebook="results/{study}/notebooks/{family}.ipynb",
    log:
        "results/{study}/logs/figures_{family}.log",
    conda:
        "../../envs/python.yaml"
    shell:
        "papermill {input.notebook} {output.notebook} -k python3 --log-output"
        " -p results_csv {input.results} -p summary_csv {input.summary}"
        " -p out_dir {output.figures} -p study {wildcards.study} > {log} 2>&1"


rule report:
    """results/report.html: figures, tables and provenance of the configured study."""
    input:
        **report_inputs([ACTIVE_STUDY]),
    output:
        "results/report.html",
    log:
        "results/logs/report.log",
    conda:
        "../../envs/python.yaml"
    params:
        studies=ACTIVE_STUDY,
        titles=lambda wildcards: json.dumps({ACTIVE_STUDY: study_title(ACTIVE_STUDY)}),
        scale=config["scale"],
    shell:
        "python -m tierbench.report --results-dir results --studies {params.studies}"
        " --titles {params.titles:q} --scale {params.scale} --out {output} 2> {log}"
