"""The window store: windows preprocessed once and written to one memory-mappable file
with an index, resumable while it is built, read by any number of processes.

- :mod:`~braindecode_pars.store.write`: :func:`write_window_store`, the build's steps;
- :mod:`~braindecode_pars.store._build`: what a build is made of (units, preparation,
  float16 encoding, progress);
- :mod:`~braindecode_pars.store._journal`: the journal that makes a build resumable;
- :mod:`~braindecode_pars.store.errors`: the errors of a build, which callers catch;
- :mod:`~braindecode_pars.store._workers`: the build's worker processes;
- :mod:`~braindecode_pars.store._read`: :func:`read_window_store`, :func:`store_summary`;
- :mod:`~braindecode_pars.store.identity`: :func:`anonymize`, the rewrite of stores and
  runs written before ``subject_from`` that name people.
"""

from braindecode_pars.store._read import read_window_store, store_summary
from braindecode_pars.store.identity import anonymize
from braindecode_pars.store.write import write_window_store

__all__ = ["anonymize", "read_window_store", "store_summary", "write_window_store"]
