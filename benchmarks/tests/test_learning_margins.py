"""benchmarks/learning_margins.py: which tests it finds, and the margins it reports."""

from benchmarks import learning_margins


def test_it_finds_the_test_functions_that_call_learned(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text(
        "from tests._learning import learned\n"
        "def test_learns():\n    learned(0.9, above=0.8)\n"
        "def test_other():\n    assert 1\n"
        "def helper():\n    learned(0.9, above=0.8)\n"
    )
    assert learning_margins.learning_tests(tmp_path) == ["tests/test_a.py::test_learns"]


def test_the_margin_is_the_worst_run_less_the_threshold_on_either_side():
    rows = [
        {"test": "t::a", "what": "acc", "score": s, "above": 0.8, "below": None}
        for s in (0.9, 0.85, 0.95)
    ] + [
        {"test": "t::a", "what": "noise", "score": s, "above": None, "below": 0.6}
        for s in (0.5, 0.62)
    ]
    acc, noise = learning_margins.summarise(rows)
    assert (acc["worst"], acc["runs"], acc["holds"]) == (0.85, 3, True)
    assert abs(acc["margin"] - 0.05) < 1e-12 and abs(acc["mean"] - 0.9) < 1e-12
    assert abs(acc["sd"] - 0.05) < 1e-12  # the sample sd of 0.85, 0.9, 0.95
    assert noise["worst"] == 0.62 and not noise["holds"] and abs(noise["margin"] + 0.02) < 1e-12
    lines = learning_margins.report([acc, noise], "python -m x", "abc", 3, [])
    assert any("**fails**" in line for line in lines)
    assert lines[-1] == "1 of 2 scores hold at every run."
