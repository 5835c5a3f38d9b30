"""The README and docs/: the user's pages stay short and current, every link inside the repository leads to a file,
nothing points outside the repository (a user who clones it has nothing beside it), and no user-facing text names a
flag or a part that has left the scripts (the lab notes under research/ keep their history)."""
import io
import re
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SCRIPTS = ["p3o_atari.py", "p3o_ocean.py", "ppo_baseline.py"]
# Flags the scripts once had (the research log, research/ablations.md and research/patches/ name them), and the names
# of the parts behind them. Each is checked to be gone from the scripts' Args below.
REMOVED_FLAGS = [
    "--bootstrap-after", "--bootstrap-centre", "--bootstrap-targets", "--bootstrap-tie-z", "--bootstrap-trickle",
    "--clock-envs", "--clock-interval", "--cut", "--horizon-cut", "--min-horizon", "--puf", "--weight-norm", "--tail",
    "--sigma", "--sigma-floor", "--sigma-inside", "--zeros-after-terminal", "--effect-floor", "--effect-memory",
    "--scale-effect-floor", "--subtract-earlier-effects", "--subtract-later-effects", "--far-weight", "--action-boost",
    "--weight-gamma", "--return-loss-coef", "--nll-coef", "--nll-detach", "--tie-z", "--select-discount",
    "--select-ema", "--select-gamma-only",
]
REMOVED_NAMES = [flag[2:].replace("-", "_") for flag in REMOVED_FLAGS if flag not in ("--cut", "--tail", "--sigma", "--tie-z")]  # tie_z: today's function
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_the_readme_is_a_users_page_of_at_most_12_kb():
    assert (ROOT / "README.md").stat().st_size <= 12_000


def test_the_readme_gives_its_first_python_command_within_its_first_40_lines():
    lines = (ROOT / "README.md").read_text().splitlines()
    first = next(i for i, line in enumerate(lines, 1) if line.lstrip().startswith("python "))
    assert first <= 40, first
    assert any(line.startswith("python p3o_atari.py --horizon 128") for line in lines[:40])


def test_the_users_docs_are_at_most_80_kb_in_all():
    assert sum(page.stat().st_size for page in (ROOT / "docs").glob("*.md")) <= 80_000


def test_the_lab_notes_live_in_research_not_docs():
    assert {page.name for page in (ROOT / "docs").glob("*.md")} == {"algorithm.md", "results.md", "probes.md", "gpu.md", "torchrun.md"}
    assert all((ROOT / "research" / name).exists() for name in ("research_log.md", "ablations.md", "minatar.md", "gpu_log.md"))


def test_the_readme_gives_the_test_command_that_ci_runs():
    readme = (ROOT / "README.md").read_text()
    assert "python -m pytest -q tests" in readme
    assert "pytest -q tests" in (ROOT / ".ci" / "run").read_text()


def test_every_relative_link_in_the_readme_and_docs_leads_to_a_file():
    missing = []
    for page in PAGES:
        for target in LINK.findall(page.read_text()):
            if target.startswith(("http://", "https://", "#", "mailto:")):
                continue
            path = target.split("#", 1)[0]
            if not (page.parent / path).exists():
                missing.append(f"{page.relative_to(ROOT)}: {target}")
    assert not missing, missing


def test_nothing_in_the_repository_points_outside_it():
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    texts = [name for name in files if name.endswith((".py", ".md", ".sh", ".cu", ".h", ".txt", ".toml", ".cfg", ".yml", ".yaml")) or name.startswith(".ci/")]
    assert len(texts) > 10
    outside = "../" + "shared"  # spelled in two parts, so this file does not match itself
    offending = [name for name in texts if outside in (ROOT / name).read_text(errors="replace")]
    assert not offending, offending


def mentions(text, names):
    """The names that occur in text as whole words (a flag not followed by more of a flag's letters)."""
    return [name for name in names if re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text)]


def comments_and_docstrings(path):
    """A script's comments and string literals (its docstrings and help texts), not its code."""
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
    return "\n".join(token.string for token in tokens if token.type in (tokenize.COMMENT, tokenize.STRING))


