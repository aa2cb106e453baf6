"""Installation: TensorFlow, Keras, their requirements and companions, and whether tfaccel
supports the pair."""

from __future__ import annotations

from tfaccel.doctor import probes
from tfaccel.doctor.checks.base import PIP_LIST
from tfaccel.doctor.context import DoctorContext, version_tuple
from tfaccel.doctor.model import Check, Status


def check_tf_install(ctx: DoctorContext) -> list[Check]:
    dists = ctx.tf_dists
    title = "TensorFlow installation"
    see = PIP_LIST
    if not dists:
        return [
            Check(
                "tf.install",
                title,
                Status.FAIL,
                "TensorFlow is not installed in this Python environment",
                fix="pip install 'tensorflow[and-cuda]'",
                see=see,
            )
        ]
    primary = ctx.primary_tf_dists
    listing = ", ".join(f"{dist.name} {dist.version}" for dist in dists)
    if len(primary) > 1:
        names = " ".join(dist.name for dist in dists)
        return [
            Check(
                "tf.install",
                title,
                Status.FAIL,
                f"{len(primary)} TensorFlow distributions are installed side by side ({listing}). "
                "They all write the same `tensorflow` package, so the files on disk are a mix of "
                "builds and GPU support is unpredictable",
                fix=f"pip uninstall -y {names} && pip install 'tensorflow[and-cuda]'",
                see=see,
                details={"distributions": listing},
            )
        ]
    tf = primary[0]
    if ctx.tf_dir is None:
        return [
            Check(
                "tf.install",
                title,
                Status.FAIL,
                f"{tf.name} {tf.version} is registered but the `tensorflow` package is "
                "missing on disk (a broken or interrupted install)",
                fix=f"pip install --force-reinstall '{tf.name}=={tf.version}'",
                see=see,
            )
        ]
    if tf.name == "tensorflow-gpu":
        return [
            Check(
                "tf.install",
                title,
                Status.FAIL,
                "tensorflow-gpu is deprecated since TF 2.12 and no longer ships GPU builds",
                fix="pip uninstall -y tensorflow-gpu && pip install 'tensorflow[and-cuda]'",
                see=see,
            )
        ]
    if tf.name in ("tensorflow-cpu", "tf-nightly-cpu", "intel-tensorflow", "tensorflow-cpu-aws"):
        return [
            Check(
                "tf.install",
                title,
                Status.FAIL,
                f"{tf.name} {tf.version} is a CPU-only distribution: it cannot use a GPU",
                fix=f"pip uninstall -y {tf.name} && pip install 'tensorflow[and-cuda]'",
                see=see,
            )
        ]
    status = Status.OK
    finding = f"{tf.name} {tf.version} at {ctx.tf_dir}"
    if tf.name.startswith("tf-nightly"):
        status, finding = Status.WARN, finding + " (a nightly build: expect breakage)"
    return [
        Check(
            "tf.install",
            title,
            status,
            finding,
            see=see,
            details={"distributions": listing, "installer": tf.installer},
        )
    ]


