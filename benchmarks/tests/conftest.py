"""The lab's tests (``make test-lab``): the benchmark scripts and ``benchmarks/lib``,
imported as the package ``benchmarks`` from the repository's root.

The torch threads, the seed, the shared recordings and the small corpora in the
layouts of TUH and YSYW are the library's test fixtures (``tests/conftest.py``), used
here as they are; this file adds what only the lab's tests use."""

from pathlib import Path

import pytest

# the library's fixtures and session hooks (the processes' temporary folder), registered
# here by being imported into this conftest
from tests.conftest import (  # noqa: F401
    TINY,
    _seed,
    eegmat,
    one_thread,
    pytest_configure,
    pytest_unconfigure,
    shared_data,
    tuh_corpora,
    ysyw,
)

#: The repository's root.
ROOT = Path(__file__).resolve().parents[2]


def assert_refused(parse, argv, message, capsys):
    """``parse(argv)`` (a benchmark's ``main`` or ``parse_args``) exits before any work,
    and its error says ``message``."""
    with pytest.raises(SystemExit):
        parse(argv)
    assert message in capsys.readouterr().err
