import getpass
import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest
import torch
from skorch.callbacks import Callback

from ._learning import SEED

#: Two torch threads when the tests run one at a time; one in each of make test's two
#: pytest-xdist workers, which share the two cores, and in the processes they start.
#: ``PARS_TEST_THREADS`` sets another count (benchmarks/learning_margins.py measures the
#: learning tests at one and two).
IN_A_WORKER = bool(os.environ.get("PYTEST_XDIST_WORKER"))
if IN_A_WORKER:
    os.environ["OMP_NUM_THREADS"] = "1"
torch.set_num_threads(int(os.environ.get("PARS_TEST_THREADS") or (1 if IN_A_WORKER else 2)))


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(SEED)  # 0 but where the learning tests' margins are measured


@pytest.fixture
def one_thread():
    """One torch thread for tiny models: on a busy two-core machine the two threads this
    file asks for wait on each other (ten times slower). Files of tiny models use it for
    every test: ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    threads = torch.get_num_threads()
    torch.set_num_threads(int(os.environ.get("PARS_TEST_THREADS") or 1))
    yield
    torch.set_num_threads(threads)


#: The real recordings some tests read (EEGMAT, Sleep-EDF, the Muse headband): the folder
#: ``shared/data`` beside the repository's own, or the one the environment variable
#: ``BRAINDECODE_PARS_SHARED_DATA`` names. A clone of the repository alone has none.
SHARED_DATA = Path(
    os.environ.get(
        "BRAINDECODE_PARS_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"
    )
)


@pytest.fixture(scope="session")
def shared_data():
    """:data:`SHARED_DATA`; the test is skipped, saying why, where that folder is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(
            f"needs the shared recordings in {SHARED_DATA}, which is absent (a clone of the "
            "repository alone has none); set BRAINDECODE_PARS_SHARED_DATA to the folder "
            "holding eegmat/, sleep-edf-atm/ and muse-cueing/"
        )
    return SHARED_DATA


@pytest.fixture(scope="session")
def eegmat(shared_data):
    """PhysioNet's EEGMAT files in the shared data (the test is skipped without them)."""
    return shared_data / "eegmat"


#: A small encoder configuration that keeps unit tests fast.
TINY = dict(emb_dim=32, depth=1, n_heads=4, ff_dim=32)


class InterruptAt(Callback):
    """A skorch callback that raises KeyboardInterrupt (Ctrl-C) at the end of ``epoch``."""

    def __init__(self, epoch):
        self.epoch = epoch

    def on_epoch_end(self, net, **kwargs):
        if len(net.history) == self.epoch:
            raise KeyboardInterrupt


#: Settings that keep unit tests fast, by stage: a 16-feature, one-block encoder
#: (``SMALL_ENCODER``: PatchEncoder sizes), pretrained for 2 epochs of batch 16 on 6
#: patches (``SMALL_PRETRAINER``: PARSPretrainer parameters), under a neural head trained
#: for 4 epochs of batch 16 (``SMALL_FINETUNER``: PARSFineTuner parameters); quiet.
#: ``PARSClassifier(encoder=PARSPretrainer(**SMALL_PRETRAINER),
#: head=PARSFineTuner(**SMALL_FINETUNER), random_state=0, verbose=0)``.
SMALL_ENCODER = dict(emb_dim=16, depth=1, n_heads=2, ff_dim=16)
SMALL_PRETRAINER = dict(SMALL_ENCODER, n_patches=6, max_epochs=2, batch_size=16, verbose=0)
SMALL_FINETUNER = dict(max_epochs=4, batch_size=16, verbose=0)

#: The same settings as the flat parameters of PARSClassifier before it composed the two
#: stages, for the test files not yet written for the stages.
SMALL_CLASSIFIER = dict(
    encoder=dict(emb_dim=16, depth=1, n_heads=2, ff_dim=16),
    n_patches=6,
    pretrain_epochs=2,
    pretrain_batch_size=16,
    max_epochs=4,
    batch_size=16,
    random_state=0,
    verbose=0,
)


@pytest.fixture(scope="session")
def ysyw(tmp_path_factory):
    """A small YSYW layout, ``(root, stages)`` (see ``ysyw_fixtures.make_ysyw``)."""
    from .ysyw_fixtures import make_ysyw

    return make_ysyw(tmp_path_factory.mktemp("ysyw"))


@pytest.fixture(scope="session")
def eesm17(tmp_path_factory):
    """A small EESM17 BIDS dataset, ``(root, stages)`` (see ``bids_fixtures.make_eesm17``)."""
    from .bids_fixtures import make_eesm17

    return make_eesm17(tmp_path_factory.mktemp("bids"))


@pytest.fixture(scope="session")
def tuh_corpora(tmp_path_factory):
    """Small TUAB, TUSZ and TUEG folders in TUH's layouts, by name (see ``tuh_fixtures``)."""
    from .tuh_fixtures import make_tuab, make_tueg, make_tusz

    root = tmp_path_factory.mktemp("tuh")
    return {"tuab": make_tuab(root), "tusz": make_tusz(root), "tueg": make_tueg(root)}


_INTERNALS = Path(__file__).parent / "internals"

#: The folder the processes the tests start write their temporary files in, set by the
#: pytest process that made it (a pytest-xdist worker inherits its controller's).
_TEMPORARY = "BRAINDECODE_PARS_TESTS_TMPDIR"
_MADE = {}


def pytest_configure(config):
    """The processes the tests start keep their temporary folders (torchrun's log
    folders, ``torchelastic_*``, one per launch) in a folder of this test session, which
    its end removes, instead of leaving them in the system's. torch's compile cache stays
    where it was, so that compiled steps are not compiled anew every session.
    ``benchmarks/tests/conftest.py`` registers the same hooks: a session made the folder
    once (its workers, and hooks registered twice, find it made)."""
    if os.environ.get(_TEMPORARY):
        return
    system = tempfile.gettempdir()
    _MADE["environ"] = {k: os.environ.get(k) for k in ("TMPDIR", "TORCHINDUCTOR_CACHE_DIR")}
    user = re.sub(r'[\\/:*?"<>|]', "_", getpass.getuser())  # as torch's default_cache_dir
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(system, f"torchinductor_{user}"))
    _MADE["folder"] = tempfile.mkdtemp(prefix="bdp-tests-")  # short: AF_UNIX paths in it
    os.environ[_TEMPORARY] = os.environ["TMPDIR"] = _MADE["folder"]


def pytest_unconfigure(config):
    """The session's temporary folder removed, the environment as the session found it."""
    folder = _MADE.pop("folder", None)
    if folder is None:
        return
    shutil.rmtree(folder, ignore_errors=True)
    os.environ.pop(_TEMPORARY, None)
    for key, value in _MADE.pop("environ").items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def pytest_collection_modifyitems(config, items):
    """Mark the tests of tests/internals/ ``internals``: those bound to the package's
    private names, so that ``-m "not internals"`` runs the tests of its contract alone."""
    for item in items:
        if _INTERNALS in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.internals)
