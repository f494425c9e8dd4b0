"""JSON vectors: export -> import round trip, the documented schema, the command line."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_conformance_planted import GapOffByOne

from sparse_opt.conformance import (
    SCENARIOS,
    check,
    expected,
    load_vectors,
    reference,
    references,
    scenario,
    scenarios,
)
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
        ("expected", [dict(good["expected"][0], trajectory=[[[1.0]]])],
         "expected[0].trajectory has 1 steps, expected 8"),
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
    assert "wrote 9 scenario files" in capsys.readouterr().out
    assert main(["check-vectors", str(tmp_path)]) == 0
    assert "9 scenario files: all expected trajectories reproduce" in capsys.readouterr().out
    kit = "sparse_opt.conformance.adapters.kit:KitSgdLazy"
    assert main(["check-vectors", str(tmp_path), "--candidate", kit]) == 0
    assert "verdict: sgd_lazy (9/9 scenarios)" in capsys.readouterr().out
    assert main(["check-vectors", str(tmp_path), "--candidate", kit, "--claims", "sgd_dense"]) == 1
    assert "first divergence from sgd_dense: sgd_gap step 2 row 2 col 0" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["check-vectors", str(tmp_path), "--candidate", "sparse_opt.conformance"])
    assert "expected module:Class" in capsys.readouterr().err


def test_cli_exports_the_kernel_form_for_embedding_kernels(tmp_path, capsys):
    from sparse_opt.conformance.catalogue import kernel_scenarios

    assert main(["export", str(tmp_path), "--family", "adagrad", "--form", "kernel"]) == 0
    wanted = kernel_scenarios("adagrad")
    assert f"wrote {len(wanted)} scenario files" in capsys.readouterr().out
    loaded = load_vectors(tmp_path)
    assert sorted(v.scenario.name for v in loaded) == sorted(s.name for s in wanted)
    assert all(v.scenario.dtype == np.float32 and v.scenario.table.shape[1] == 4 for v in loaded)
    assert main(["check-vectors", str(tmp_path)]) == 0  # the expected trajectories reproduce from the file
    kit = "sparse_opt.conformance.adapters.kit:KitAdagradRowwise"
    assert main(["check-vectors", str(tmp_path), "--candidate", kit]) == 0
    assert "verdict: rowwise_adagrad" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["export", str(tmp_path), "--form", "kernels"])


def test_cli_help_runs_as_a_module():
    out = subprocess.run([sys.executable, "-m", "sparse_opt.conformance", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "export" in out.stdout and "check-vectors" in out.stdout


# --------------------------------------------------------------------------- a corpus of malformed files


def _edit(path: str, value: object):
    """A corpus edit: set the field at ``path`` (dotted; integers index lists) of a good sgd_gap.json."""
    def apply(doc: dict) -> dict:
        *parents, last = [int(k) if k.isdigit() else k for k in path.split(".")]
        obj = doc
        for key in parents:
            obj = obj[key]
        if value is _DELETE:
            del obj[last]
        else:
            obj[last] = value
        return doc
    return apply


_DELETE = object()
_HUGE = 10**400
# sgd_gap: a 4 x 3 float64 table, 8 steps, step 1 looks up rows [0, 2]; three references
MALFORMED = {
    "ulps NaN": (_edit("expected.0.tolerance.ulps", math.nan), "expected[0].tolerance.ulps = nan must be finite"),
    "ulps inf": (_edit("expected.1.tolerance.ulps", math.inf), "expected[1].tolerance.ulps = inf must be finite"),
    "atol negative": (_edit("expected.0.tolerance.atol", -1e-9), "expected[0].tolerance.atol = -1e-09 must be >= 0"),
    "floor a string": (_edit("expected.0.tolerance.floor", "0.1"),
                       "expected[0].tolerance.floor must be a number, got str"),
    "tolerance extra": (_edit("expected.0.tolerance.rtol", 0.1), "expected[0].tolerance: unknown field 'rtol'"),
    "table empty": (_edit("table", []), "table must have at least one row and one column, got shape (0, 0)"),
    "table of empty rows": (_edit("table", [[], [], [], []]), "table must have at least one row and one column"),
    "table 400 digits": (_edit("table.1.2", _HUGE), "table[1][2] = an integer of 401 digits is too large for a float"),
    "table NaN": (_edit("table.0.0", math.nan), "table[0][0] = nan must be finite"),
    "table too deep": (_edit("table.0.0", [[1.0]]), "table[0][0] must be a number, got list"),
    "table ragged": (_edit("table.3", [1.0]), "table[3] has 1 entries, expected 3"),
    "table not a list": (_edit("table", {"0": [1.0]}), "table must be a list of rows, got dict"),
    "row_ids -1": (_edit("steps.0.row_ids", [-1, 2]), "steps[0].row_ids[0] = -1 is out of range [0, rows = 4)"),
    "row_ids too big": (_edit("steps.0.row_ids", [0, 4]), "steps[0].row_ids[1] = 4 is out of range [0, rows = 4)"),
    "row_ids 400 digits": (_edit("steps.0.row_ids", [0, _HUGE]),
                           "steps[0].row_ids[1] = an integer of 401 digits is out of range [0, rows = 4)"),
    "row_ids bool": (_edit("steps.0.row_ids", [True, 2]), "steps[0].row_ids must be an integer array, got dtype bool"),
    "row_ids not a list": (_edit("steps.0.row_ids", 0), "steps[0].row_ids must be a list of row ids, got int"),
    "row_grads short": (_edit("steps.0.row_grads", [[0.5, 0.5, 0.5]]), "steps[0].row_grads has 1 rows, expected 2"),
    "row_grads short row": (_edit("steps.0.row_grads.1", [0.5, 0.5]),
                            "steps[0].row_grads[1] has 2 entries, expected 3"),
    "row_grads inf": (_edit("steps.2.row_grads.0.1", -math.inf), "steps[2].row_grads[0][1] = -inf must be finite"),
    "mask of numbers": (_edit("steps.0.mask", [[1, 1, 1], [1, 0, 1]]), "steps[0].mask[0][0] must be a bool, got int"),
    "mask short": (_edit("steps.0.mask", [[True, True, True]]), "steps[0].mask has 1 rows, expected 2"),
    "step missing mask": (_edit("steps.0.mask", _DELETE), "steps[0]: missing field 'mask'"),
    "step not an object": (_edit("steps.1", [0]), "steps[1] must be an object, got list"),
    "steps empty": (_edit("steps", []), "steps must list at least one step"),
    "trajectory short": (_edit("expected.0.trajectory", []), "expected[0].trajectory has 0 steps, expected 8"),
    "trajectory state short": (_edit("expected.2.trajectory.7", [[1.0, 1.0, 1.0]]),
                               "expected[2].trajectory[7] has 1 rows, expected 4"),
    "trajectory NaN": (_edit("expected.0.trajectory.3.1.0", math.nan),
                       "expected[0].trajectory[3][1][0] = nan must be finite"),
    "expected empty": (_edit("expected", []), "expected must list at least one reference"),
    "modelled not bool": (_edit("expected.0.modelled", "no"), "expected[0].modelled must be a bool, got str"),
    "reference empty": (_edit("expected.0.reference", ""), "expected[0].reference '' is empty or repeated"),
    "hyper lr NaN": (_edit("hyper.lr", math.nan), "hyper.lr = nan must be finite"),
    "hyper lr 400 digits": (_edit("hyper.lr", _HUGE), "hyper.lr = an integer of 401 digits is too large for a float"),
    "hyper maximize 0": (_edit("hyper.maximize", 0), "hyper.maximize must be a bool, got int"),
    "hyper extra": (_edit("hyper.nesterov", True), "hyper must have exactly the fields"),
    "name mismatch": (_edit("name", "sgd_other"), "name is 'sgd_other', but the file (and index.json) say 'sgd_gap'"),
    "unknown field": (_edit("comment", "hi"), "unknown field 'comment'"),
    "dtype unknown": (_edit("dtype", "float16"), "dtype 'float16' unknown"),
    "point not a string": (_edit("point", None), "point must be a str, got null"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED), ids=sorted(MALFORMED))
def test_a_malformed_file_is_a_value_error_naming_the_file_and_the_field(vectors, tmp_path, case):
    """Failed before: NaN or inf tolerances were accepted; the rest crashed (IndexError, OverflowError, reshape)."""
    edit, message = MALFORMED[case]
    doc = edit(json.loads((vectors / "sgd_gap.json").read_text()))
    (tmp_path / "index.json").write_text(json.dumps({"schema": SCHEMA, "scenarios": ["sgd_gap"]}))
    (tmp_path / "sgd_gap.json").write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="^" + re.escape("sgd_gap.json: ") + ".*" + re.escape(message)):
        load_vectors(tmp_path)


# sgd_schedule_step_decay: 12 steps, rates 1/16 (steps 1-4), 1/64, 1/256; lr = 1/16
MALFORMED_SCHEDULE = {
    "schedule short": (_edit("hyper.schedule", [0.0625] * 11),
                       "hyper.schedule has 11 rates, expected one per step (12)"),
    "schedule empty": (_edit("hyper.schedule", []), "hyper.schedule has 0 rates, expected one per step (12)"),
    "schedule NaN": (_edit("hyper.schedule.3", math.nan), "hyper.schedule[3] = nan must be finite"),
    "schedule inf": (_edit("hyper.schedule.0", math.inf), "hyper.schedule[0] = inf must be finite"),
    "schedule negative": (_edit("hyper.schedule.5", -0.25), "hyper.schedule[5] = -0.25 must be >= 0"),
    "schedule a string": (_edit("hyper.schedule.0", "0.1"), "hyper.schedule[0] must be a number, got str"),
    "schedule a bool": (_edit("hyper.schedule.7", True), "hyper.schedule[7] must be a number, got bool"),
    "schedule not a list": (_edit("hyper.schedule", 0.0625), "hyper.schedule must be a list, got float"),
    "schedule 400 digits": (_edit("hyper.schedule.2", _HUGE),
                            "hyper.schedule[2] = an integer of 401 digits is too large for a float"),
    "lr not the peak": (_edit("hyper.lr", 0.125), "hyper.schedule: its peak 0.0625 is not hyper.lr = 0.125"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED_SCHEDULE), ids=sorted(MALFORMED_SCHEDULE))
def test_a_malformed_schedule_is_a_value_error_naming_the_file_and_the_field(vectors, tmp_path, case):
    edit, message = MALFORMED_SCHEDULE[case]
    name = "sgd_schedule_step_decay"
    doc = edit(json.loads((vectors / f"{name}.json").read_text()))
    (tmp_path / "index.json").write_text(json.dumps({"schema": SCHEMA, "scenarios": [name]}))
    (tmp_path / f"{name}.json").write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="^" + re.escape(f"{name}.json: ") + ".*" + re.escape(message)):
        load_vectors(tmp_path)


def test_a_schedule_round_trips_and_only_schedule_files_carry_one(vectors):
    for s in SCENARIOS:
        doc = json.loads((vectors / f"{s.name}.json").read_text())
        assert ("schedule" in doc["hyper"]) == bool(s.hyper.schedule)
        if s.hyper.schedule:
            assert doc["hyper"]["schedule"] == list(s.hyper.schedule) and doc["hyper"]["lr"] == max(s.hyper.schedule)
    (loaded,) = [v for v in load_vectors(vectors) if v.scenario.name == "adam_schedule_cosine"]
    assert loaded.scenario.hyper == scenario("adam_schedule_cosine").hyper


def test_check_vectors_leaves_the_schedule_files_out_for_a_constant_rate_candidate(vectors):
    class ConstantOnly(KitAdamDenseEquivalent):
        schedules = False

    report = check_vectors(vectors, ConstantOnly)
    assert [r.scenario for r in report.results] == [s.name for s in scenarios("adam", schedules=False)]
    assert report.ok and report.semantics == "dense_adamw" and str(report) == str(check(ConstantOnly))


def test_a_float32_scenario_cannot_hold_what_overflows_float32(vectors, tmp_path):
    doc = json.loads((vectors / "sgd_float32.json").read_text())
    doc["table"][0][1] = 1e300
    (tmp_path / "index.json").write_text(json.dumps({"schema": SCHEMA, "scenarios": ["sgd_float32"]}))
    (tmp_path / "sgd_float32.json").write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=re.escape("sgd_float32.json: table[0][1] = 1e+300 overflows float32")):
        load_vectors(tmp_path)


@pytest.mark.parametrize(("text", "message"), [
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ("{", "not valid JSON"),
    ("[1, 2]", "must be an object, got list"),
    ('{"schema": "sparse_opt.conformance.vectors/1", "name": NaN}', "missing field"),
], ids=["deep nesting", "truncated", "a list", "incomplete"])
def test_unparseable_scenario_files(tmp_path, text, message):
    (tmp_path / "index.json").write_text(json.dumps({"schema": SCHEMA, "scenarios": ["sgd_gap"]}))
    (tmp_path / "sgd_gap.json").write_text(text)
    with pytest.raises(ValueError, match="^" + re.escape("sgd_gap.json") + ".*" + re.escape(message)):
        load_vectors(tmp_path)


@pytest.mark.parametrize(("scenarios_field", "message"), [
    (["../x"], "scenarios[0] = '../x' is not a scenario name"),
    (["sgd_gap", "sub/sgd_gap"], "scenarios[1] = 'sub/sgd_gap' is not a scenario name"),
    (["/etc/passwd"], "scenarios[0] = '/etc/passwd' is not a scenario name"),
    ([""], "scenarios[0] = '' is not a scenario name"),
    ([3], "scenarios[0] = 3 is not a scenario name"),
    (["sgd_gap", "sgd_gap"], "scenarios[1] = 'sgd_gap' is listed twice"),
    (["sgd_nope"], "sgd_nope.json: no such file"),
    ("sgd_gap", "scenarios must be a list, got str"),
], ids=["dot-dot", "subdirectory", "absolute", "empty", "number", "twice", "missing file", "not a list"])
def test_index_names_stay_inside_the_directory(vectors, tmp_path, scenarios_field, message):
    """Failed before: '../x' read <parent>/x.json, outside the vectors' directory."""
    inside = tmp_path / "vectors"
    inside.mkdir()
    good = (vectors / "sgd_gap.json").read_text()
    (inside / "sgd_gap.json").write_text(good)
    (tmp_path / "x.json").write_text(good.replace('"name": "sgd_gap"', '"name": "x"'))
    (inside / "index.json").write_text(json.dumps({"schema": SCHEMA, "scenarios": scenarios_field}))
    with pytest.raises(ValueError, match=re.escape(message)):
        load_vectors(inside)


