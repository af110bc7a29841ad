"""The CEL specification's conformance tests, through the compiled path and cel-python alone.

Every conformance test cel-python passes must pass through ``compile_expression`` too.
Run with ``pytest -s`` to see the report (ran / passed / failed / skipped by reason).
"""

from __future__ import annotations

import pytest

from tests.cel.conformance_harness import (
    ENVIRONMENT_VARIABLE,
    ConformanceReport,
    default_directory,
    parse_text_format,
    run_conformance,
    to_python,
)

CONFORMANCE_DIR = default_directory()

# Conformance tests cel-python passes that the compiled path may fail, each with its reason.
KNOWN_REGRESSIONS: dict[str, str] = {}


@pytest.fixture(scope="module")
def report() -> ConformanceReport:
    if not CONFORMANCE_DIR.is_dir():
        pytest.skip(
            f"CEL conformance data not found at {CONFORMANCE_DIR} "
            f"(set {ENVIRONMENT_VARIABLE} to its directory)"
        )
    result = run_conformance(CONFORMANCE_DIR)
    print("\n" + result.format())
    return result


def test_compiled_path_passes_whatever_cel_python_passes(report: ConformanceReport) -> None:
    regressions = {
        result.case.case_id: f"{result.case.expr!r}: {result.compiled.detail}"
        for result in report.regressions()
        if result.case.case_id not in KNOWN_REGRESSIONS
    }
    assert not regressions, regressions


def test_known_regressions_are_still_real(report: ConformanceReport) -> None:
    current = {result.case.case_id for result in report.regressions()}
    assert set(KNOWN_REGRESSIONS) <= current, set(KNOWN_REGRESSIONS) - current


def test_most_of_the_suite_runs_and_most_of_it_compiles(report: ConformanceReport) -> None:
    # Guards against the runner silently skipping or mis-reading the files.
    assert report.ran > 1000
    assert report.passed("cel-python") > 850
    compiled = sum(1 for result in report.results if result.backend == "compiled")
    assert compiled > 800
    assert set(report.skipped) <= {
        "containers", "protobuf messages", "qualified variable names", "type values",
        "protobuf enums", "type-checking only", "unknowns", "error or unknown bindings",
        "custom functions",
    }


def test_text_format_parser_reads_the_conformance_shapes() -> None:
    document = parse_text_format(
        """
        # a comment
        name: "demo"
        section {
          test {
            name: 'bytes'
            expr: "b'\\\\303\\\\277'"
            value: { bytes_value: "\\303\\277" }
          }
          test <
            name: "list"
            value { list_value { values: { int64_value: -1 } values { double_value: 2.5 } } }
          >
          test {
            name: "map"
            value: { map_value { entries {
              key: { string_value: "k" } value: { null_value: NULL_VALUE }
            } } }
            bindings { key: "x" value { value { object_value {
              [type.googleapis.com/google.protobuf.Duration] { seconds: 3 nanos: 5000 }
            } } } }
          }
        }
        """
    )
    tests = document.messages("section")[0].messages("test")
    assert document.text("name") == "demo"
    assert tests[0].text("expr") == "b'\\303\\277'"
    bytes_value = tests[0].message("value")
    list_value = tests[1].message("value")
    map_value = tests[2].message("value")
    binding = tests[2].messages("bindings")[0].message("value")
    assert bytes_value is not None and list_value is not None and map_value is not None
    assert binding is not None
    assert to_python(bytes_value) == "ÿ".encode()
    assert to_python(list_value) == [-1, 2.5]
    assert to_python(map_value) == {"k": None}
    duration = binding.message("value")
    assert duration is not None
    assert to_python(duration).total_seconds() == pytest.approx(3.000005)
