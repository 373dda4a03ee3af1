"""Sphinx configuration of braindecode-pars (builds offline: `make docs`)."""

import inspect
import os
import re
import sys
from datetime import date

from docutils import nodes
from sphinx.util import inspect as sphinx_inspect

sys.path.insert(0, os.path.abspath(".."))
# tqdm writes every refresh of a progress bar as a new line where its output is not a
# terminal: an example's output on its page would be a page of progress bars. tqdm
# reads the variable when it is imported, so before the package is.
os.environ.setdefault("TQDM_DISABLE", "1")

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
# _templates/autosummary: a page is titled by the object's name, not its full dotted
# path (the signature under the title gives the path), so that titles and the API
# sidebar fit; a class page does not repeat its signature as ``__init__``
templates_path = ["_templates"]
# the page's table of contents names a method ``fit()``, not ``PARSClassifier.fit()``
toc_object_entries_show_parents = "hide"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_validation_checks = set()
autodoc_default_options = {"members": True, "inherited-members": False}
exclude_patterns = ["_build", "_templates", "auto_examples/*.ipynb", "auto_examples/*.py"]
suppress_warnings = ["config.cache"]


class ExampleOrder:
    """The examples in the order to read them: the shipped encoder first."""

    ORDER = [
        "plot_shipped_encoder.py",
        "plot_pars_physionet_mi.py",
        "plot_moabb_comparison.py",
        "plot_compare_pretext_tasks.py",
    ]

    def __init__(self, src_dir):
        self.src_dir = src_dir

    def __call__(self, filename):
        # examples not listed come last, by file name
        return (self.ORDER.index(filename) if filename in self.ORDER else len(self.ORDER), filename)

    def __repr__(self):
        return f"<{type(self).__name__}: {self.ORDER}>"


#: ``BRAINDECODE_PARS_QUICK_EXAMPLES=1``: every example runs at the reduced size it reads
#: from that variable (fewer epochs and steps), run again even where its file has not
#: changed, and the build leaves no record of the runs, so that the next full build runs
#: every example again. The test suite builds the docs this way (tests/test_docs.py).
QUICK_EXAMPLES = os.environ.get("BRAINDECODE_PARS_QUICK_EXAMPLES") == "1"

sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": ExampleOrder,
    "run_stale_examples": QUICK_EXAMPLES,
}

html_theme = "pydata_sphinx_theme"
html_title = "braindecode-pars"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    # the first pages of the toctree (quick start, usage, examples, API) stay in the top
    # bar, the others go under "More"
    "header_links_before_dropdown": 4,
}
# headings and page titles break inside a long name rather than run under the sidebar
html_static_path = ["_static"]
html_css_files = ["custom.css"]
# pages without subpages: no empty "Section Navigation" sidebar
html_sidebars = dict.fromkeys(
    [
        "index",
        "quickstart",
        "usage",
        "encoders",
        "oeb",
        "pretraining",
        "architecture",
        "scaling",
        "reproducing",
        "benchmarks",
    ],
    [],
)
# the examples: their code and output take the sidebar's width too (the gallery's index
# and the previous and next links lead from one to the next)
html_sidebars["auto_examples/*"] = []


# -- Signatures ----------------------------------------------------------------------
# braindecode models inherit ``__new__(cls, *args, **kwargs)`` from huggingface_hub's
# ``ModelHubMixin``; autodoc reads a class's signature from ``__new__`` before
# ``__init__``, so every model rendered as ``(*args, **kwargs)``. Such a pass-through
# ``__new__`` says nothing: read the signature from ``__init__`` instead.
def _passes_through(method):
    try:
        params = list(inspect.signature(method).parameters.values())[1:]
    except (TypeError, ValueError):
        return False
    kinds = [p.kind for p in params]
    return kinds == [inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD]


def _init_signature(app, what, name, obj, options, signature, return_annotation):
    if what != "class" or not name.startswith("braindecode_pars."):
        return None
    new = getattr(obj, "__new__", None)
    if new is None or new is object.__new__ or not _passes_through(new):
        return None
    sig = sphinx_inspect.signature(obj.__init__, bound_method=True)
    return sphinx_inspect.stringify_signature(sig, show_return_annotation=False), None