def test_check_vectors_command_refuses_a_nan_tolerance_instead_of_accepting_garbage(tmp_path, capsys):
    """Failed before: ulps NaN made every comparison NaN, never > 1: 'all expected trajectories reproduce'."""
    export_vectors(tmp_path, scenarios("sgd")[:1])
    path = tmp_path / "sgd_gap.json"
    doc = json.loads(path.read_text())
    doc["expected"][0]["tolerance"]["ulps"] = math.nan
    doc["expected"][0]["trajectory"][3][1][0] += 1.0  # garbage
    path.write_text(json.dumps(doc))
    assert main(["check-vectors", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert "reproduce" not in captured.out
    assert captured.err.strip() == "error: sgd_gap.json: expected[0].tolerance.ulps = nan must be finite"


def _paths(doc: object, prefix: tuple = ()) -> list[tuple]:
    """Every path into a JSON value (dict keys and list indices), the value itself first."""
    out = [prefix]
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for key, value in items:
        out += _paths(value, prefix + (key,))
    return out


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**400), 10**400) | st.integers(-3, 6)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=10,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_single_corruption_loads_or_is_a_value_error(vectors, tmp_path, data):
    """Replace or delete one value anywhere in a good file (one with a schedule too): never an exception other than
    ValueError."""
    name = data.draw(st.sampled_from(["adam_incomplete_rows", "adam_schedule_weight_decay"]))
    doc = json.loads((vectors / f"{name}.json").read_text())
    doc["expected"] = doc["expected"][:2]
    path = data.draw(st.sampled_from(_paths(doc)[1:]))
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    if data.draw(st.booleans()):
        parent[path[-1]] = data.draw(_JSON)
    elif isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent.pop(path[-1])
    (tmp_path / "index.json").write_text(json.dumps({"schema": SCHEMA, "scenarios": [name]}))
    (tmp_path / f"{name}.json").write_text(json.dumps(doc))
    try:
        load_vectors(tmp_path)
    except ValueError as exc:
        assert str(exc).startswith(f"{name}.json"), exc
