"""``benchmarks/lib/selection.py``'s probe rows (``bench_patch_density``'s,
once shared with the retired ``bench_normalization``): which rows it writes, and that
a second call fits none of them again."""

import numpy as np

from benchmarks.lib import selection
from benchmarks.tests.conftest import TINY
from braindecode_pars.models.encoder import PatchEncoder


def test_the_rows_asked_for_are_written_once_per_draw_and_kept(tmp_path, monkeypatch):
    # one block task of three blocks (1 and 2 labelled in turn, 3 scored)
    rng = np.random.default_rng(0)
    units, y = np.repeat([1, 2, 3], 12), np.tile([0, 1], 18)
    X = rng.standard_normal((36, 3, 400)).astype(np.float32) + y[:, None, None]
    load = lambda task, part: (X, y, units, (1, 2), (3,), 100.0)  # noqa: E731
    encoder = PatchEncoder(sfreq=100.0, **TINY)
    csv = tmp_path / "rows.csv"
    references = ("probe[rand, 1]", "probe[bp+ts, 100]")
    args = (["enc"], csv, lambda name: encoder, ("probe[enc, 1]",))
    kwargs = dict(tasks=["mi-imagery-lr"], load=load, references=references)

    scores = selection.evaluate(*args, **kwargs)
    rows = sorted(zip(scores.encoder, scores.method, scores.draw, strict=True))
    expected = [("enc", "probe[enc, 1]", d) for d in selection.DRAWS]
    expected += [("reference", m, d) for m in references for d in selection.DRAWS]
    assert rows == sorted(expected)
    assert scores.balanced_accuracy.between(0, 1).all()

    def refit(*a, **k):
        raise AssertionError("a row already in the CSV was fitted again")

    monkeypatch.setattr(selection, "fit_probe_row", refit)
    assert len(selection.evaluate(*args, **kwargs)) == len(scores)