# -- Text that other packages append to our docstrings ------------------------------
# braindecode appends a "Hugging Face Hub integration" section to every model's
# docstring, written for its own models (``from braindecode.models import PARS``,
# which does not exist) and pointing at a label of braindecode's documentation;
# scikit-learn's generated ``set_*_request`` methods point at its user guide and
# glossary. Offline, without intersphinx, those are broken references: point them at
# the published pages instead.
BRAINDECODE_HUB = (
    "https://braindecode.org/stable/auto_examples/model_building/plot_load_pretrained_models.html"
)
SKLEARN = "https://scikit-learn.org/stable/"
HUB_NOTE = [
    ".. rubric:: Saving, loading and the Hugging Face Hub",
    "",
    "As every braindecode model, it has braindecode's Hub methods (``save_pretrained``,",
    "``from_pretrained``, ``push_to_hub``, ``get_config`` / ``from_config``): see",
    f"`braindecode's tutorial <{BRAINDECODE_HUB}>`__. Encoders shipped with this",
    "package and pretraining runs load with :func:`braindecode_pars.load_encoder`",
    "and :func:`braindecode_pars.hub.load_pretext_model`.",
    "",
]


def _sklearn_link(default, page):
    return lambda match: f"`{match.group(1) or default} <{SKLEARN}{page}>`__"


# ``:ref:`User Guide <metadata_routing>```, ``:ref:`sklearn:metadata_routing```,
# ``:term:`meta-estimator``` and ``ClassifierMixin.score``'s
# ``:ref:`accuracy <accuracy_score>```
_EXTERNAL_REFS = [
    (
        re.compile(r":ref:`(?:([^`<]+?)\s*<)?(?:sklearn:)?metadata_routing>?`"),
        _sklearn_link("scikit-learn's metadata routing guide", "metadata_routing.html"),
    ),
    (
        re.compile(r":ref:`(?:([^`<]+?)\s*<)?accuracy_score>?`"),
        _sklearn_link("accuracy", "modules/model_evaluation.html#accuracy-score"),
    ),
    (
        re.compile(r":term:`(meta-estimators?)`"),
        _sklearn_link(None, "glossary.html#term-meta-estimator"),
    ),
]


def _external_links(app, what, name, obj, options, lines):
    for i, line in enumerate(lines):
        if line.strip() == ".. rubric:: Hugging Face Hub integration":
            # the section runs to the end of the docstring
            indent = line[: len(line) - len(line.lstrip())]
            lines[i:] = [indent + text if text else "" for text in HUB_NOTE]
            break
    for i, line in enumerate(lines):
        for pattern, link in _EXTERNAL_REFS:
            line = pattern.sub(link, line)
        lines[i] = line


# -- Citations -----------------------------------------------------------------------
# numpydoc renames a docstring's citation labels (``[Sandino2025]`` becomes
# ``[Rc816a29768d8-Sandino2025]``) so that two docstrings may cite the same work, and
# gives them back their name on the docstring's own page; a summary line that
# autosummary copies into a table (the API page) kept the mangled label.
_MANGLED = re.compile(r"^\[?R[0-9a-f]{12}-(.+?)\]?$")


def _readable_citations(app, doctree):
    for node in doctree.findall(nodes.Text):
        match = _MANGLED.match(node.astext())
        if match:
            bracket = node.astext().startswith("[")
            label = f"[{match.group(1)}]" if bracket else match.group(1)
            node.parent.replace(node, nodes.Text(label))


def _forget_quick_runs(app, exception):
    """After a quick build, remove sphinx-gallery's record of each example's file (its
    ``.md5``), by which a build skips the examples that have not changed."""
    if QUICK_EXAMPLES:
        gallery = os.path.join(app.srcdir, sphinx_gallery_conf["gallery_dirs"])
        for name in os.listdir(gallery) if os.path.isdir(gallery) else []:
            if name.endswith(".md5"):
                os.remove(os.path.join(gallery, name))


def setup(app):
    app.connect("build-finished", _forget_quick_runs)
    app.connect("autodoc-process-signature", _init_signature)
    # before numpydoc (priority 500) parses the docstring
    app.connect("autodoc-process-docstring", _external_links, priority=400)
    app.connect("doctree-read", _readable_citations, priority=600)
