"""Where a same-wall pair's two runs part: the running accuracy and loss that Keras'
progress bar printed at each step both logs show (plain python prints about every
other step, `run` with steps_per_execution 25 every 25th), compared as printed.

    python compare_steps.py RESULT_DIR [RESULT_DIR ...]

For each plain-N.log / run-N.log pair under each directory: how many printed steps
they share, how many differ, and the first that does.
"""

import pathlib
import re
import sys

ANSI = re.compile(r"\x1b\[[0-9;]*m")
EPOCH = re.compile(r"Epoch (\d+)/")
STEP = re.compile(r"\s*(\d+)/\d+ .*?accuracy: ([0-9.]+) - loss: ([0-9.]+)")


def printed_steps(log: pathlib.Path) -> dict[tuple[int, int], tuple[str, str]]:
    text = ANSI.sub("", log.read_text(errors="replace")).replace("\r", "\n")
    steps, epoch = {}, 0
    for line in text.split("\n"):
        if m := EPOCH.match(line):
            epoch = int(m.group(1))
        elif m := STEP.match(line):
            steps[(epoch, int(m.group(1)))] = (m.group(2), m.group(3))
    return steps


def compare(directory: pathlib.Path) -> None:
    for plain_log in sorted(directory.glob("plain-*.log")):
        run_log = directory / plain_log.name.replace("plain", "run")
        plain, run = printed_steps(plain_log), printed_steps(run_log)
        shared = sorted(set(plain) & set(run))
        differ = [k for k in shared if plain[k] != run[k]]
        first = (
            f"first at epoch {differ[0][0]} step {differ[0][1]}: "
            f"{plain[differ[0]]} against {run[differ[0]]} (accuracy, loss)"
            if differ
            else "none differs"
        )
        print(
            f"{directory.name}/{plain_log.stem[6:]}: {len(shared)} steps printed by"
            f" both, {len(differ)} differ; {first}"
        )


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        compare(pathlib.Path(arg))
