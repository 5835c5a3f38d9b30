"""Run a script's `__main__` block inside the test process, as `python SCRIPT ARGV...` would from `cwd`.

A subprocess pays ~20-30 s of start-up here (import torch, then torch._dynamo on the first Adam) that the test
process has already paid. The result reads like subprocess.run's: returncode, stdout, stderr."""
import contextlib
import io
import os
import runpy
import subprocess
import sys


def run_script(script, *argv, cwd):
    """SystemExit becomes the return code as Python's own exit would make it (None: 0, an int: itself, anything
    else: 1, printed to stderr); any other exception propagates, with its traceback, to the test."""
    script = os.path.abspath(script)  # before the chdir
    args = [script, *map(str, argv)]
    saved_argv, saved_cwd = sys.argv, os.getcwd()
    stdout, stderr = io.StringIO(), io.StringIO()
    sys.argv = list(args)
    try:
        os.chdir(cwd)
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                runpy.run_path(script, run_name="__main__")
                code = 0
            except SystemExit as stop:
                code = stop.code
                if code is None:
                    code = 0
                elif not isinstance(code, int):
                    print(code, file=sys.stderr)
                    code = 1
    finally:
        sys.argv = saved_argv
        os.chdir(saved_cwd)
    return subprocess.CompletedProcess(args, code, stdout.getvalue(), stderr.getvalue())
