"""Each finished study run goes into the one results database (`database:` in the config)."""


localrules:
    record_run,
    predict,


rule record_run:
    """Append the study's run (or replace it, when re-run) in the results database.

    The database is not an output: it is shared by every machine and study,
    and the append is one transaction that waits for other writers (on a
    network file system under a lock that holds across hosts, see resultsdb).
    {OUT}/{study}/run.json says what was recorded, and lets a rebuild from
    the raw records restore the scale, commit and executor. The executor is
    read from the records (Slurm job ids or none), not passed: a parameter
    would be "dryrun" in a dry run, which then re-ran this rule every time.
    """
    input:
        raw=study_records,
        results=f"{OUT}/{{study}}/results.csv",
        summary=f"{OUT}/{{study}}/summary.csv",
        tiers=f"{OUT}/{{study}}/provenance/tiers.json",
        nodes=f"{OUT}/{{study}}/provenance/nodes.json",
        verdict=verdict_of,
    output:
        f"{OUT}/{{study}}/run.json",
    log:
        f"{OUT}/{{study}}/logs/record_run.log",
    conda:
        "../../envs/python.yaml"
    params:
        db=DATABASE,
        machine=MACHINE,
        scale=config["scale"],
        noise=config.get("noise_threshold", 0.25),
        verdict=lambda wildcards, input: (
            f"--verdict {input.verdict}" if input.verdict else ""
        ),
    shell:
        "python -m tierbench.resultsdb_cli append --db {params.db:q} --machine {params.machine}"
        " --study {wildcards.study} --scale {params.scale}"
        " --noise-threshold {params.noise} --results {input.results}"
        " --summary {input.summary} {params.verdict} --provenance {input.tiers}"
        " --nodes {input.nodes} --out {output} {input.raw} 2> {log}"


rule predict:
    """The study's jobs on every tier of every machine in the database, from their profile
    and each tier's costs (tierbench.predict); checked where they ran."""
    input:
        f"{OUT}/{{study}}/run.json",
    output:
        f"{OUT}/{{study}}/prediction.json",
    log:
        f"{OUT}/{{study}}/logs/predict.log",
    conda:
        "../../envs/python.yaml"
    params:
        db=DATABASE,
    shell:
        "python -m tierbench.predict --db {params.db:q} --run-json {input} --out {output}"
        " 2> {log}"
