"""One table says which Debian package installs each command: the set-up, the preflight,
the workloads and the cluster on one machine all read it, and nothing restates it."""

from __future__ import annotations

import ast
import re

import pytest
from conftest import REPO
from tierbench import needs, packages
from tierbench.minicluster import base as minicluster_base
from tierbench.workloads import Tool, registry

PACKAGE_CODE = REPO / "workflow" / "tierbench"


def test_a_tool_is_a_command_whose_package_the_table_names():
    assert Tool("ccx").package == "calculix-ccx" and Tool("ccx").version == ("--version",)
    with pytest.raises(LookupError, match="packages.py"):
        Tool("no-such-command")
    with pytest.raises(TypeError):
        Tool("ccx", "calculix-ccx")  # the package is the table's, never restated


def test_every_command_set_up_checks_is_in_the_table():
    commands = {t.command for w in registry().values() for t in w.tools}
    commands |= {*needs.MOUNTS, *needs.TRACING, *minicluster_base.COMMANDS}
    assert commands == set(packages.PACKAGES)


def _literals(path):
    """Every string constant of a module, the literal parts of f-strings included."""
    tree = ast.parse(path.read_text())
    return [
        n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    ]


def test_no_module_but_the_table_names_a_package_of_its_commands():
    """A package named outside the table drifts from it; a message asks the table instead.
    Packages named like a command or a workload cannot be told apart and are left out."""
    distinct = {p for p in packages.PACKAGES.values() if p not in packages.PACKAGES}
    distinct -= set(registry()) | {"munge"}  # a workload; munged's folders are named munge
    named = re.compile(r"(?<![\w.-])(" + "|".join(map(re.escape, sorted(distinct))) + r")(?![\w-])")
    found = [
        f"{path.relative_to(REPO)}: {text!r}"
        for path in sorted(PACKAGE_CODE.rglob("*.py"))
        if path.name != "packages.py"
        for text in _literals(path)
        if named.search(text)
    ]
    assert not found, "\n".join(found)