def test_the_removed_flags_are_gone_from_the_scripts():
    """The list below stays honest: a flag on it is in no script's Args (a flag put back must leave the list)."""
    for script in SCRIPTS:
        result = subprocess.run([sys.executable, str(ROOT / script), "--help"], capture_output=True, text=True, cwd=ROOT, timeout=120)
        assert result.returncode == 0, result.stderr
        assert "--horizon" in result.stdout or script == "ppo_baseline.py"
        assert not mentions(result.stdout, REMOVED_FLAGS), (script, mentions(result.stdout, REMOVED_FLAGS))


@pytest.mark.parametrize("path", [*PAGES, *(ROOT / script for script in SCRIPTS)], ids=lambda path: path.name)
def test_no_users_text_names_a_removed_flag_or_part(path):
    text = path.read_text() if path.suffix == ".md" else comments_and_docstrings(path)
    assert not mentions(text, REMOVED_FLAGS + REMOVED_NAMES), mentions(text, REMOVED_FLAGS + REMOVED_NAMES)


def test_the_header_and_the_readme_count_the_p3o_blocks_as_the_code_has_them():
    """p3o_atari.py's header says how many `P3O:` blocks it has and how many sit in train; the README repeats the
    total. Both are counted from the code, so a block added or removed without the text fails here."""
    import ast

    text = (ROOT / "p3o_atari.py").read_text()
    lines = text.splitlines()
    opened = [number for number, line in enumerate(lines, 1) if line.lstrip().startswith("# P3O:")]
    assert len(opened) == sum(line.strip() == "# end P3O" for line in lines)
    train = next(node for node in ast.parse(text).body if isinstance(node, ast.FunctionDef) and node.name == "train")
    in_train = sum(train.lineno <= number <= train.end_lineno for number in opened)
    words = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"]
    header = " ".join(line.lstrip("# ") for line in lines[:6])
    assert f"They sit in {len(opened)} blocks" in header, header
    assert f"{words[in_train]} in train" in header, (in_train, header)
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert f"differs from `ppo_baseline.py` in {len(opened)} blocks" in readme


def test_the_readmes_box_states_the_scripts_defaults():
    """The README's algorithm box names the defaults it describes: H, lam (and lam^32 in its cost line), the tie gate's
    threshold, the value fraction, the window loss's coefficient and the clock's rate, prior and last row. Each must be
    the default of both P3O scripts, so the box cannot drift from the code."""
    import p3o_atari
    import p3o_ocean

    readme = (ROOT / "README.md").read_text()
    box = readme[readme.index("```\nmu ") : readme.index("```", readme.index("```\nmu ") + 3)]

    def number(pattern):
        found = re.findall(pattern, box)
        assert len(found) == 1, (pattern, found)
        return float(found[0])

    lam = number(r"\(--td-lambda ([\d.]+)\)")
    stated = {
        "horizon": number(r"\(--horizon (\d+)\)"),
        "td_lambda": lam,
        "value_fraction": number(r"\(--value-fraction ([\d.]+)\)"),
        "window_loss_coef": number(r"\+ ([\d.]+) x 0\.5 \(sum_j"),
        "TIE_Z": number(r"\) > ([\d.]+),"),
        "CLOCK_RATE": number(r"c\[s, j\] \+= ([\d.]+) x"),
        "CLOCK_PRIOR": number(r"\(their count \+ (\d+)\)"),
        "CLOCK_LAST_ROW": number(r"rows capped at (\d+)"),
    }
    assert number(r"with weight lam\^j \(([\d.]+)\^32") == lam
    assert abs(number(r"\^32 ~ ([\d.e-]+)\)") - lam**32) <= 0.05 * lam**32
    assert "on half the decisions" in box and "(--clock)" in box
    for module in (p3o_atari, p3o_ocean):
        defaults = module.Args()
        actual = {"horizon": defaults.horizon, "td_lambda": defaults.td_lambda, "value_fraction": defaults.value_fraction,
                  "window_loss_coef": defaults.window_loss_coef, "TIE_Z": module.TIE_Z, "CLOCK_RATE": module.CLOCK_RATE,
                  "CLOCK_PRIOR": module.CLOCK_PRIOR, "CLOCK_LAST_ROW": module.CLOCK_ROWS - 1}
        assert stated == actual, (module.__name__, stated, actual)
        assert defaults.value_fraction == 0.5 and defaults.clock  # "half", and the clock is on
