"""docs/workloads.md, written from the registry and the parameter schemas.

The schemas are the one place a parameter, its type and its default are
written; this page is generated from them so the documentation cannot drift
(tests/test_registry.py fails when the committed page is stale).

    python -m tierbench.workload_docs > docs/workloads.md
"""

from __future__ import annotations

import json

from .schemas import load
from .workloads import Workload, registry

HEADER = """# Workloads

Generated from the workload registry (`workflow/tierbench/workloads/`) and the
parameter schemas (`workflow/schemas/params/`) by
`python -m tierbench.workload_docs > docs/workloads.md`; edit those, not
this page. Any parameter given as a list in a study is an axis: every value
becomes its own point. A parameter a study leaves out takes its default, and
the default is recorded with the point (results.csv has every parameter).
"""


def kind(spec: dict) -> str:
    """A short reading of a property's JSON schema: its type, choices or bounds."""
    if "enum" in spec:
        return " \\| ".join(f"`{value}`" for value in spec["enum"])
    if "const" in spec:
        return f"`{spec['const']}`"
    if "oneOf" in spec or "anyOf" in spec:
        return " or ".join(kind(option) for option in spec.get("oneOf", spec.get("anyOf")))
    if "$ref" in spec:
        return "size (e.g. 64MiB, 4k)" if spec["$ref"].endswith("/size") else spec["$ref"]
    text = spec.get("type", "any")
    text = " or ".join(text) if isinstance(text, list) else text
    bounds = [f">= {spec['minimum']}"] if "minimum" in spec else []
    bounds += [f"<= {spec['maximum']}"] if "maximum" in spec else []
    return f"{text} {', '.join(bounds)}".strip()


def section(workload: Workload) -> str:
    schema = load(workload.schema)
    required = set(schema.get("required", []))
    tools = ", ".join(f"`{t.command}` (Debian: {t.package})" for t in workload.tools) or "none"
    lines = [
        f"## {workload.name}",
        "",
        f"{workload.summary}.",
        "",
        f"Figures: `{workload.family}`; tools: {tools}; conda env: `envs/{workload.env}.yaml`"
        + ("; started through MPI" if workload.mpi else "")
        + ".",
        "",
        "| parameter | values | default | meaning |",
        "|---|---|---|---|",
    ]
    for name, spec in schema.get("properties", {}).items():
        default = (
            "required"
            if name in required
            else json.dumps(spec["default"])
            if "default" in spec
            else "-"
        )
        meaning = " ".join(str(spec.get("description", "")).split()).replace("|", "\\|")
        lines.append(f"| `{name}` | {kind(spec)} | {default} | {meaning} |")
    for given, overrides in schema.get("defaults_with", {}).items():
        changed = ", ".join(f"`{name}` {json.dumps(value)}" for name, value in overrides.items())
        lines += ["", f"With `{given}` given, the defaults are: {changed}."]
    if schema.get("notes"):
        lines += ["", str(schema["notes"]).strip()]
    return "\n".join(lines)


def page() -> str:
    return "\n\n".join([HEADER.rstrip(), *(section(w) for w in registry().values())]) + "\n"


if __name__ == "__main__":
    print(page(), end="")
