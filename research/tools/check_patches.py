"""Check that every research patch applies at the commit its row in research/README.md names.

Usage: python research/tools/check_patches.py   (from anywhere in the repository; stdlib and git only)

Each row of the README's table of screens names one or more patches in its first cell and the commit they apply
to in its second. For each (patch, commit) the check reads the commit's tree into a throwaway index and runs
`git apply --cached --check`, so no worktree is touched. A patch in research/patches/ with no row fails too.
Prints one line per check, PATCH COMMIT ok|FAILED, and exits 1 if any failed.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

ROOT = subprocess.check_output(["git", "rev-parse", "--show-toplevel"], text=True).strip()
PATCHES = os.path.join(ROOT, "research", "patches")


def rows(readme):
    """(patch, commit) for every table row whose first cell names a .patch."""
    for line in open(readme, encoding="utf-8"):
        cells = [cell.strip() for cell in line.split("|")]
        if len(cells) > 3 and re.fullmatch(r"[0-9a-f]{7,40}", cells[2]):
            for patch in re.findall(r"`([\w.-]+\.patch)`", cells[1]):
                yield patch, cells[2]


def applies(patch, commit):
    """Whether `patch` applies to `commit`'s tree, checked in a temporary index."""
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, GIT_INDEX_FILE=os.path.join(tmp, "index"))
        check = ["git", "apply", "--cached", "--check", os.path.join(PATCHES, patch)]
        for command in (["git", "read-tree", commit], check):
            if subprocess.run(command, cwd=ROOT, env=env, capture_output=True).returncode:
                return False
    return True


def main():
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    checks = list(rows(os.path.join(ROOT, "research", "README.md")))
    failed = 0
    for patch, commit in checks:
        ok = os.path.exists(os.path.join(PATCHES, patch)) and applies(patch, commit)
        failed += not ok
        print(f"{patch:40} {commit:10} {'ok' if ok else 'FAILED'}")
    for patch in sorted(set(os.listdir(PATCHES)) - {patch for patch, _ in checks}):
        failed += 1
        print(f"{patch:40} {'(no row)':10} FAILED")
    print(f"{len(checks)} checks, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