def check_tfaccel_support(ctx: DoctorContext) -> list[Check]:
    """The TensorFlow / Keras pair against what tfaccel supports (not only against
    TensorFlow's own requirement), and which of tfaccel's features the pair loses."""
    from tfaccel import _compat

    title = "tfaccel supports this TensorFlow and Keras"
    tf = ctx.tf_version
    keras_dist = ctx.distributions.get("keras")
    keras = keras_dist.version if keras_dist else None
    if tf is None:
        return [Check("tfaccel.support", title, Status.SKIP, "TensorFlow is not installed")]
    lowest, highest = _compat.TF_SUPPORTED
    have = version_tuple(tf)[:2]
    pair = f"TensorFlow {tf} with Keras {keras or '(none)'}"
    if have < version_tuple(lowest):
        fix = f"pip install 'tensorflow>={lowest}'"
        finding = f"{pair}: tfaccel needs TensorFlow {lowest} or newer"
        return [Check("tfaccel.support", title, Status.FAIL, finding, fix, PIP_LIST)]
    if keras and version_tuple(keras)[:2] < version_tuple(_compat.KERAS_FLOOR):
        fix = f"pip install 'keras>={_compat.KERAS_FLOOR}'"
        finding = f"{pair}: tfaccel needs Keras {_compat.KERAS_FLOOR} or newer"
        return [Check("tfaccel.support", title, Status.FAIL, finding, fix, PIP_LIST)]
    lost = _compat.features_lost(tf, keras)
    newer = (
        f"; newer than {highest}, the newest tfaccel was tested with"
        if have > version_tuple(highest)
        else ""
    )
    if lost:
        finding = f"{pair}{newer}: tfaccel refuses " + "; ".join(lost)
        fix = "pip install --upgrade tensorflow keras  (only if the features matter to you)"
        return [Check("tfaccel.support", title, Status.WARN, finding, fix, PIP_LIST)]
    status = Status.WARN if newer else Status.OK
    return [Check("tfaccel.support", title, status, f"{pair}: every feature{newer}", see=PIP_LIST)]


# Packages beside TensorFlow whose own pins break it when they do not hold: KerasHub (the
# bert_hub and gpt2 workloads, the user's KerasHub models) and tensorflow-text, whose ops
# are built for one TensorFlow release.
COMPANIONS = ("keras-hub", "tensorflow-text")


def check_companions(ctx: DoctorContext) -> list[Check]:
    """KerasHub and tensorflow-text, where installed, against the TensorFlow and Keras
    here: each requirement they declare on those (or on each other) must hold."""
    from tfaccel.doctor.probes import requirement_for

    have = {"tensorflow": ctx.tf_version} | {
        dist_name: found.version
        for dist_name, found in ctx.distributions.items()
        if dist_name in ("keras", *COMPANIONS)
    }
    out: list[Check] = []
    for name in COMPANIONS:
        dist = ctx.distributions.get(name)
        if dist is None:
            continue
        title = f"{name} matches TensorFlow and Keras"
        broken = [
            f"{name} {dist.version} requires {req}, and {dep} {have[dep]} is installed"
            for dep in ("tensorflow", "keras", *COMPANIONS)
            if have.get(dep)
            and (req := requirement_for(dist, dep)) is not None
            and not req.specifier.contains(have[dep], prereleases=True)  # type: ignore[arg-type]
        ]
        fix: str | None = None
        if broken:
            pins = " ".join(
                f"'{found}=={have[found]}'" for found in ("tensorflow", "keras") if have.get(found)
            )
            status, finding = Status.FAIL, "; ".join(broken)
            fix = f"pip install '{name}' {pins}  (pip picks the {name} that fits them)"
        else:
            status, finding = Status.OK, f"{name} {dist.version}"
        out.append(Check(f"{name}.match", title, status, finding, fix, PIP_LIST))
    return out


