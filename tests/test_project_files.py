"""Project files stay in step: environment.yml (conda/Binder) names what pyproject.toml does."""

import re
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")
tomllib = pytest.importorskip("tomllib")

ROOT = Path(__file__).resolve().parents[1]


def normalise(requirement: str) -> tuple[str, str]:
    """('numpy', '>=1.26') from 'numpy>=1.26' or 'numpy >=1.26'; names compared case- and dash-insensitively."""
    m = re.fullmatch(r"\s*([A-Za-z0-9_.\-]+)\s*(.*?)\s*", requirement)
    assert m, requirement
    return m.group(1).lower().replace("_", "-"), m.group(2).replace(" ", "")


def test_environment_yml_matches_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    extras = project["optional-dependencies"]
    wanted = {normalise(r) for r in [*project["dependencies"], *extras["notebooks"], *extras["test"]]}
    conda = [d for d in env["dependencies"] if isinstance(d, str)]
    pip_sections = [d["pip"] for d in env["dependencies"] if isinstance(d, dict)]
    have = {normalise(d) for d in conda if normalise(d)[0] not in ("python", "pip")}
    assert have == wanted, f"only in environment.yml: {have - wanted}; only in pyproject.toml: {wanted - have}"
    assert dict(normalise(d) for d in conda)["python"] == project["requires-python"]
    assert env["channels"] == ["conda-forge"]
    assert pip_sections == [["-e ."]], "environment.yml must install the package itself"


def test_binder_installs_the_package_with_the_notebook_extra():
    """repo2docker reads binder/: pip-installs the package with the notebooks extra, on a supported Python."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lines = [ln.strip() for ln in (ROOT / "binder" / "requirements.txt").read_text().splitlines()]
    requirements = [ln for ln in lines if ln and not ln.startswith("#")]
    assert requirements == ["-e .[notebooks]"]
    assert "notebooks" in project["optional-dependencies"]
    runtime = (ROOT / "binder" / "runtime.txt").read_text().strip()
    m = re.fullmatch(r"python-3\.(\d+)", runtime)
    assert m, runtime
    minimum = re.fullmatch(r">=3\.(\d+)", project["requires-python"])
    assert minimum and int(m.group(1)) >= int(minimum.group(1))


def test_makefile_has_the_documented_targets():
    makefile = (ROOT / "Makefile").read_text()
    readme = (ROOT / "README.md").read_text()
    for target in ("test", "lab", "test-e2e", "bench", "html", "figures", "goldens"):
        assert re.search(rf"^{re.escape(target)}:", makefile, re.M), target
        assert f"make {target}" in readme, target
