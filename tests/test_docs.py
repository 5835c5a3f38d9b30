"""The README and docs/: the user's page stays short, every link inside the repository leads to a file, and nothing
points outside the repository (a user who clones it has nothing beside it)."""
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_the_readme_is_a_users_page_of_at_most_25_kb():
    assert (ROOT / "README.md").stat().st_size <= 25_000


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
