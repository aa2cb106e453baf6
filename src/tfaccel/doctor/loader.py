"""Resolve shared libraries the way the Linux dynamic loader (ld.so) does.

TensorFlow dlopen()s its CUDA libraries by soname (libcudnn.so.9, ...). The loader
looks, in order, in: the caller's DT_RPATH (only if it has no DT_RUNPATH),
LD_LIBRARY_PATH, the caller's DT_RUNPATH, the ld.so cache, then the default
directories. A library is used only if its ELF class and machine match, and it loads
only if each of its own DT_NEEDED entries resolves in turn (with *its* RPATH/RUNPATH).

This module reproduces that search from files on disk (ELF headers are read with
pyelftools), so the doctor can name the library that is missing *and* the dependency
missing inside a library that exists, instead of trusting TensorFlow's log line.
`probe_dlopen` then confirms with a real dlopen() in a child process.
"""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

DEFAULT_DIRS: tuple[str, ...] = (
    "/lib64",
    "/usr/lib64",
    "/lib",
    "/usr/lib",
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib/aarch64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
)


@dataclass(frozen=True)
class ElfInfo:
    """The parts of an ELF shared object that matter to the loader."""

    path: str
    soname: str | None
    needed: tuple[str, ...]
    rpath: tuple[str, ...]
    runpath: tuple[str, ...]
    elfclass: int  # 32 or 64
    machine: str  # "EM_X86_64"


class NotElfError(ValueError):
    """The file is not a readable ELF object."""


@lru_cache(maxsize=4096)
def _read_elf_cached(path: str, mtime_ns: int) -> ElfInfo:
    from elftools.common.exceptions import ELFError
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile

    try:
        with open(path, "rb") as handle:
            elf = ELFFile(handle)
            soname = None
            needed: list[str] = []
            rpath: list[str] = []
            runpath: list[str] = []
            for section in elf.iter_sections():
                if not isinstance(section, DynamicSection):
                    continue
                tag: Any
                for tag in section.iter_tags():
                    if tag.entry.d_tag == "DT_NEEDED":
                        needed.append(tag.needed)
                    elif tag.entry.d_tag == "DT_SONAME":
                        soname = tag.soname
                    elif tag.entry.d_tag == "DT_RPATH":
                        rpath.extend(entry for entry in tag.rpath.split(":") if entry)
                    elif tag.entry.d_tag == "DT_RUNPATH":
                        runpath.extend(entry for entry in tag.runpath.split(":") if entry)
            return ElfInfo(
                path=path,
                soname=soname,
                needed=tuple(needed),
                rpath=tuple(dict.fromkeys(rpath)),
                runpath=tuple(dict.fromkeys(runpath)),
                elfclass=elf.elfclass,
                machine=str(elf["e_machine"]),
            )
    except (ELFError, OSError, ValueError, KeyError) as exc:
        raise NotElfError(f"{path}: {exc}") from exc


def read_elf(path: str | os.PathLike[str]) -> ElfInfo:
    """Read the dynamic section of an ELF file (cached by path and mtime)."""
    file = os.fspath(path)
    try:
        stat = os.stat(file)
    except OSError as exc:
        raise NotElfError(f"{file}: {exc}") from exc
    return _read_elf_cached(file, stat.st_mtime_ns)


def expand_origin(entry: str, origin_dir: str) -> str:
    """Expand $ORIGIN / ${ORIGIN} in an RPATH or RUNPATH entry."""
    return os.path.normpath(entry.replace("${ORIGIN}", origin_dir).replace("$ORIGIN", origin_dir))


_LDCONFIG_LINE = re.compile(r"^\s*(\S+)\s+\(([^)]*)\)\s+=>\s+(\S+)\s*$")


