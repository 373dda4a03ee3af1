"""The figures of braindecode_pars.viz: the shift matrices from a model or its grids."""

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from braindecode_pars import PARS, PatchEncoder
from braindecode_pars.viz import plot_shift_matrices, plot_training_curves

from .conftest import TINY

pytestmark = pytest.mark.usefixtures("one_thread")


def _tiny_pars():
    return PARS(n_times=300, sfreq=10, n_patches=12, pos_mask_ratio=0.75, **TINY)


def _panels(fig):
    """The three images of the figure (prediction, target, error) as arrays."""
    return [np.asarray(ax.images[0].get_array()) for ax in fig.axes if ax.images]


def test_a_model_and_windows_draw_what_predict_shifts_gives_for_the_same_draws():
    model, X = _tiny_pars().train(), torch.randn(3, 1, 300)
    fig = plot_shift_matrices(model, X, index=1, generator=torch.Generator().manual_seed(0))
    assert model.training  # put back as it was
    with torch.no_grad():
        out = model.eval().predict_shifts(X, generator=torch.Generator().manual_seed(0))
    from_grids = plot_shift_matrices(out, index=1)
    assert len(_panels(fig)) == 3
    for drawn, expected in zip(_panels(fig), _panels(from_grids), strict=True):
        np.testing.assert_allclose(drawn, expected)
    # the prediction panel is zero exactly outside the masked pairs (3 of 12 kept their PE)
    assert (_panels(fig)[0] != 0).sum() <= 9 * 9
    plt.close("all")


def test_the_forward_output_is_refused_with_the_call_that_draws_it():
    model = _tiny_pars()
    with torch.no_grad():
        out = model(torch.randn(2, 1, 300))
    with pytest.raises(ValueError, match=r"lacks the shift grids.*plot_shift_matrices\(model, X\)"):
        plot_shift_matrices(out)


@pytest.mark.parametrize(
    ("source", "X", "error", "match"),
    [
        pytest.param("model", None, ValueError, "'X' is None", id="model-without-windows"),
        pytest.param(
            PatchEncoder(sfreq=10, **TINY), torch.randn(1, 1, 300), TypeError,
            "PARS model.*got a PatchEncoder", id="an-encoder",
        ),
        pytest.param([1, 2], None, TypeError, "got a list", id="a-list"),
        pytest.param("grids", torch.randn(1, 1, 300), ValueError, "leave them None",
                     id="grids-with-windows"),
    ],
)  # fmt: skip
def test_bad_sources_are_refused_naming_the_parameter(source, X, error, match):
    model = _tiny_pars()
    if source == "model":
        source = model
    elif source == "grids":
        with torch.no_grad():
            source = model.predict_shifts(torch.randn(1, 1, 300))
    with pytest.raises(error, match=match):
        plot_shift_matrices(source, X)


def test_training_curves_draw_validation_recorded_on_some_epochs_only():
    # PretrainNet validates on reported epochs only (eval_every_steps): rows 2 and 4 here
    history = [{"epoch": e, "train_loss": 1 / e, "train_skill": 0.1 * e} for e in (1, 2, 3, 4)]
    for row in history[1::2]:
        row.update(valid_loss=1.1 / row["epoch"], valid_skill=0.05 * row["epoch"])
    fig = plot_training_curves(history, None)
    loss_ax, skill_ax = fig.axes[0], fig.axes[1]
    lines = {line.get_label(): line for line in loss_ax.lines + skill_ax.lines}
    np.testing.assert_allclose(lines["valid loss"].get_xdata(), [2, 4])
    np.testing.assert_allclose(lines["valid loss"].get_ydata(), [0.55, 0.275])
    np.testing.assert_allclose(lines["validation"].get_ydata(), [0.1, 0.2])
    assert lines["validation"].get_marker() == "o"  # two points, each drawn
    np.testing.assert_allclose(lines["train"].get_xdata(), [1, 2, 3, 4])
    plt.close("all")
