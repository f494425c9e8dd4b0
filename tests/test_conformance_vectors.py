"""JSON vectors: export -> import round trip, the documented schema, the command line."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_conformance_planted import GapOffByOne

from sparse_opt.conformance import SCENARIOS, check, expected, load_vectors, reference, references, scenarios
from sparse_opt.conformance.__main__ import main
from sparse_opt.conformance.adapters.kit import KitAdagrad, KitAdamDenseEquivalent
from sparse_opt.conformance.vectors import SCHEMA, check_vectors, export_vectors, verify_vectors

DOC = Path(__file__).resolve().parents[1] / "docs" / "conformance_schema.md"


@pytest.fixture(scope="module")
def vectors(tmp_path_factory):
    directory = tmp_path_factory.mktemp("vectors")
    export_vectors(directory)
    return directory


def _doc_schema() -> dict:
    blocks = re.findall(r"```json\n(.*?)```", DOC.read_text(), flags=re.S)
    schemas = [json.loads(b) for b in blocks if '"$schema"' in b]
    assert len(schemas) == 1
    return schemas[0]


def test_export_writes_one_file_per_scenario_and_an_index(vectors):
    index = json.loads((vectors / "index.json").read_text())
    assert index == {"schema": SCHEMA, "scenarios": [s.name for s in SCENARIOS]}
    assert sorted(p.stem for p in vectors.glob("*.json")) == sorted([s.name for s in SCENARIOS] + ["index"])


def test_round_trip_is_exact(vectors):
    loaded = load_vectors(vectors)
    assert [v.scenario.name for v in loaded] == [s.name for s in SCENARIOS]
    for v, s in zip(loaded, SCENARIOS):
        assert v.scenario.fingerprint == s.fingerprint  # table, steps, masks, hyper, dtype: bit for bit
        assert v.scenario.point == s.point and v.scenario.dtype == s.dtype
        for name, e in v.expected.items():
            ours = expected(s, reference(name))
            assert np.array_equal(e.trajectory, ours.trajectory)
            assert (e.floor, e.atol, e.ulps, e.dtype) == (ours.floor, ours.atol, ours.ulps, ours.dtype)
            assert v.titles[name] == reference(name).title
        assert set(v.expected) == {r.name for r in references(s.family) if r.applies_to(s)}
    assert verify_vectors(vectors) == []


def test_exported_files_validate_against_the_documented_schema(vectors):
    jsonschema = pytest.importorskip("jsonschema")
    schema = _doc_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for s in SCENARIOS:
        doc = json.loads((vectors / f"{s.name}.json").read_text())
        errors = sorted(validator.iter_errors(doc), key=str)
        assert not errors, f"{s.name}: {errors[0].message}"


def test_documented_required_fields_are_what_is_written(vectors):
    """Without jsonschema: the doc's required fields and types match the files, level by level."""
    schema = _doc_schema()
    doc = json.loads((vectors / "adam_incomplete_rows.json").read_text())
    props = schema["properties"]
    assert set(schema["required"]) == set(doc) == set(props)
    assert set(props["hyper"]["required"]) == set(doc["hyper"])
    assert set(props["steps"]["items"]["required"]) == set(doc["steps"][0])
    entry = props["expected"]["items"]
    assert set(entry["required"]) == set(doc["expected"][0])
    assert set(entry["properties"]["tolerance"]["required"]) == set(doc["expected"][0]["tolerance"])
    assert props["family"]["enum"] == ["adam", "adagrad", "sgd"] and doc["schema"] == props["schema"]["const"]
    assert any(step["mask"] is not None for step in doc["steps"])
    assert isinstance(doc["hyper"]["maximize"], bool) and isinstance(doc["expected"][0]["modelled"], bool)


def test_load_vectors_names_a_malformed_field(vectors, tmp_path):
    good = json.loads((vectors / "sgd_gap.json").read_text())
    (tmp_path / "index.json").write_text(json.dumps({"schema": SCHEMA, "scenarios": ["sgd_gap"]}))
    cases = [
        ("schema", "sparse_opt.conformance.vectors/0", "schema is"),
        ("hyper", {"lr": 0.1}, "hyper must have exactly"),
        ("family", "lamb", "family 'lamb'"),
        ("expected", [dict(good["expected"][0], trajectory=[[[1.0]]])], "trajectory has shape"),
    ]
    for key, value, message in cases:
        (tmp_path / "sgd_gap.json").write_text(json.dumps(dict(good, **{key: value})))
        with pytest.raises(ValueError, match=re.escape(message)):
            load_vectors(tmp_path)
    fractional = dict(good, steps=[dict(good["steps"][0], row_ids=[0.5] * len(good["steps"][0]["row_ids"]))])
    (tmp_path / "sgd_gap.json").write_text(json.dumps(fractional))
    with pytest.raises(ValueError, match=re.escape("steps[0].row_ids must be an integer array, got dtype float64")):
        load_vectors(tmp_path)  # refused, not truncated to row 0
    broken = dict(good)
    del broken["steps"]
    (tmp_path / "sgd_gap.json").write_text(json.dumps(broken))
    with pytest.raises(ValueError, match="sgd_gap.json: missing field 'steps'"):
        load_vectors(tmp_path)


def test_check_vectors_judges_like_check(vectors):
    assert str(check_vectors(vectors, KitAdamDenseEquivalent)) == str(check(KitAdamDenseEquivalent))
    via_files, direct = check_vectors(vectors, GapOffByOne), check(GapOffByOne)
    assert via_files.divergence == direct.divergence and not via_files.ok


def test_a_tampered_trajectory_is_caught(vectors, tmp_path):
    export_vectors(tmp_path, scenarios("adagrad"))
    path = tmp_path / "adagrad_gap.json"
    doc = json.loads(path.read_text())
    doc["expected"][0]["trajectory"][3][1][0] += 1e-9
    path.write_text(json.dumps(doc))
    problems = verify_vectors(tmp_path)
    assert len(problems) == 1 and problems[0].startswith("adagrad_gap: adagrad does not reproduce")
    report = check_vectors(tmp_path, KitAdagrad)
    assert (report.divergence.scenario, report.divergence.step, report.divergence.row) == ("adagrad_gap", 4, 1)


def test_cli_export_and_check_vectors(tmp_path, capsys):
    assert main(["export", str(tmp_path), "--family", "sgd"]) == 0
    assert "wrote 6 scenario files" in capsys.readouterr().out
    assert main(["check-vectors", str(tmp_path)]) == 0
    assert "6 scenario files: all expected trajectories reproduce" in capsys.readouterr().out
    kit = "sparse_opt.conformance.adapters.kit:KitSgdLazy"
    assert main(["check-vectors", str(tmp_path), "--candidate", kit]) == 0
    assert "verdict: sgd_lazy (6/6 scenarios)" in capsys.readouterr().out
    assert main(["check-vectors", str(tmp_path), "--candidate", kit, "--claims", "sgd_dense"]) == 1
    assert "first divergence from sgd_dense: sgd_gap step 2 row 2 col 0" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["check-vectors", str(tmp_path), "--candidate", "sparse_opt.conformance"])
    assert "expected module:Class" in capsys.readouterr().err


def test_cli_help_runs_as_a_module():
    out = subprocess.run([sys.executable, "-m", "sparse_opt.conformance", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "export" in out.stdout and "check-vectors" in out.stdout
