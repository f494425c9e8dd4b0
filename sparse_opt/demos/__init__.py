"""Plain, tested functions behind the notebooks: data, experiments and plots.

One module per notebook story. These need the ``notebooks`` extra (matplotlib,
ipywidgets) and are not imported by ``sparse_opt`` itself; the notebooks' widgets
are thin wrappers over these functions.
"""
