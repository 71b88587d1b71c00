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
        study_records,
    output:
        results=report(
            f"{OUT}/{{study}}/results.csv",
            category="Tables",
            subcategory="{study}",
            caption="../report/results.rst",
        ),
        summary=f"{OUT}/{{study}}/summary.csv",
        nodes=f"{OUT}/{{study}}/provenance/nodes.json",
        allocations=f"{OUT}/{{study}}/provenance/allocations.json",
    log:
        f"{OUT}/{{study}}/logs/aggregate.log",
    conda:
        "../../envs/python.yaml"
    params:
        noise=config.get("noise_threshold", 0.25),
    shell:
        "python -m tierbench.aggregate --results {output.results} --summary {output.summary}"
        " --nodes {output.nodes} --allocations {output.allocations}"
        " --noise-threshold {params.noise} {input} 2> {log}"


rule figures:
    """One notebook per figure family, executed: it calls tierbench.figures.<family>.make."""
    input:
        results=f"{OUT}/{{study}}/results.csv",
        summary=f"{OUT}/{{study}}/summary.csv",
        notebook=str(BASE / "notebooks/{family}.ipynb"),
        # the published numbers some families draw beside ours (pv, fe, cfd)
        reference=REFERENCE_CSVS,
    output:
        figures=report(
            directory(f"{OUT}/{{study}}/figures/{{family}}"),
            patterns=["{name}.png"],
            category="Figures",
            subcategory="{study}",
            caption="../report/figure.rst",
        ),
        notebook=f"{OUT}/{{study}}/notebooks/{{family}}.ipynb",
    log:
        f"{OUT}/{{study}}/logs/figures_{{family}}.log",
    conda:
        "../../envs/python.yaml"
    resources:
        notebook=1,
    params:
        reference_dir=lambda wildcards, input: os.path.dirname(input.reference[0]),
        document=lambda wildcards: document_parameter(wildcards.study),
    shell:
        "papermill {input.notebook:q} {output.notebook} -k python3 --log-output"
        " -p results_csv {input.results} -p summary_csv {input.summary}"
        " -p out_dir {output.figures} -p study {wildcards.study}"
        " -p reference_csvs {params.reference_dir:q} {params.document} > {log} 2>&1"


rule report:
    """results/<machine>/report.html: figures, tables and provenance of the configured study."""
    input:
        **report_inputs([ACTIVE_STUDY]),
    output:
        f"{OUT}/report.html",
    log:
        f"{OUT}/logs/report.log",
    conda:
        "../../envs/python.yaml"
    params:
        results_dir=lambda wildcards, output: os.path.dirname(output[0]),
        studies=ACTIVE_STUDY,
        titles=lambda wildcards: json.dumps({ACTIVE_STUDY: study_title(ACTIVE_STUDY)}),
        scale=config["scale"],
    shell:
        "python -m tierbench.report --results-dir {params.results_dir} --studies {params.studies}"
        " --titles {params.titles:q} --scale {params.scale} --out {output} 2> {log}"