def check_keras(ctx: DoctorContext) -> list[Check]:
    title = "Keras matches TensorFlow"
    tf = ctx.tf_dist
    if tf is None:
        return [Check("tf.keras", title, Status.SKIP, "TensorFlow is not installed")]
    keras = ctx.distributions.get("keras")
    out: list[Check] = []
    from tfaccel.doctor.probes import requirement_for

    req = requirement_for(tf, "keras")
    if req is not None:
        spec = str(req.specifier) or "(any version)"
        if keras is None:
            out.append(
                Check(
                    "tf.keras",
                    title,
                    Status.FAIL,
                    f"{tf.name} {tf.version} requires keras{spec}, which is not installed",
                    fix=f"pip install 'keras{spec}'",
                    see=PIP_LIST,
                )
            )
        elif not req.specifier.contains(keras.version, prereleases=True):
            out.append(
                Check(
                    "tf.keras",
                    title,
                    Status.FAIL,
                    f"keras {keras.version} does not match {tf.name} {tf.version}, "
                    f"which requires keras{spec}",
                    fix=f"pip install 'keras{spec}'",
                    see=PIP_LIST,
                )
            )
        else:
            out.append(
                Check(
                    "tf.keras",
                    title,
                    Status.OK,
                    f"keras {keras.version} satisfies {tf.name}'s keras{spec}",
                    see=PIP_LIST,
                )
            )
    else:
        out.append(
            Check(
                "tf.keras",
                title,
                Status.OK if keras else Status.SKIP,
                f"{tf.name} declares no keras requirement"
                + (f"; keras {keras.version} installed" if keras else ""),
                see=PIP_LIST,
            )
        )
    if ctx.env.get("TF_USE_LEGACY_KERAS", "").lower() in ("1", "true", "yes"):
        tfk = ctx.distributions.get("tf-keras")
        want = ".".join(tf.version.split(".")[:2])
        if tfk is None or not tfk.version.startswith(want + "."):
            have = f"tf-keras {tfk.version}" if tfk else "no tf-keras"
            out.append(
                Check(
                    "tf.keras_legacy",
                    "Legacy Keras (TF_USE_LEGACY_KERAS)",
                    Status.FAIL,
                    f"TF_USE_LEGACY_KERAS is set but {have} is installed; "
                    f"TensorFlow {tf.version} needs tf-keras {want}.x",
                    fix=f"pip install 'tf-keras~={want}.0'",
                    see=PIP_LIST,
                )
            )
    return out


def check_requirements(ctx: DoctorContext) -> list[Check]:
    """TensorFlow's requirements, and theirs, met by what is installed (as `pip check`
    would say, from the metadata alone): a numpy pin below what ml-dtypes needs breaks
    `import tensorflow` with an error that names neither."""
    title = "TensorFlow's requirements"
    tf = ctx.tf_dist
    if tf is None:
        return [Check("tf.requirements", title, Status.SKIP, "TensorFlow is not installed")]
    unmet = probes.unmet_requirements(ctx.distributions, tf.name)
    if not unmet:
        finding = f"every requirement of {tf.name} {tf.version}, and of those, is met"
        return [Check("tf.requirements", title, Status.OK, finding, see="pip check")]
    said = [
        f"{req.package} {req.installed or '(missing)'} does not meet {req.required_by}'s "
        f"{req.package}{req.spec or ' (any version)'}"
        for req in unmet
    ]
    return [
        Check(
            "tf.requirements",
            title,
            Status.FAIL,
            "; ".join(said),
            fix=requirements_fix(unmet),
            see="pip check",
        )
    ]


def requirements_fix(unmet: list[probes.Unmet]) -> str:
    """One pip command for every unmet requirement, each package's specifiers together."""
    specs: dict[str, list[str]] = {}
    for unmet_req in unmet:
        specs.setdefault(unmet_req.package, []).extend(filter(None, unmet_req.spec.split(",")))
    parts = [f"'{name}{','.join(dict.fromkeys(specifiers))}'" for name, specifiers in specs.items()]
    return "pip install " + " ".join(parts)


def check_keras_backend(ctx: DoctorContext) -> list[Check]:
    """Keras 3 runs on the backend KERAS_BACKEND or keras.json names: on JAX or PyTorch,
    a Keras model never reaches TensorFlow's GPU (nor tfaccel's settings)."""
    from tfaccel.environment import backend_fix, keras_backend

    backend, where = keras_backend(ctx.env)
    title = "Keras' backend"
    if backend == "tensorflow":
        return [Check("keras.backend", title, Status.OK, f"tensorflow ({where})")]
    return [
        Check(
            "keras.backend",
            title,
            Status.FAIL,
            f"Keras runs on its {backend} backend ({where}): Keras models train with "
            f"{backend}, not TensorFlow, so TensorFlow's GPU set-up and tfaccel's settings "
            "do not reach them",
            fix=backend_fix(where),
            see="python -c 'import keras; print(keras.backend.backend())'",
        )
    ]