def parse_ldconfig(text: str, want_64bit: bool = True) -> dict[str, list[str]]:
    """Parse `ldconfig -p` output into {soname: [paths]} for the host's word size."""
    cache: dict[str, list[str]] = {}
    for line in text.splitlines():
        match = _LDCONFIG_LINE.match(line)
        if not match:
            continue
        name, flags, path = match.groups()
        is_64 = "64" in flags
        if is_64 != want_64bit:
            continue
        cache.setdefault(name, []).append(path)
    return cache


def system_ld_cache() -> dict[str, list[str]]:
    """The ld.so cache of this machine ({} where ldconfig is absent)."""
    for exe in ("ldconfig", "/sbin/ldconfig", "/usr/sbin/ldconfig"):
        try:
            out = subprocess.run(
                [exe, "-p"], capture_output=True, text=True, timeout=20, check=False
            ).stdout
        except (OSError, subprocess.SubprocessError):
            continue
        if out:
            return parse_ldconfig(out, want_64bit=sys.maxsize > 2**32)
    return {}


@dataclass(frozen=True)
class Candidate:
    """A directory searched, and why the loader searches it."""

    directory: str
    origin: str  # "LD_LIBRARY_PATH", "RUNPATH of libtensorflow_framework.so.2", ...


@dataclass(frozen=True)
class MissingDependency:
    """A DT_NEEDED entry that the loader cannot find."""

    soname: str
    needed_by: str  # path of the object that needs it


@dataclass(frozen=True)
class Resolution:
    """Where a library resolves, which copies it shadows, and what it lacks."""

    soname: str
    path: str | None  # the copy the loader takes; None if not found
    origin: str | None  # why that directory was searched
    realpath: str | None
    shadowed: tuple[str, ...] = ()  # other matching copies later in the search order
    missing: tuple[MissingDependency, ...] = ()
    wrong_arch: tuple[str, ...] = ()  # files with the name that the loader skips
    error: str | None = None
    unloadable: str | None = None  # the file, no library, where the loader stops

    @property
    def ok(self) -> bool:
        return self.path is not None and not self.missing and self.error is None


