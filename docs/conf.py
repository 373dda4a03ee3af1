"""Sphinx configuration of braindecode-pars (builds offline: `make docs`)."""

import os
import sys
from datetime import date

sys.path.insert(0, os.path.abspath(".."))

import braindecode_pars  # noqa: E402

project = "braindecode-pars"
author = "braindecode-pars developers"
copyright = f"{date.today().year}, {author}"
version = release = braindecode_pars.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]

autosummary_generate = True
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_validation_checks = set()
autodoc_default_options = {"members": True, "inherited-members": False}
exclude_patterns = ["_build", "auto_examples/*.ipynb", "auto_examples/*.py"]
suppress_warnings = ["config.cache"]

sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
}

html_theme = "pydata_sphinx_theme"
html_title = "braindecode-pars"
html_theme_options = {"navigation_with_keys": False, "show_toc_level": 2}
