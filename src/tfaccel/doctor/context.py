"""Lazily computed facts shared by the doctor's checks (each probe runs once)."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from tfaccel import _tf, data
from tfaccel.doctor import loader as ld
from tfaccel.doctor import probes
from tfaccel.hardware import nvml


@dataclass(frozen=True)
class LibraryRow:
    """One CUDA library TensorFlow will dlopen, and how it resolves."""

    key: str  # "cudnn"
    soname: str  # "libcudnn.so.9"
    wheel: str | None  # pip distribution that provides it, "nvidia-cudnn-cu12"
    resolution: ld.Resolution
    version: str | None  # of the copy the loader takes
    provider: str | None  # "nvidia-cudnn-cu12 9.3.0.75", "system", ...
    dlopen_error: str | None


@dataclass(frozen=True)
class Copy:
    """A file on disk carrying a library's soname."""

    path: str
    realpath: str
    version: str | None
    provider: str | None


@dataclass
class DoctorContext:
    """Inputs of the checks. Every field can be injected by tests; the rest is probed."""

    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    cwd: str = field(default_factory=os.getcwd)
    dist_paths: Sequence[str] | None = None
    nvml_lib: Any = None
    run_tf_probe: bool = True
    tf_timeout_s: float = 180.0
    dlopen: bool = True
    tf_dir_override: Path | None = None
    ld_cache_override: Mapping[str, Sequence[str]] | None = None
    site_dirs_override: Sequence[str] | None = None
    platform_override: probes.PlatformFacts | None = None
    tf_runtime_override: probes.TfRuntime | None = None
    xla_flags_override: probes.XlaFlagsProbe | None = None
    driver_override: nvml.DriverInfo | None = None

    # --- installation -------------------------------------------------------------
    @cached_property
    def distributions(self) -> dict[str, probes.Distribution]:
        return probes.installed_distributions(self.dist_paths)

    @cached_property
    def tf_dists(self) -> list[probes.Distribution]:
        return [
            self.distributions[name] for name in _tf.TF_DISTRIBUTIONS if name in self.distributions
        ]

    @cached_property
    def tf_dist(self) -> probes.Distribution | None:
        """The TF distribution that owns the import package (the one others depend on)."""
        dists = self.primary_tf_dists
        return dists[0] if dists else None

    @cached_property
    def primary_tf_dists(self) -> list[probes.Distribution]:
        """TF distributions that no other installed TF distribution requires."""
        names = {dist.name for dist in self.tf_dists}
        required: set[str] = set()
        for dist in self.tf_dists:
            for other in names - {dist.name}:
                if probes.requirement_for(dist, other) is not None:
                    required.add(other)
        return [dist for dist in self.tf_dists if dist.name not in required]

    @cached_property
    def tf_dir(self) -> Path | None:
        return self.tf_dir_override or _tf.tf_package_dir()

    @cached_property
    def build_info(self) -> dict[str, Any] | None:
        return probes.read_build_info(self.tf_dir)

    @cached_property
    def tf_version(self) -> str | None:
        return self.tf_dist.version if self.tf_dist else None

    @cached_property
    def cuda_major(self) -> str | None:
        version = (self.build_info or {}).get("cuda_version")
        return str(version).split(".")[0] if version else None

    @cached_property
    def cudnn_major(self) -> str | None:
        version = (self.build_info or {}).get("cudnn_version")
        return str(version).split(".")[0] if version else None

    # --- machine ----------------------------------------------------------------------
    @cached_property
    def platform(self) -> probes.PlatformFacts:
        return self.platform_override or probes.platform_facts(self.env)

    @cached_property
    def driver(self) -> nvml.DriverInfo:
        if self.driver_override is not None:
            return self.driver_override
        return nvml.driver_info(self.nvml_lib)

    @cached_property
    def xla_flags(self) -> probes.XlaFlagsProbe:
        if self.xla_flags_override is not None:
            return self.xla_flags_override
        if not self.run_tf_probe or self.tf_dir is None:
            return probes.XlaFlagsProbe(ran=False)
        return probes.xla_flags_probe(self.env)

    @cached_property
    def tf_runtime(self) -> probes.TfRuntime:
        if self.tf_runtime_override is not None:
            return self.tf_runtime_override
        if not self.run_tf_probe or self.tf_dir is None:
            return probes.TfRuntime(ran=False)
        return probes.tf_runtime_probe(self.tf_timeout_s, self.env)

    @cached_property
    def site_dirs(self) -> list[str]:
        if self.site_dirs_override is not None:
            return list(self.site_dirs_override)
        dirs = probes.site_directories()
        if self.tf_dir is not None and str(self.tf_dir.parent) not in dirs:
            dirs.insert(0, str(self.tf_dir.parent))
        return dirs

    @cached_property
    def wheel_index(self) -> dict[str, probes.WheelFile]:
        return probes.wheel_file_index(self.site_dirs)

    # --- the loader -------------------------------------------------------------------
    @cached_property
    def ld_cache(self) -> Mapping[str, Sequence[str]]:
        if self.ld_cache_override is not None:
            return self.ld_cache_override
        return ld.system_ld_cache()

    @cached_property
    def tf_caller(self) -> tuple[list[ld.Candidate], list[ld.Candidate]]:
        """(RPATH, RUNPATH) of TensorFlow's libraries, which call dlopen()."""
        rpath: list[ld.Candidate] = []
        runpath: list[ld.Candidate] = []
        if self.tf_dir is None:
            return rpath, runpath
        for rel in (
            "libtensorflow_framework.so.2",
            "libtensorflow_cc.so.2",
            "python/_pywrap_tensorflow_internal.so",
        ):
            path = self.tf_dir / rel
            if not path.exists():
                continue
            try:
                info = ld.read_elf(path)
            except ld.NotElfError:
                continue
            origin = str(path.parent)
            for entries, out, kind in (
                (info.rpath, rpath, "RPATH"),
                (info.runpath, runpath, "RUNPATH"),
            ):
                for entry in entries:
                    directory = ld.expand_origin(entry, origin)
                    if "_solib_" in directory or ".runfiles" in directory:
                        continue  # build-tree leftovers of TensorFlow's own build
                    if all(candidate.directory != directory for candidate in out):
                        out.append(ld.Candidate(directory, f"{kind} of tensorflow/{rel}"))
        return rpath, runpath

    @cached_property
    def loader(self) -> ld.Loader:
        rpath, runpath = self.tf_caller
        ldlp = [path for path in self.env.get("LD_LIBRARY_PATH", "").split(":") if path]
        return ld.Loader(
            ld_library_path=ldlp,
            caller_runpath=runpath,
            caller_rpath=rpath,
            ld_cache=self.ld_cache,
        )

    def provider_of(self, path: str | None) -> tuple[str | None, str | None]:
        """(version, provider) of a library file: its pip wheel, else its file name. A
        file that is no ELF object (cut short, a text file) has no version: its name or
        its wheel says what it should have been, not what it is."""
        if not path:
            return None, None
        real = os.path.realpath(path)
        wheel = self.wheel_index.get(real)
        provider = f"{wheel.distribution} {wheel.version} (pip)" if wheel else None
        try:
            ld.read_elf(real)
        except ld.NotElfError:
            return None, provider
        if wheel is not None:
            return wheel.version, provider
        return ld.version_from_filename(real, os.path.basename(path)), None

    @cached_property
    def library_rows(self) -> list[LibraryRow]:
        """Every CUDA library TF loads, resolved; empty when TF's CUDA version is unknown."""
        if self.cuda_major is None:
            return []
        table = data.load("cuda_libraries")["libraries"]
        resolutions: list[tuple[str, str, str | None, ld.Resolution]] = []
        resolved: dict[str, ld.Resolution] = {}
        for key, spec in table.items():
            major = self.cudnn_major if spec.get("by_cudnn_major") else self.cuda_major
            soname = spec.get(str(major)) if major else None
            if not soname:
                continue
            wheel_name = f"nvidia-{spec['wheel'].replace('_', '-')}-cu{self.cuda_major}"
            # a library loaded as another's dependency resolves from that one's paths
            via = resolved.get(spec.get("via", ""))
            res = self.loader.resolve(soname, needed_by=via.path if via else None)
            resolved[key] = res
            resolutions.append((key, soname, wheel_name, res))
        errors: dict[str, str | None] = {}
        if self.dlopen:
            loadable = [
                resolution.path
                for *_, resolution in resolutions
                if resolution.path and not resolution.missing and not resolution.error
            ]
            errors = ld.probe_dlopen([path for path in loadable if path is not None], env=self.env)
        out = []
        for key, soname, wheel, res in resolutions:
            version, provider = self.provider_of(res.path)
            if res.error or (res.path and errors.get(res.path)):
                version = None  # read from a file that does not load, it would mislead
            out.append(
                LibraryRow(
                    key,
                    soname,
                    wheel,
                    res,
                    version,
                    provider,
                    errors.get(res.path) if res.path else None,
                )
            )
        return out

    @cached_property
    def driver_library(self) -> ld.Resolution:
        return self.loader.resolve(data.load("cuda_libraries")["driver_library"])

    def copies_of(self, soname: str) -> list[Copy]:
        """Every file named `soname` in the search path and the usual library folders."""
        dirs = [candidate.directory for candidate in self.loader.search_order(*self.tf_caller)]
        dirs += probes.library_directories(self.site_dirs, self.env)
        dirs += [
            folder
            for paths in [self.ld_cache.get(soname, [])]
            for folder in map(os.path.dirname, paths)
        ]
        seen_real: set[str] = set()
        copies: list[Copy] = []
        for directory in dirs:
            path = os.path.join(directory, soname)
            if not os.path.isfile(path):
                continue
            real = os.path.realpath(path)
            if real in seen_real:
                continue
            seen_real.add(real)
            version, provider = self.provider_of(path)
            copies.append(Copy(path, real, version, provider))
        return copies

    @cached_property
    def nvcc(self) -> tuple[str | None, str | None]:
        return probes.nvcc_version(self.env)

    @cached_property
    def ptxas(self) -> str | None:
        return probes.find_ptxas(self.env, self.site_dirs)

    @cached_property
    def conda(self) -> dict[str, str]:
        return probes.conda_packages(self.env.get("CONDA_PREFIX"))

    def environment_summary(self) -> dict[str, Any]:
        from tfaccel import __version__

        return {
            "tfaccel": __version__,
            "python": sys.version.split()[0],
            "executable": sys.executable,
            "platform": f"{self.platform.system} {self.platform.release} ({self.platform.machine})",
            "tensorflow": self.tf_version,
            "keras": (
                self.distributions.get("keras").version  # type: ignore[union-attr]
                if "keras" in self.distributions
                else None
            ),
            "tf_build": self.build_info,
            "driver": self.driver.driver_version,
            "driver_cuda": self.driver.cuda_version,
            "gpus": [gpu.name for gpu in self.driver.gpus],
            "LD_LIBRARY_PATH": self.env.get("LD_LIBRARY_PATH"),
            "CUDA_VISIBLE_DEVICES": self.env.get("CUDA_VISIBLE_DEVICES"),
        }


def version_tuple(text: str | None) -> tuple[int, ...]:
    """ "12.5.1" -> (12, 5, 1); junk -> ()."""
    if not text:
        return ()
    return tuple(int(part) for part in re.findall(r"\d+", str(text))[:4])
