"""The wheel's example projects: the one setuptools step pyproject.toml cannot declare.

``callgate init --example NAME`` writes the support desk and the banking example, whose
files live once, where the repository's README, tests and benchmarks use them
(``contracts/``, ``policies/``, ``examples/``). Package data can only name files inside
the package, so building the package copies them into it as ``callgate_rules/examples/NAME/``;
an editable install (``pip install -e .``) reads them where they are. Which files belong to
which example is ``callgate_rules/authoring/example_sets.py``, loaded here by its path so
that building imports nothing of the package's dependencies.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


def _example_sets() -> ModuleType:
    path = ROOT / "callgate_rules" / "authoring" / "example_sets.py"
    spec = importlib.util.spec_from_file_location("_callgate_example_sets", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while building
    spec.loader.exec_module(module)
    return module


class BuildWithExamples(build_py):
    """build_py, then each example set's files copied under callgate_rules/examples/."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install reads the examples in the source tree
        sets = _example_sets()
        target = Path(self.build_lib) / "callgate_rules" / sets.PACKAGED_FOLDER
        for example in sets.EXAMPLE_SETS:
            if example.template:
                continue  # the project template is package data already
            for relative, source in sets.source_files(example, ROOT):
                destination = target / example.name / relative
                destination.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, destination)


setup(cmdclass={"build_py": BuildWithExamples})
