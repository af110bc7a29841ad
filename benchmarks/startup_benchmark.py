"""Start-up: what ``import callgate_rules`` and ``callgate check`` of one call cost a new process.

Each command runs ``--runs`` times in a fresh interpreter, interleaved with the floor
(``python -c "import yaml, click"``: what any YAML command-line tool pays); the figure per
command is the least CPU time (user + system) of its runs and, beside it, the least wall
time — the least, because a shared machine only ever adds to either. Targets (issue 20):
``import callgate_rules`` ≤ 3× the floor, ``callgate check`` of one call ≤ 2× that again
(≤ 6× the floor).

Every interpreter reads its modules' bytecode as an installed package does (``pip install``
compiles it; an editable install writes ``__pycache__`` on first import): the children run
without ``PYTHONDONTWRITEBYTECODE`` and with ``PYTHONPYCACHEPREFIX`` set to a private
temporary directory, so nothing is written into the checkout and the floor's modules are
read the same way as callgate's; two unmeasured runs of each command fill it, and fill the
load cache (``CALLGATE_CACHE_DIR``, also a private temporary directory). ``--no-bytecode``
measures instead what an environment where bytecode is never cached pays
(``PYTHONDONTWRITEBYTECODE=1`` and no ``__pycache__``): every module, the floor's too,
compiled from source in every process (the prefix is then an empty directory, so that no
``__pycache__`` lying about is read).

    python benchmarks/startup_benchmark.py [--runs 7] [--quick] [--no-bytecode]

``--quick`` runs each command three times: a smoke check, not a measurement.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHECK = ["-m", "callgate_rules.cli", "check",
         "--call", "examples/calls/create_follow_up.json", "--actor", "examples/actors/dana.yaml",
         "--world", "examples/world.yaml", "--now", "2026-11-29T12:00:00Z",
         "contracts", "policies"]
COMMANDS = {
    "import yaml, click (the floor)": ["-c", "import yaml, click"],
    "import callgate_rules": ["-c", "import callgate_rules"],
    "callgate check, one call": CHECK,
    "callgate check, no load cache": CHECK,
}
TARGETS = {"import callgate_rules": 3.0, "callgate check, one call": 6.0}


def environment(name: str, scratch: Path, bytecode: bool) -> dict[str, str]:
    """The child's environment: bytecode read from ``scratch`` (or never written), the load
    cache in ``scratch`` (or none, for the command measured without it)."""
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    env["PYTHONPYCACHEPREFIX"] = str(scratch / "bytecode")
    if not bytecode:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["CALLGATE_CACHE_DIR"] = "" if name.endswith("no load cache") else str(scratch / "load")
    return env


def run_once(arguments: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one fresh interpreter running ``arguments``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, *arguments], cwd=REPO, check=True, env=env,
                   stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="three runs of each")
    parser.add_argument("--no-bytecode", action="store_true",
                        help="compile every module from source in every run")
    options = parser.parse_args()
    runs = 3 if options.quick else options.runs
    cpu: dict[str, list[float]] = {name: [] for name in COMMANDS}
    wall: dict[str, list[float]] = {name: [] for name in COMMANDS}
    with tempfile.TemporaryDirectory(prefix="callgate-startup-") as directory:
        envs = {name: environment(name, Path(directory), not options.no_bytecode)
                for name in COMMANDS}
        for _ in range(2):  # fills the bytecode and the load cache (whole from the second)
            for name, arguments in COMMANDS.items():
                run_once(arguments, envs[name])
        for _ in range(runs):  # interleaved, so a busy moment hits every command alike
            for name, arguments in COMMANDS.items():
                seconds, elapsed = run_once(arguments, envs[name])
                cpu[name].append(seconds)
                wall[name].append(elapsed)
    floor_cpu, floor_wall = min(next(iter(cpu.values()))), min(next(iter(wall.values())))
    print(f"least of {runs} fresh interpreters each, {os.cpu_count()} CPUs, bytecode "
          f"{'compiled from source every run' if options.no_bytecode else 'read as installed'}")
    print(f"  {'command':<34} {'CPU':>8} {'ratio':>6} {'wall':>8} {'ratio':>6}  target")
    for name in COMMANDS:
        least_cpu, least_wall = min(cpu[name]), min(wall[name])
        target = TARGETS.get(name)
        verdict = "" if target is None else (
            f"≤ {target:g}× {'met' if least_cpu / floor_cpu <= target else 'MISSED'}")
        print(f"  {name:<34} {least_cpu * 1e3:6.0f}ms {least_cpu / floor_cpu:5.1f}× "
              f"{least_wall * 1e3:6.0f}ms {least_wall / floor_wall:5.1f}×  {verdict}")


if __name__ == "__main__":
    main()
