"""The package as a user gets it: the sdist and wheel hold what they should, and the wheel
installed into a fresh venv starts a project that lints, tests and simulates in an empty
directory, and writes the example projects, whose checks pass as they do in the repository.

Offline: the package is built with the setuptools backend of this interpreter (no build
isolation), installed with ``--no-deps --no-index``, and its dependencies are this
interpreter's site-packages, added to the fresh venv by a ``.pth`` line — the editable
install's finder is not (a ``.pth`` inside an added directory is not run), so what runs is
the installed wheel.
"""

from __future__ import annotations

import email
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SOURCES = ("pyproject.toml", "setup.py", "README.md", "LICENSE", "MANIFEST.in")
# The repository's folders the example projects are copied from when the package is built
EXAMPLE_SOURCES = ("contracts", "policies", "examples")

pytestmark = [pytest.mark.slow, pytest.mark.integration]


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist and the wheel, built from a copy of the source tree."""
    pytest.importorskip("setuptools", minversion="77")
    source = tmp_path_factory.mktemp("source")
    for name in SOURCES:
        shutil.copy2(REPO / name, source / name)
    for folder in ("callgate_rules", *EXAMPLE_SOURCES):
        shutil.copytree(REPO / folder, source / folder,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.sqlite3"))
    build = ("from setuptools import build_meta as backend\n"
             "backend.build_sdist('dist')\nbackend.build_wheel('dist')\n")
    done = subprocess.run([sys.executable, "-c", build], cwd=source, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return source / "dist"


def test_the_sdist_has_the_package_and_no_partial_tests(dist: Path) -> None:
    [sdist] = dist.glob("*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert {"LICENSE", "README.md", "pyproject.toml", "callgate_rules/py.typed",
            "callgate_rules/documents/schemas/ToolContract.json",
            "callgate_rules/authoring/templates/project/contracts/issueRefund.yaml",
            # what the wheel's examples are built from, so the sdist builds the same wheel
            "setup.py", "contracts/sendPayment.yaml", "policies/tests/support_desk_test.yaml",
            "examples/scenarios/budgets.yaml", "examples/banking/contracts/sendMoney.yaml"} <= names
    assert not [name for name in names if name.startswith(("tests", "benchmarks"))]
    assert not [name for name in names if "__pycache__" in name or name.endswith(".pyc")]


def test_the_wheel_has_schemas_templates_typing_and_license(dist: Path) -> None:
    [wheel] = dist.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata_name = next(n for n in names if n.endswith(".dist-info/METADATA"))
        metadata = email.message_from_string(archive.read(metadata_name).decode())
    assert "callgate_rules/py.typed" in names
    assert {f"callgate_rules/documents/schemas/{kind}.json"
            for kind in ("ToolContract", "AccessPolicy", "RoutingTable", "common")} <= names
    template = "callgate_rules/authoring/templates/project/"
    assert {template + path for path in ("README.md", "contracts/getOrder.yaml",
                                         "policies/tests/refunds_test.yaml",
                                         "examples/world.yaml")} <= names
    examples = "callgate_rules/examples/"
    assert {examples + path for path in (
        "support-desk/contracts/sendPayment.yaml", "support-desk/policies/access.yaml",
        "support-desk/policies/tests/support_desk_test.yaml",
        "support-desk/examples/scenarios/budgets.yaml", "support-desk/examples/world.yaml",
        "support-desk/examples/control_set.yaml",
        "banking/contracts/sendMoney.yaml", "banking/scenarios/run_history.yaml",
        "banking/policies/tests/banking_test.yaml")} <= names
    assert any(name.startswith(examples + "quickstart/contracts/") for name in names)
    # one copy each: the banking and quickstart examples are not also inside the support desk
    assert not [name for name in names if name.startswith(
        (examples + "support-desk/examples/banking/",
         examples + "support-desk/examples/quickstart/"))]
    assert not [name for name in names if "__pycache__" in name or name.endswith(".pyc")]
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names)
    assert not [name for name in names if name.startswith("tests/")]
    assert metadata["License-Expression"] == "Apache-2.0"
    assert "Typing :: Typed" in metadata.get_all("Classifier")
    assert "Homepage, https://pypi.org/project/callgate-rules/" in metadata.get_all("Project-URL")


def test_the_installed_wheel_starts_a_project_anywhere(dist: Path, tmp_path: Path) -> None:
    [wheel] = dist.glob("*.whl")
    environment = tmp_path / "venv"
    venv.create(environment, with_pip=False)
    python = environment / "bin" / "python"
    site = Path(subprocess.run([python, "-c", "import sysconfig; "
                                "print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    # the dependencies: this interpreter's site-packages, after the venv's own
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    installed = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps",
                                "--no-index", "--target", str(site), str(wheel)],
                               capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr[-3000:]
    empty = tmp_path / "empty"
    empty.mkdir()
    # as a user's shell would be: nothing points back at the source tree
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([python, "-m", "callgate_rules.cli", *args], cwd=empty,
                              capture_output=True, text=True, timeout=180, env=clean)

    where = subprocess.run([python, "-c", "import callgate_rules as c; "
                            "print(c.__file__); print(c.__version__)"], cwd=empty,
                           capture_output=True, text=True, timeout=60, env=clean)
    assert where.returncode == 0, where.stderr
    module_file, version = where.stdout.split()
    assert module_file.startswith(str(site)) and version == "0.1.0"
    for step in (("init",), ("lint",), ("test", "--coverage", "--fail-under", "100"),
                 ("simulate",)):
        done = run(*step)
        assert done.returncode == 0, (step, done.stdout[-2000:], done.stderr[-2000:])
        assert "Traceback" not in done.stderr
    assert (empty / "contracts" / "issueRefund.yaml").exists()

    # The example projects, written from the wheel and run as their READMEs say
    listed = run("init", "--list")
    assert listed.returncode == 0, listed.stderr
    assert {line.split()[0] for line in listed.stdout.splitlines()} >= {
        "support-desk", "banking", "refunds"}
    checks = {
        "support-desk": [("simulate",), ("test",), ("eval", "examples/control_set.yaml")],
        "banking": [("test",), ("simulate",), ("lint",)],
        "refunds": [("test", "--coverage", "--fail-under", "100"), ("simulate",)],
    }
    for name, steps in checks.items():
        written = run("init", "--example", name, name)
        assert written.returncode == 0, (name, written.stderr[-2000:])
        for step in steps:
            done = subprocess.run([python, "-m", "callgate_rules.cli", *step],
                                  cwd=empty / name, capture_output=True, text=True,
                                  timeout=300, env=clean)
            assert done.returncode == 0, (name, step, done.stdout[-2000:],
                                          done.stderr[-2000:])
            assert "Traceback" not in done.stderr
            if step == ("simulate",) and name == "support-desk":
                # the full suite: every scenario file the repository's simulate runs
                assert done.stdout.rstrip().endswith(" 0 failed")
                assert int(done.stdout.rstrip().splitlines()[-1].split()[0]) >= 28
