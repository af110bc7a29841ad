"""The reference configuration's look-ups declare their records' schemas, so the type-checking
lint reads every record field a rule uses: no undeclared-schema note is left, the schemas
admit the simulator's world records, and a misspelt record field is an error at its place.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import jsonschema
import yaml

from callgate_rules.authoring.lint import lint

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = [ROOT / "contracts", ROOT / "policies"]


def test_the_reference_configuration_has_no_notes() -> None:
    findings = lint(REFERENCE, notes=True)
    assert [f"{f.location.path}:{f.location.line}: {f.code}" for f in findings] == []


def test_every_world_record_fits_its_look_up_schema() -> None:
    world = yaml.safe_load((ROOT / "examples" / "world.yaml").read_text())
    checked = 0
    for path in sorted((ROOT / "contracts").glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            for lookup in document["spec"].get("lookups", []):
                assert "schema" in lookup, f"{path.name}: {lookup['name']} has no schema"
                for record in world[lookup["collection"]]:
                    jsonschema.validate(record, lookup["schema"])
                    checked += 1
    assert checked >= 20


def test_a_misspelt_record_field_is_an_error_at_its_place(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "contracts", tmp_path / "contracts")
    shutil.copytree(ROOT / "policies", tmp_path / "policies")
    # the policy tests name actor and world files there (lint checks that they exist)
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    contract = tmp_path / "contracts" / "getTicketStatus.yaml"
    text = contract.read_text()
    assert "'!has(ticket.deleted_at)'" in text
    contract.write_text(text.replace("'!has(ticket.deleted_at)'",
                                     "'!has(ticket.deleted_at) && ticket.tenat != \"\"'"))
    errors = [f for f in lint([tmp_path / "contracts", tmp_path / "policies"])
              if f.severity == "error"]
    assert len(errors) == 1, errors
    assert errors[0].location.path.endswith("getTicketStatus.yaml")
    assert "tenat" in errors[0].message and "tenant" in errors[0].message