@dataclass
class Loader:
    """A model of ld.so for one process environment.

    Args:
        ld_library_path: the LD_LIBRARY_PATH entries, in order.
        caller_runpath: the RUNPATH of the object that dlopen()s (TensorFlow's library),
            already expanded, each with a label saying where it comes from.
        caller_rpath: the caller's DT_RPATH (used only if it has no RUNPATH).
        ld_cache: {soname: [paths]} as `ldconfig -p` reports.
        default_dirs: the loader's trusted directories.
    """

    ld_library_path: Sequence[str] = ()
    caller_runpath: Sequence[Candidate] = ()
    caller_rpath: Sequence[Candidate] = ()
    ld_cache: Mapping[str, Sequence[str]] = field(default_factory=dict)
    default_dirs: Sequence[str] = DEFAULT_DIRS
    elfclass: int = 64 if sys.maxsize > 2**32 else 32
    machine: str | None = None

    def _matches_arch(self, info: ElfInfo) -> bool:
        if info.elfclass != self.elfclass:
            return False
        return self.machine is None or info.machine == self.machine

    def search_order(
        self,
        rpath: Sequence[Candidate] = (),
        runpath: Sequence[Candidate] = (),
    ) -> list[Candidate]:
        """The directories the loader walks for a DT_NEEDED of an object with these paths."""
        order: list[Candidate] = []
        if not runpath:
            order.extend(rpath)
        order.extend(
            Candidate(directory, "LD_LIBRARY_PATH")
            for directory in self.ld_library_path
            if directory
        )
        order.extend(runpath)
        return order

    def _locate(
        self, soname: str, order: Iterable[Candidate]
    ) -> tuple[list[tuple[str, str]], list[str], tuple[str, str, str] | None]:
        """All usable copies of soname, in search order; the skipped wrong-arch files; and
        (path, origin, why) of a file met before any usable copy that is not an ELF object
        at all. ld.so skips an ELF object of another class or machine, but stops with an
        error ("invalid ELF header", "file too short") at a file that is not one."""
        found: list[tuple[str, str]] = []
        wrong: list[str] = []
        blocked: list[tuple[str, str, str]] = []
        seen: set[str] = set()

        def consider(path: str, origin: str) -> None:
            if path in seen or not os.path.isfile(path):
                return
            seen.add(path)
            try:
                info = read_elf(path)
            except NotElfError:
                if not found and not blocked and os.access(path, os.R_OK):
                    blocked.append((path, origin, _not_loadable_reason(path)))
                wrong.append(path)
                return
            if self._matches_arch(info):
                found.append((path, origin))
            else:
                wrong.append(path)

        if "/" in soname:
            consider(soname, "absolute path")
            return found, wrong, blocked[0] if blocked else None
        for cand in order:
            consider(os.path.join(cand.directory, soname), cand.origin)
        for path in self.ld_cache.get(soname, ()):
            consider(path, "ld.so cache (ldconfig -p)")
        for directory in self.default_dirs:
            consider(os.path.join(directory, soname), "default directory")
        return found, wrong, blocked[0] if blocked else None

    def _object_paths(self, info: ElfInfo, path: str) -> tuple[list[Candidate], list[Candidate]]:
        origin_dir = os.path.dirname(path)
        label = os.path.basename(path)
        rpath = [
            Candidate(expand_origin(entry, origin_dir), f"RPATH of {label}") for entry in info.rpath
        ]
        runpath = [
            Candidate(expand_origin(entry, origin_dir), f"RUNPATH of {label}")
            for entry in info.runpath
        ]
        return rpath, runpath

    def resolve(self, soname: str, needed_by: str | None = None) -> Resolution:
        """Resolve `soname` as dlopen() from the caller would (or, with `needed_by`, as
        that object's DT_NEEDED entry), and check its whole tree."""
        order = self._order_of(needed_by)
        found, wrong, blocked = self._locate(soname, order)
        if blocked is not None:
            path, origin, why = blocked
            return Resolution(
                soname,
                path,
                origin,
                os.path.realpath(path),
                shadowed=tuple(shadow for shadow, _ in found),
                wrong_arch=tuple(other for other in wrong if other != path),
                error=f"not a loadable library ({why})",
                unloadable=path,
            )
        if not found:
            return Resolution(soname, None, None, None, wrong_arch=tuple(wrong))
        path, origin = found[0]
        missing, error, unloadable = self._check_tree(path)
        return Resolution(
            soname=soname,
            path=path,
            origin=origin,
            realpath=os.path.realpath(path),
            shadowed=tuple(shadow for shadow, _ in found[1:]),
            missing=tuple(missing),
            wrong_arch=tuple(wrong),
            error=error,
            unloadable=unloadable,
        )

    def _order_of(self, needed_by: str | None) -> list[Candidate]:
        if needed_by is None:
            return self.search_order(self.caller_rpath, self.caller_runpath)
        try:
            return self.search_order(*self._object_paths(read_elf(needed_by), needed_by))
        except NotElfError:
            return self.search_order()

    def _check_tree(self, root: str) -> tuple[list[MissingDependency], str | None, str | None]:
        """Walk DT_NEEDED breadth-first; a soname already loaded is reused, as ld.so does.
        (missing dependencies, the error that stops the loader, the file it stops at)."""
        loaded: dict[str, str] = {}
        missing: list[MissingDependency] = []
        queue: list[str] = [root]
        visited: set[str] = set()
        while queue:
            path = queue.pop(0)
            if path in visited:
                continue
            visited.add(path)
            try:
                info = read_elf(path)
            except NotElfError as exc:
                return missing, str(exc), None
            if info.soname:
                loaded.setdefault(info.soname, path)
            rpath, runpath = self._object_paths(info, path)
            order = self.search_order(rpath, runpath)
            for dep in info.needed:
                if dep in loaded:
                    continue
                dep_found, _, blocked = self._locate(dep, order)
                if blocked is not None:
                    bad, _, why = blocked
                    return missing, f"its dependency {dep} resolves to {bad}: {why}", bad
                if not dep_found:
                    missing.append(MissingDependency(dep, path))
                    loaded[dep] = ""
                    continue
                loaded[dep] = dep_found[0][0]
                queue.append(dep_found[0][0])
        return missing, None, None


