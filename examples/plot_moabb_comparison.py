"""
PARS beside CSP and the tangent space in a MOABB evaluation
===========================================================

MOABB is how EEG researchers compare decoders: a paradigm cuts a dataset's trials,
an evaluation splits them, and every pipeline, any scikit-learn classifier, is scored
on the same folds. :func:`braindecode_pars.moabb.moabb_pipeline` makes
:class:`~braindecode_pars.PARSClassifier` one of them: it resamples MOABB's trials to
the encoder's 100 Hz and hands them on in microvolts.

This example scores, with MOABB's ``WithinSessionEvaluation`` (5-fold ROC-AUC) on
left vs right fist imagery of PhysioNet-MI subject 1 (the recordings bundled with
the package, read by MOABB's own ``PhysionetMI`` dataset, no download):

- ``PARSClassifier(encoder="pars-small")``: the probe over the shipped encoder;
- ``PARSProbe()``: the same probe without an encoder block (log band power, with the
  tangent space where the training trials show it helps);
- CSP + LDA and tangent space + logistic regression, MOABB's classical references.

One subject and 45 trials: the spread over folds is wide, and this is a usage
example, not a benchmark. It needs the ``[moabb]`` extra
(``pip install braindecode-pars[moabb]``) and runs in about 30 s on a CPU.
"""

# %%
# MOABB reads the bundled files
# -----------------------------
# MOABB's ``PhysionetMI`` reads PhysioNet's files through MNE's ``eegbci`` folder
# layout. The package bundles subject 1 in that layout, so pointing MNE's eegbci path
# at it (and telling MOABB to use the dataset's own files rather than its NEMAR
# mirror) lets MOABB find every file in place: nothing is downloaded. MNE's messages
# and the deprecation warnings of MOABB's own calls (to MNE, to h5py) are turned off.
import logging
import os
import tempfile
import warnings

import matplotlib.pyplot as plt
import mne
from moabb.datasets import PhysionetMI
from moabb.evaluations import WithinSessionEvaluation
from moabb.paradigms import LeftRightImagery
from pyriemann.estimation import Covariances
from pyriemann.spatialfilters import CSP
from pyriemann.tangentspace import TangentSpace
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline

from braindecode_pars import PARSProbe
from braindecode_pars.datasets import bundled_data_path
from braindecode_pars.moabb import MOABBAdapter, moabb_pipeline

logging.getLogger("moabb").setLevel(logging.WARNING)
mne.set_log_level("ERROR")  # MNE warns through its logger
warnings.filterwarnings("ignore", module="moabb")
os.environ["MNE_DATASETS_EEGBCI_PATH"] = str(bundled_data_path())
os.environ["MOABB_DOWNLOAD_PROVIDER"] = "upstream"

dataset = PhysionetMI(imagined=True, executed=False)
dataset.subject_list = [1]
paradigm = LeftRightImagery()  # 3-s trials from the cue, 8-32 Hz, at 160 Hz
X, y, metadata = paradigm.get_data(dataset, subjects=[1])
print(f"{len(X)} trials of {X.shape[1]} channels x {X.shape[2]} samples (160 Hz), in uV")

# %%
# The pipelines
# -------------
# MOABB gives arrays at the dataset's 160 Hz; the adapter resamples them to 100 Hz
# for the encoder. ``PARSProbe()`` goes through the same adapter, so both PARS rows
# read the same windows. The classical pipelines read MOABB's arrays as they come.
sfreq = 160.0
pipelines = {
    "PARS (pars-small)": moabb_pipeline("pars-small", sfreq=sfreq, random_state=0),
    "PARSProbe (no encoder)": MOABBAdapter(PARSProbe(random_state=0), sfreq=sfreq),
    "CSP+LDA": make_pipeline(Covariances("oas"), CSP(nfilter=6), LinearDiscriminantAnalysis()),
    "TS+LR": make_pipeline(
        Covariances("oas"), TangentSpace(metric="riemann"), LogisticRegression(C=1.0)
    ),
}

# %%
# The evaluation
# --------------
# ``WithinSessionEvaluation``: MOABB's 5-fold cross-validation within the session
# (PhysionetMI has one session a subject, so a cross-session evaluation has nothing to
# split). Each row is one pipeline's mean ROC-AUC over the folds. MOABB keeps its
# results in an HDF5 file; ``hdf5_path`` puts it in a folder of this run's own (by
# default MOABB writes under ``MOABB_RESULTS`` of MNE's configuration, which must exist).
evaluation = WithinSessionEvaluation(
    paradigm=paradigm,
    datasets=[dataset],
    overwrite=True,
    save_model=False,
    random_state=0,
    hdf5_path=tempfile.mkdtemp(prefix="moabb-results-"),
)
results = evaluation.process(pipelines)
table = results.set_index("pipeline")[["score", "time", "samples"]]
table = table.rename(columns={"score": "ROC-AUC", "time": "fit time (s)", "samples": "trials"})
print(table.sort_values("ROC-AUC", ascending=False).round(3).to_string())

# %%
# The figure
# ----------
fig, ax = plt.subplots(figsize=(6, 3))
ordered = table.sort_values("ROC-AUC")
ax.barh(ordered.index, ordered["ROC-AUC"], color="tab:blue")
ax.axvline(0.5, color="grey", linestyle="--", label="chance")
ax.set_xlim(0, 1)
ax.set_xlabel("ROC-AUC (5-fold, within session)")
fig.suptitle("PhysioNet-MI S001, left vs right fist imagery (MOABB)")
ax.legend(loc="lower right")
fig.tight_layout()
plt.show()

# %%
# Scored this way, with 36 training trials a fold, the classical pipelines set the
# bar. Compare the two PARS rows with each other to see what the encoder block adds
# over band power and the tangent space on your own data; :doc:`/benchmarks` has the
# same comparison over more subjects and tasks.
