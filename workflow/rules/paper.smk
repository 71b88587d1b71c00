"""Re-run the documents' studies: published numbers beside ours, a verdict per lesson."""


# They only read the files of the run: on a cluster they run where Snakemake runs
# instead of waiting in the queue.
localrules:
    verdict,
    paper_figures,
    paper_page,


rule lessons:
    """The study's lessons as its file declares them: what the verdict and the adaptive step
    judge (tierbench.verdicts)."""
    output:
        f"{OUT}/{{study}}/lessons.json",
    log:
        f"{OUT}/{{study}}/logs/lessons.log",
    localrule: True
    params:
        paper=lambda wildcards: paper_of(wildcards.study),
    run:
        write_json(params.paper, output[0])


checkpoint extra_repetitions:
    """After the first round of a study with a repetition range: the points an undecided
    lesson rests on, and the repetitions they get (tierbench.adaptive)."""
    input:
        lessons=f"{OUT}/{{study}}/lessons.json",
        raw=lambda wildcards: raw_records(wildcards.study),
    output:
        f"{OUT}/{{study}}/repetitions.json",
    log:
        f"{OUT}/{{study}}/logs/extra_repetitions.log",
    localrule: True
    conda:
        "../../envs/python.yaml"
    params:
        most=lambda wildcards: matrix.repetition_bounds(STUDIES[wildcards.study])[1],
        budget=lambda wildcards: repetition_budget(wildcards.study),
    shell:
        "python -m tierbench.adaptive --lessons {input.lessons} --max {params.most}"
        " {params.budget} --out {output} {input.raw} 2> {log}"


rule verdict:
    """Each lesson of the study's document, decided on the interval of the ratio it rests on."""
    input:
        lessons=f"{OUT}/{{study}}/lessons.json",
        summary=f"{OUT}/{{study}}/summary.csv",
        results=f"{OUT}/{{study}}/results.csv",
        fidelity=fidelity_of,
        reference=REFERENCE_CSVS,
    output:
        f"{OUT}/{{study}}/verdict.json",
    log:
        f"{OUT}/{{study}}/logs/verdict.log",
    conda:
        "../../envs/python.yaml"
    params:
        fidelity=lambda wildcards, input: (
            f"--fidelity {input.fidelity}" if input.fidelity else ""
        ),
        reference_dir=lambda wildcards, input: os.path.dirname(input.reference[0]),
    shell:
        "python -m tierbench.verdicts --lessons {input.lessons} --summary {input.summary}"
        " --results {input.results} {params.fidelity} --reference {params.reference_dir:q}"
        " --out {output} 2> {log}"


rule paper_figures:
    """The published figure re-plotted and normalised, next to this run's ratios."""
    input:
        verdict=f"{OUT}/{{study}}/verdict.json",
        notebook=str(BASE / "notebooks/paper.ipynb"),
        reference=REFERENCE_CSVS,
    output:
        figures=report(
            directory(f"{OUT}/{{study}}/figures/paper"),
            patterns=["{name}.png"],
            category="Paper figures",
            subcategory="{study}",
            caption="../report/figure.rst",
        ),
        notebook=f"{OUT}/{{study}}/notebooks/paper.ipynb",
    log:
        f"{OUT}/{{study}}/logs/figures_paper.log",
    conda:
        "../../envs/python.yaml"
    resources:
        notebook=1,
    params:
        reference_dir=lambda wildcards, input: os.path.dirname(input.reference[0]),
    shell:
        "papermill {input.notebook:q} {output.notebook} -k python3 --log-output"
        " -p verdict_json {input.verdict} -p out_dir {output.figures}"
        " -p study {wildcards.study} -p reference_csvs {params.reference_dir:q}"
        " > {log} 2>&1"


ruleorder: paper_figures > figures


rule paper:
    """The paper target: its page, and the document studies measured again where their
    records or folders were deleted."""
    input:
        f"{OUT}/paper.html",
        deleted_since(f"{OUT}/paper.html", paper_studies(), paper_elsewhere()),


rule paper_page:
    """results/<machine>/paper.html: the document studies, each with its verdicts."""
    input:
        **report_inputs(paper_studies(), paper_elsewhere()),
    output:
        f"{OUT}/paper.html",
    log:
        f"{OUT}/logs/paper.log",
    conda:
        "../../envs/python.yaml"
    params:
        results_dir=lambda wildcards, output: os.path.dirname(output[0]),
        studies=" ".join(paper_studies()),
        titles=lambda wildcards: json.dumps(
            {s: study_title(s) for s in paper_studies()}
        ),
        scale=config["scale"],
        elsewhere=lambda wildcards: json.dumps(paper_elsewhere()),
        undecided=json.dumps(config.get("paper_undecided", {})),
    shell:
        "python -m tierbench.report --results-dir {params.results_dir} --studies {params.studies}"
        " --titles {params.titles:q} --scale {params.scale} --elsewhere {params.elsewhere:q}"
        " --undecided {params.undecided:q} --out {output} 2> {log}"
