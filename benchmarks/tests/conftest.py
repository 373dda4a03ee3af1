"""The lab's tests (``make test-lab``): the benchmark scripts and ``benchmarks/lib``,
imported as the package ``benchmarks`` from the repository's root."""

import os
from pathlib import Path

import pytest
import torch

#: Two torch threads when the tests run one at a time; one in each of the two
#: pytest-xdist workers of ``make test-lab``, which share the two cores, and in the
#: processes they start.
IN_A_WORKER = bool(os.environ.get("PYTEST_XDIST_WORKER"))
if IN_A_WORKER:
    os.environ["OMP_NUM_THREADS"] = "1"
torch.set_num_threads(1 if IN_A_WORKER else 2)

#: The repository's root.
ROOT = Path(__file__).resolve().parents[2]

#: The real recordings some tests read (EEGMAT): the folder ``shared/data`` beside the
#: repository's own, or the one the environment variable
#: ``BRAINDECODE_PARS_SHARED_DATA`` names. A clone of the repository alone has none.
SHARED_DATA = Path(os.environ.get("BRAINDECODE_PARS_SHARED_DATA", ROOT.parent / "shared" / "data"))

#: A small encoder configuration that keeps the tests fast.
TINY = dict(emb_dim=32, depth=1, n_heads=4, ff_dim=32)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture
def one_thread():
    """One torch thread for tiny models: on a busy two-core machine two threads wait on
    each other. Files of tiny models use it for every test:
    ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def shared_data():
    """:data:`SHARED_DATA`; the test is skipped, saying why, where that folder is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(
            f"needs the shared recordings in {SHARED_DATA}, which is absent (a clone of the "
            "repository alone has none); set BRAINDECODE_PARS_SHARED_DATA to the folder "
            "holding eegmat/"
        )
    return SHARED_DATA


@pytest.fixture(scope="session")
def eegmat(shared_data):
    """PhysioNet's EEGMAT files in the shared data (the test is skipped without them)."""
    return shared_data / "eegmat"


def assert_refused(parse, argv, message, capsys):
    """``parse(argv)`` (a benchmark's ``main`` or ``parse_args``) exits before any work,
    and its error says ``message``."""
    with pytest.raises(SystemExit):
        parse(argv)
    assert message in capsys.readouterr().err


@pytest.fixture(scope="session")
def ysyw(tmp_path_factory):
    """A small YSYW layout, ``(root, stages)`` (see ``ysyw_fixtures.make_ysyw``)."""
    from .ysyw_fixtures import make_ysyw

    return make_ysyw(tmp_path_factory.mktemp("ysyw"))


@pytest.fixture(scope="session")
def tuh_corpora(tmp_path_factory):
    """Small TUAB, TUSZ and TUEG folders in TUH's layouts, by name (see ``tuh_fixtures``)."""
    from .tuh_fixtures import make_tuab, make_tueg, make_tusz

    root = tmp_path_factory.mktemp("tuh")
    return {"tuab": make_tuab(root), "tusz": make_tusz(root), "tueg": make_tueg(root)}
