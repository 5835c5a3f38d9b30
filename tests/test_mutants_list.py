"""tests/mutants.py's named bugs still match the scripts: each old snippet occurs exactly once in its file, and each
test a mutant names exists. A snippet the scripts no longer contain fails here, in CI, rather than leaving the
mutation run (which CI does not run) to find it."""
from mutants import MUTANTS, snippet_problems


def test_every_mutant_still_applies():
    assert snippet_problems() == []
    assert len(MUTANTS) >= 12
    assert {"ocean_tie_gate_inverted", "ocean_value_window_off_by_one", "atari_nll_log_sigma_sign", "evaluate_ignores_the_weights", "video_refusal_skipped"} <= {m[0] for m in MUTANTS}


def test_the_check_finds_a_stale_snippet(tmp_path):
    (tmp_path / "p3o_ocean.py").write_text("x = 1\nx = 1\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("def test_b():\n    pass\n")
    problems = snippet_problems(tmp_path, [("gone", "p3o_ocean.py", "y = 2", "y = 3", ["tests/test_a.py::test_b"]),
                                           ("twice", "p3o_ocean.py", "x = 1", "x = 2", ["tests/test_a.py::test_c"])])
    assert len(problems) == 3 and "occurs 0 times" in problems[0] and "occurs 2 times" in problems[1] and "no test" in problems[2]