def _not_loadable_reason(path: str) -> str:
    """Why a file the loader meets is no library, precisely: ld.so's own words where it
    has them ("invalid ELF header" for a file that is not ELF, "file too short"), and a
    file cut short named so (dlopen itself reads past its end and crashes the process)."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as handle:
            head = handle.read(4096)
    except OSError as exc:
        return str(exc)
    if not head.startswith(b"\x7fELF"):
        return "invalid ELF header: not an ELF file" + _text_start(head)
    if len(head) < 64:
        return "file too short"
    need = _elf_extent(head)
    if need > size:
        return (
            f"truncated: the file ends at {size:,} bytes and its ELF headers describe "
            f"{need:,} (an interrupted download or copy)"
        )
    return "invalid ELF header: its ELF headers do not parse (a corrupt file)"


def _text_start(head: bytes) -> str:
    """', it is text: "..."' for a file of text (a linker script, an LFS pointer)."""
    start = head[:48]
    if start and all(32 <= byte < 127 or byte in (9, 10, 13) for byte in start):
        return f", it is text: {start.decode().splitlines()[0][:40]!r}"
    return ""


def _elf_extent(head: bytes) -> int:
    """How many bytes an ELF file's own headers say it holds: the end of its section
    header table, and of each segment its program headers (where read) describe."""
    wide, order = head[4] == 2, "<" if head[5] != 2 else ">"
    fields = "QQ" if wide else "II"
    offset = 32 if wide else 28
    phoff, shoff = struct.unpack_from(order + fields, head, offset)
    phent, phnum, shent, shnum = struct.unpack_from(order + "4H", head, 54 if wide else 42)
    ends = [shoff + shent * shnum, phoff + phent * phnum]
    for i in range(phnum):
        off = phoff + i * phent
        if off + phent > len(head):
            break
        if wide:
            p_offset, p_filesz = struct.unpack_from(order + "8xQ16xQ", head, off)
        else:
            p_offset, p_filesz = struct.unpack_from(order + "4xI8xI", head, off)
        ends.append(p_offset + p_filesz)
    return max(ends)


_DLOPEN_SCRIPT = r"""
import ctypes, json, sys
out = {}
for p in json.loads(sys.argv[1]):
    try:
        ctypes.CDLL(p, mode=getattr(ctypes, "RTLD_LOCAL", 0))
        out[p] = None
    except OSError as e:
        out[p] = str(e)
print(json.dumps(out))
"""


def probe_dlopen(
    paths: Sequence[str], env: Mapping[str, str] | None = None, timeout_s: float = 60.0
) -> dict[str, str | None]:
    """dlopen() each path in a child process; {path: None if it loaded, else the error}.

    A child process keeps a library that crashes on load from taking the doctor down.
    """
    if not paths:
        return {}
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _DLOPEN_SCRIPT, json.dumps(list(paths))],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=dict(env) if env is not None else None,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {path: f"dlopen probe timed out after {timeout_s:.0f} s" for path in paths}
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        why = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
        return {path: f"dlopen probe crashed: {why}" for path in paths}
    result: dict[str, str | None] = json.loads(lines[-1])
    return result


def version_from_filename(path: str, soname: str) -> str | None:
    """libcudnn.so.9.3.0 -> "9.3.0"; the soname itself (libcudnn.so.9) -> "9"."""
    name = Path(path).name
    match = re.search(r"\.so\.([0-9][0-9.]*)$", name)
    if match:
        return match.group(1)
    match = re.search(r"\.so\.([0-9][0-9.]*)$", soname)
    return match.group(1) if match else None
