"""The measurement engine below every command that runs trials (tune, scale, bench,
power sweep): a workload or script run in a fresh process with given settings, timed
per window after warm-up, and summarised (`runner`); the child's side (`child`); and
tfaccel's data-parallel training step (`step`)."""
