"""`tfaccel.configure()`: apply the GPU optimizations in one call, before the model exists.

import tfaccel
report = tfaccel.configure(memory="growth", precision="auto", xla="jit",
                           steps_per_execution=10)
with report.strategy_scope(), report.remat_scope():
    model = build_model()
    report.compile(model, loss="sparse_categorical_crossentropy")
model.fit(report.dataset(ds))

tfaccel.configure.from_file("tfaccel.json")   # what `tfaccel tune` wrote
"""

from tfaccel.optimize.apply import configure
from tfaccel.optimize.report import Applied, ConfigureOrderError, ConfigureReport
from tfaccel.optimize.settings import Settings, read_settings_file, settings_from_dict

__all__ = [
    "Applied",
    "ConfigureOrderError",
    "ConfigureReport",
    "Settings",
    "configure",
    "read_settings_file",
    "settings_from_dict",
]
