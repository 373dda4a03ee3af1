"""``warn_once``: a warning shown once per process as the filters' action means it, though
code between two calls changes the filters (as scikit-learn's input checks do)."""

import uuid
import warnings

import pytest

from braindecode_pars._util.logs import warn_once


def _text():
    """A text no other test warns with (what was shown stays shown in the process)."""
    return f"a warning of this test alone ({uuid.uuid4().hex})"


def _a_fold():
    """What scikit-learn's check_array does at every call: catch_warnings and a filter,
    which makes Python forget the warnings its default action has shown."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)


def _warn_from_one_line(text, how):
    how(text, UserWarning, stacklevel=2)


@pytest.mark.parametrize("action", ["default", "module", "once"])
def test_a_warning_is_shown_once_where_python_forgets_it_between_folds(action):
    text = _text()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter(action)
        for _ in range(4):
            _a_fold()
            _warn_from_one_line(text, warnings.warn)
    assert len(caught) == 4  # Python's own registry: forgotten at every fold
    text = _text()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter(action)
        for _ in range(4):
            _a_fold()
            _warn_from_one_line(text, warn_once)
    assert [str(w.message) for w in caught] == [text]
    assert caught[0].filename == __file__ and caught[0].category is UserWarning


def test_the_location_is_the_callers_as_stacklevel_says_and_lines_count_apart():
    text = _text()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        warn_once(text)
        warn_once(text)  # another line: shown again, as Python's default action does
        for _ in range(3):
            warn_once(text)  # this line: once
    assert len(caught) == 3
    assert len({w.lineno for w in caught}) == 3
    text = _text()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("module")  # once per module, whatever the line
        warn_once(text)
        warn_once(text)
    assert len(caught) == 1


def test_always_shows_every_time_error_raises_every_time_and_ignore_shows_later():
    text = _text()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            _warn_from_one_line(text, warn_once)
    assert len(caught) == 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(2):
            with pytest.raises(UserWarning, match="a warning of this test alone"):
                _warn_from_one_line(text, warn_once)
    text = _text()
    with warnings.catch_warnings(record=True) as caught:
        for action in ("ignore", "default", "default"):
            warnings.simplefilter(action)
            _warn_from_one_line(text, warn_once)  # hidden first, so not counted as shown
    assert len(caught) == 1


def test_a_filter_by_message_category_or_module_applies_as_to_warnings_warn():
    text = _text()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        warnings.filterwarnings("ignore", message="a warning of this test", module=__name__)
        warn_once(text)
        warnings.filterwarnings("always", category=DeprecationWarning)
        for _ in range(2):
            warn_once(text, DeprecationWarning)
        warn_once(UserWarning(_text()))  # an instance: its own class is the category
    assert [w.category for w in caught] == [DeprecationWarning, DeprecationWarning]
