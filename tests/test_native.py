"""The C helper of the OpenFOAM writer makes the same files as Python, and fails the same way."""

import errno

import numpy as np
import pytest
from tierbench import native
from tierbench.workloads.cfd import cfd_writer, foam, foam_write


@pytest.fixture
def helper():
    module = native.foamio()
    if module is None:
        pytest.skip(f"the C helper is not built here: {native.status('foamio')}")
    return module


def tree(root):
    return {
        str(path.relative_to(root)): path.read_bytes() if path.is_file() else None
        for path in sorted(root.rglob("*"))
    }


@pytest.mark.parametrize("fmt", foam.FORMATS)
def test_c_and_python_write_the_same_files(tmp_path, helper, fmt):
    fields = {**cfd_writer.static_fields(7, 0), "p": np.linspace(0.0, 1.0, 7)}
    counts = {}
    for name in ("c", "python"):
        root = tmp_path / name
        root.mkdir()
        writer = foam_write.UncollatedWriter(root, fields, fmt, fsync=name == "c")
        if name == "python":
            writer.native = None
        counts[name] = [vars(writer.write(foam.time_name(step), step)) for step in (1, 10, 100)]
    assert counts["c"] == counts["python"]
    assert tree(tmp_path / "c") == tree(tmp_path / "python")
    assert counts["c"][0]["files"] == foam.FILES_PER_WRITE
    assert counts["c"][0]["bytes"] == foam.rank_write_bytes(7, fmt, "1", 1)


def test_c_helper_raises_what_os_would(tmp_path, helper):
    (tmp_path / "file").write_bytes(b"")
    files = ((bytes(tmp_path / "file" / "1" / "U"), ((b"x",),)),)
    for write_time in (helper.write_time, foam_write.write_files):
        with pytest.raises(NotADirectoryError) as error:
            write_time(files, False)
        assert error.value.errno == errno.ENOTDIR
        assert "file" in str(error.value.filename)


@pytest.mark.parametrize("native_writer", [True, False])
def test_a_time_written_again_makes_no_folder(tmp_path, helper, native_writer):
    """As OpenFOAM's mkDir: an existing folder is no error, so the count says 0 made (the
    proxy's check of folders against the layout catches a time written twice)."""
    fields = {**cfd_writer.static_fields(1, 0), "p": np.zeros(1)}
    writer = foam_write.UncollatedWriter(tmp_path, fields, "binary", False)
    if not native_writer:
        writer.native = None
    assert writer.write("1", 1).dirs == 3
    again = writer.write("1", 1)
    assert (again.dirs, again.files) == (0, foam.FILES_PER_WRITE)


def test_switched_off_it_says_why(monkeypatch):
    monkeypatch.setattr(native, "_state", {})
    monkeypatch.setenv(native.SWITCH, "0")
    assert native.foamio() is None
    assert native.status("foamio") == f"python ({native.SWITCH}=0)"


def test_without_a_cpp_compiler_it_names_the_package(monkeypatch, tmp_path):
    """The ascii numbers go through libstdc++'s streams (csrc/foamtext.cpp), so no g++, no
    helper, and the status says what to install."""
    monkeypatch.setattr(native, "_state", {})
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    which = native.shutil.which
    monkeypatch.setattr(native.shutil, "which", lambda tool: None if tool == "g++" else which(tool))
    assert native.foamio() is None
    assert native.status("foamio") == "python (no C++ compiler (g++) on PATH (install g++))"
    assert not list(tmp_path.rglob("*.so"))
