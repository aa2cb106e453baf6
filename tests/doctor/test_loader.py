"""The loader model against real shared libraries compiled for each test."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.fakes import build_lib, needs_cc
from tfaccel.doctor import loader as ld

pytestmark = needs_cc


def _loader(**kw: object) -> ld.Loader:
    kw.setdefault("ld_cache", ld.system_ld_cache())
    return ld.Loader(**kw)  # type: ignore[arg-type]


def test_read_elf_reports_soname_needed_and_runpath(tmp_path: Path) -> None:
    dep = build_lib(tmp_path / "dep", "libdep.so.1")
    top = build_lib(tmp_path / "top", "libtop.so.1", needs=[dep], runpath=["$ORIGIN/../dep"])
    info = ld.read_elf(top)
    assert info.soname == "libtop.so.1"
    assert "libdep.so.1" in info.needed
    assert info.runpath == ("$ORIGIN/../dep",)
    assert info.rpath == ()
    assert info.elfclass == 64


def test_not_elf_is_a_clear_error(tmp_path: Path) -> None:
    bogus = tmp_path / "libbogus.so.1"
    bogus.write_text("not an ELF file")
    with pytest.raises(ld.NotElfError, match=r"libbogus\.so\.1"):
        ld.read_elf(bogus)


def test_resolves_through_callers_runpath_with_origin(tmp_path: Path) -> None:
    build_lib(tmp_path / "site/nvidia/cudnn/lib", "libcudnn.so.9")
    caller_dir = tmp_path / "site/tensorflow"
    caller_dir.mkdir(parents=True)
    runpath = [
        ld.Candidate(
            ld.expand_origin("$ORIGIN/../nvidia/cudnn/lib", str(caller_dir)),
            "RUNPATH of tensorflow",
        )
    ]
    res = _loader(caller_runpath=runpath).resolve("libcudnn.so.9")
    assert res.ok
    assert res.path == str(tmp_path / "site/nvidia/cudnn/lib/libcudnn.so.9")
    assert res.origin == "RUNPATH of tensorflow"


def test_names_the_missing_dependency_inside_an_existing_library(tmp_path: Path) -> None:
    dep = build_lib(tmp_path / "elsewhere", "libcudnn_engines.so.9")
    top = build_lib(tmp_path / "lib", "libcudnn.so.9", needs=[dep], runpath=["$ORIGIN"])
    res = _loader(ld_library_path=[str(tmp_path / "lib")]).resolve("libcudnn.so.9")
    assert res.path == str(top)
    assert not res.ok
    assert [(m.soname, m.needed_by) for m in res.missing] == [("libcudnn_engines.so.9", str(top))]
    # The real dynamic loader agrees, and names the same file.
    errors = ld.probe_dlopen([str(top)])
    assert errors[str(top)] is not None and "libcudnn_engines.so.9" in errors[str(top)]


def test_dependency_found_through_the_dependents_own_runpath(tmp_path: Path) -> None:
    dep = build_lib(tmp_path / "lib", "libcublasLt.so.12")
    build_lib(tmp_path / "lib", "libcublas.so.12", needs=[dep], runpath=["$ORIGIN"])
    res = _loader(ld_library_path=[str(tmp_path / "lib")]).resolve("libcublas.so.12")
    assert res.ok, res
    assert ld.probe_dlopen([res.path or ""]) == {res.path: None}


def test_ld_library_path_wins_over_runpath_and_shadows_it(tmp_path: Path) -> None:
    wheel = build_lib(tmp_path / "wheel", "libcudart.so.12")
    system = build_lib(tmp_path / "system", "libcudart.so.12")
    res = _loader(
        ld_library_path=[str(tmp_path / "system")],
        caller_runpath=[ld.Candidate(str(tmp_path / "wheel"), "RUNPATH of tf")],
    ).resolve("libcudart.so.12")
    assert res.path == str(system)
    assert res.origin == "LD_LIBRARY_PATH"
    assert res.shadowed == (str(wheel),)


def test_rpath_wins_over_ld_library_path_only_without_runpath(tmp_path: Path) -> None:
    a = build_lib(tmp_path / "a", "libx.so.1")
    b = build_lib(tmp_path / "b", "libx.so.1")
    loader = _loader(ld_library_path=[str(tmp_path / "b")])
    order = loader.search_order(rpath=[ld.Candidate(str(tmp_path / "a"), "RPATH")])
    assert [c.directory for c in order][:2] == [str(tmp_path / "a"), str(tmp_path / "b")]
    with_runpath = loader.search_order(
        rpath=[ld.Candidate(str(tmp_path / "a"), "RPATH")],
        runpath=[ld.Candidate(str(tmp_path / "a"), "RUNPATH")],
    )
    assert with_runpath[0].directory == str(tmp_path / "b")  # RPATH ignored
    assert a.exists() and b.exists()


def test_rpath_of_a_dependency_is_followed(tmp_path: Path) -> None:
    dep = build_lib(tmp_path / "deps", "libdep.so.1")
    build_lib(tmp_path / "lib", "libtop.so.1", needs=[dep], rpath=["$ORIGIN/../deps"])
    res = _loader(ld_library_path=[str(tmp_path / "lib")]).resolve("libtop.so.1")
    assert res.ok


def test_not_found_anywhere(tmp_path: Path) -> None:
    res = _loader(ld_library_path=[str(tmp_path)], ld_cache={}, default_dirs=()).resolve(
        "libnvJitLink.so.12"
    )
    assert res.path is None and not res.ok


@pytest.mark.parametrize(
    ("content", "why"),
    [(os.urandom(4096), "invalid ELF header"), (b"\x7fELF", "file too short")],
)
def test_a_file_that_is_no_library_stops_the_loader_there(
    tmp_path: Path, content: bytes, why: str
) -> None:
    (tmp_path / "bad").mkdir()
    bad = tmp_path / "bad/libnccl.so.2"
    bad.write_bytes(content)
    good = build_lib(tmp_path / "good", "libnccl.so.2")
    path = [str(tmp_path / "bad"), str(tmp_path / "good")]
    res = _loader(ld_library_path=path).resolve("libnccl.so.2")
    assert res.path == str(bad) and not res.ok
    assert res.error is not None and res.error.startswith(f"not a loadable library ({why}")
    assert res.shadowed == (str(good),)
    # The real dynamic loader agrees: it stops at the bad file, never reaching the good one.
    real = ld.probe_dlopen(["libnccl.so.2"], env={**os.environ, "LD_LIBRARY_PATH": ":".join(path)})
    assert real["libnccl.so.2"] is not None and why in real["libnccl.so.2"]


def test_a_dependency_that_is_no_library_is_named(tmp_path: Path) -> None:
    dep = build_lib(tmp_path / "real", "libdep.so.1")
    build_lib(tmp_path / "lib", "libtop.so.1", needs=[dep], runpath=["$ORIGIN/../deps"])
    (tmp_path / "deps").mkdir()
    (tmp_path / "deps/libdep.so.1").write_bytes(os.urandom(1024))
    res = _loader(ld_library_path=[str(tmp_path / "lib")]).resolve("libtop.so.1")
    assert not res.ok and res.error is not None
    assert f"libdep.so.1 resolves to {tmp_path / 'deps/libdep.so.1'}" in res.error


def test_a_dependency_resolves_from_the_object_that_needs_it(tmp_path: Path) -> None:
    jit = build_lib(tmp_path / "nvjitlink/lib", "libnvJitLink.so.12")
    sparse = build_lib(
        tmp_path / "cusparse/lib",
        "libcusparse.so.12",
        needs=[jit],
        runpath=["$ORIGIN/../../nvjitlink/lib"],
    )
    loader = _loader(ld_cache={}, default_dirs=())
    assert loader.resolve("libnvJitLink.so.12").path is None  # not on the caller's path
    res = loader.resolve("libnvJitLink.so.12", needed_by=str(sparse))
    assert res.ok and res.path == str(jit)


def test_parse_ldconfig_keeps_the_right_word_size() -> None:
    text = (
        "3 libs found in cache `/etc/ld.so.cache'\n"
        "\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1\n"
        "\tlibcuda.so.1 (libc6) => /usr/lib/i386-linux-gnu/libcuda.so.1\n"
        "\tlibz.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libz.so.1\n"
    )
    cache = ld.parse_ldconfig(text, want_64bit=True)
    assert cache == {
        "libcuda.so.1": ["/usr/lib/x86_64-linux-gnu/libcuda.so.1"],
        "libz.so.1": ["/lib/x86_64-linux-gnu/libz.so.1"],
    }
    assert ld.parse_ldconfig(text, want_64bit=False) == {
        "libcuda.so.1": ["/usr/lib/i386-linux-gnu/libcuda.so.1"]
    }


def test_version_from_filename() -> None:
    assert ld.version_from_filename("/x/libcudnn.so.9.3.0", "libcudnn.so.9") == "9.3.0"
    assert ld.version_from_filename("/x/libcudnn.so.9", "libcudnn.so.9") == "9"
    assert ld.version_from_filename("/x/libfoo.so", "libfoo.so") is None


def test_expand_origin_normalises() -> None:
    assert ld.expand_origin("$ORIGIN/../nvidia/cublas/lib", "/s/tensorflow") == os.path.normpath(
        "/s/nvidia/cublas/lib"
    )
    assert ld.expand_origin("${ORIGIN}/lib", "/a") == "/a/lib"


def test_a_library_cut_short_is_named_truncated_with_both_sizes(tmp_path: Path) -> None:
    """An ELF file with a valid header cut short is not "invalid ELF header": the
    fault is named, with the size its headers describe (dlopen itself reads past the end
    of such a file and crashes the process, hence a child for the real probe)."""
    whole = build_lib(tmp_path / "whole", "libcudnn.so.9")
    size = whole.stat().st_size
    (tmp_path / "cut").mkdir()
    cut = tmp_path / "cut/libcudnn.so.9"
    cut.write_bytes(whole.read_bytes()[: size // 2])
    res = _loader(ld_library_path=[str(cut.parent), str(whole.parent)]).resolve("libcudnn.so.9")
    assert res.path == str(cut) and not res.ok and res.error is not None
    assert "invalid ELF header" not in res.error
    assert f"truncated: the file ends at {size // 2:,} bytes" in res.error
    assert f"describe {size:,}" in res.error


def test_a_text_file_under_a_librarys_name_says_what_it_starts_with(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib/libnccl.so.2").write_text("version https://git-lfs.github.com/spec/v1\n")
    res = _loader(ld_library_path=[str(tmp_path / "lib")]).resolve("libnccl.so.2")
    assert res.error is not None and "not an ELF file, it is text: 'version https" in res.error
