"""Re-run the five documents' studies: published numbers beside ours, a verdict per lesson."""


rule verdict:
    """Each lesson of the study's document, tested on this run's medians."""
    input:
        summary="results/{study}/summary.csv",
        reference=REFERENCE_CSVS,
    output:
        "results/{study}/verdict.json",
    log:
        "results/{study}/logs/verdict.log",
    conda:
        "../../envs/python.yaml"
    params:
        document=lambda wildcards: STUDIES[wildcards.study]["document"],
    shell:
        "python -m tierbench.verdicts --document {params.document}"
        " --summary {input.summary} --out {output} 2> {log}"


rule paper_figures:
    """The published figure re-plotted and normalised, next to this run's ratios."""
    input:
        verdict="results/{study}/verdict.json",
        notebook=str(BASE / "notebooks/paper.ipynb"),
        reference=REFERENCE_CSVS,
    output:
        figures=report(
            directory("results/{study}/figures/paper"),
            patterns=["{name}.png"],
            category="Paper figures",
            subcategory="{study}",
            caption="../report/figure.rst",
        ),
        notebook="results/{study}/notebooks/paper.ipynb",
    log:
        "results/{study}/logs/figures_paper.log",
    conda:
        "../../envs/python.yaml"
    shell:
        "papermill {input.notebook} {output.notebook} -k python3 --log-output"
        " -p verdict_json {input.verdict} -p out_dir {output.figures}"
        " -p study {wildcards.study} > {log} 2>&1"


ruleorder: paper_figures > figures


rule paper:
    """results/paper.html: the five document studies, each with its verdicts."""
    input:
        **report_inputs(paper_studies()),
    output:
        "results/paper.html",
    log:
        "results/logs/paper.log",
    conda:
        "../../envs/python.yaml"
    params:
        studies=" ".join(paper_studies()),
        titles=lambda wildcards: json.dumps(
            {s: study_title(s) for s in paper_studies()}
        ),
        scale=config["scale"],
    shell:
        "python -m tierbench.report --results-dir results --studies {params.studies}"
        " --titles {params.titles:q} --scale {params.scale} --out {output} 2> {log}"
