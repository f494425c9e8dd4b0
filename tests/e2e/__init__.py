"""End-to-end tests: the notebooks in a real JupyterLab, driven by headless Chromium."""
