"""sparse_opt.demos.scale: bytes per parameter by formula against the real optimizers' arrays, and the arithmetic."""

import numpy as np
import pytest

from sparse_opt import SparseAdagradTable, SparseAdamTable, SparseSgdTable
from sparse_opt.demos import scale as sc


@pytest.mark.parametrize("layout", sc.LAYOUTS, ids=[layout.name for layout in sc.LAYOUTS])
@pytest.mark.parametrize("cols", [1, 16, 128])
def test_the_formula_is_what_the_optimizer_keeps(layout: sc.Layout, cols: int) -> None:
    params, state = sc.measured_bytes_per_param(layout, rows=32, cols=cols)
    per_entry, per_row = layout.state_terms()
    assert params == layout.param_bytes
    assert state == per_entry + per_row / cols
    assert params + state == layout.bytes_per_param(cols)


def test_formulas_by_hand() -> None:
    by_name = {layout.name: layout for layout in sc.LAYOUTS}
    expected = {
        "Adam, float32": ("4 + 8 + 8 / cols", 12.0625),
        "Adam, float16 weights, float32 state": ("2 + 8 + 8 / cols", 10.0625),
        "Adam, float16 weights and state (torch's)": ("2 + 4 + 8 / cols", 6.0625),
        "SGD with momentum, float32": ("4 + 4", 8.0),
        "row-wise Adagrad, float16 weights": ("2 + 4 / cols", 2.03125),
    }
    assert set(by_name) == set(expected)
    for name, (formula, at_128) in expected.items():
        assert by_name[name].formula() == formula
        assert by_name[name].bytes_per_param(128) == at_128
    # the README's worked example: 50,000,000 x 128, in GB of 1e9 bytes
    gb = [round(layout.table_bytes(50_000_000, 128) / 1e9, 1) for layout in sc.LAYOUTS]
    assert gb == [77.2, 64.4, 38.8, 51.2, 13.0]
    assert sc.Layout("plain SGD has no state", "sgd_momentum", "float16", "param").formula() == "2 + 2"


def test_make_builds_the_configured_optimizer() -> None:
    table16 = np.zeros((4, 8), np.float16)
    adam = sc.Layout("a", "adam", "float16", "param").make(table16)
    assert isinstance(adam, SparseAdamTable) and adam.m.dtype == np.float16
    assert sc.Layout("a", "adam", "float16").make(np.zeros((4, 8), np.float16)).m.dtype == np.float32
    assert isinstance(sc.Layout("g", "adagrad_rowwise", "float32").make(np.zeros((4, 8), np.float32)), SparseAdagradTable)
    assert isinstance(sc.Layout("s", "sgd_momentum", "float32").make(np.zeros((4, 8), np.float32)), SparseSgdTable)


def test_layouts_refuse_unknown_settings() -> None:
    with pytest.raises(ValueError, match="optimizer must be one of"):
        sc.Layout("x", "lamb", "float32")
    with pytest.raises(ValueError, match="param_dtype"):
        sc.Layout("x", "adam", "float64")
    with pytest.raises(ValueError, match="state_dtype"):
        sc.Layout("x", "adam", "float16", "bfloat16")


def test_fits_and_the_arithmetic() -> None:
    gib24 = 24 * 2**30
    assert [layout.name for layout in sc.fits(sc.LAYOUTS, 50_000_000, 128, gib24)] == ["row-wise Adagrad, float16 weights"]
    assert len(sc.fits(sc.LAYOUTS, 1_000_000, 128, gib24)) == len(sc.LAYOUTS)
    assert sc.step_ms(10.0, 1000, 100) == pytest.approx(1.0)  # 100,000 entries at 10 us per 1000
    assert sc.catch_up_seconds(1.0, 1_000_000, 1000) == pytest.approx(1.0)  # 1e9 entries at 1 ns
