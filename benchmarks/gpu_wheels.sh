#!/usr/bin/env bash
# The Python packages a lent GPU machine lacks for these scripts, as wheels in .whl/ (git-ignored), small enough
# to travel with the working tree (64 MiB a call, the repository included).
#
#     bash benchmarks/gpu_wheels.sh            # cp312 wheels, for the GPU machine's Python 3.12
#     PYTHON_VERSION=3.11 bash benchmarks/gpu_wheels.sh .whl311   # the same set for another Python, elsewhere
#
# The machine has PyTorch, CuPy, NumPy, tensorboard, matplotlib, cloudpickle and absl-py, but no EnvPool,
# gymnasium or tyro. EnvPool 1.2.5's wheel is 52.8 MB and its ROM package envpool-assets 62.4 MB (MuJoCo, ViZDoom,
# gfootball and Procgen files beside 0.6 MB of Atari ROMs), 115 MB together: they do not fit. So this script
# downloads the official wheels with pip (hash-checked from PyPI) and writes two trimmed copies of them:
#   envpool:        the package's top-level modules, envpool/python/ and envpool/atari/; the other env families
#                   (each imports its compiled simulator on import) go, and envpool/entry.py, which imports every
#                   family's registration, is rewritten to import Atari's alone;
#   envpool-assets: atari/roms only.
# Each trimmed wheel keeps its name and version and gets a RECORD of the files it holds, so `envpool.make` of an
# Atari id runs the wheel's own compiled code; any other family's id is unknown there. Everything else is
# downloaded as it is, with --no-deps: each package below is named on purpose, nothing more is pulled in.
# On the GPU machine (research/gpu_log.md has the whole command):
#     python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
#     export PYTHONPATH=/tmp/site
#
# Makes no figure: the wheels every GPU command above needs (research/gpu_log.md); a minute or two of downloads.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${1:-.whl}
python_version=${PYTHON_VERSION:-3.12}
packages=(
  envpool==1.2.5 envpool-assets==0.3.0                     # trimmed below
  gymnasium==1.4.0 farama-notifications==0.0.6             # EnvPool's gymnasium API (cloudpickle is there)
  dm-env==1.6 optree==0.20.0                               # imported by envpool.python at import time
  tyro==1.0.17 docstring-parser==0.18.0 typeguard==4.6.1   # the scripts' command line
  typing-extensions==4.15.0                                # typeguard needs >= 4.14; the machine's is not known
  minatar==1.0.15                                          # MinAtar's games (its plotting dependencies are not needed to train)
)
download=$(mktemp -d)
trap 'rm -rf "$download"' EXIT
platforms=()
for tag in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64; do
  platforms+=(--platform "$tag")
done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$python_version" --implementation cp \
  "${platforms[@]}" -d "$download" "${packages[@]}"

rm -rf "$dest"
mkdir -p "$dest"
python3 - "$download" "$dest" <<'EOF'
import base64, hashlib, shutil, sys, zipfile
from pathlib import Path

download, dest = map(Path, sys.argv[1:])


ATARI_ONLY_ENTRY = b'"""Entry point for the envs\' registration: Atari alone (trimmed by benchmarks/gpu_wheels.sh)."""\n\nimport envpool.atari.registration  # noqa: F401\n'


def keep_envpool(name):
    top_level = name.startswith("envpool/") and name.count("/") == 1  # __init__.py, entry.py, registration.py, ...
    return top_level or name.startswith(("envpool/atari/", "envpool/python/", "envpool-"))  # envpool-1.2.5.dist-info/


def keep_assets(name):
    return name.startswith(("envpool_assets/atari/roms/", "envpool_assets-")) or name == "envpool_assets/__init__.py"


def trim(wheel, keep):
    """A copy of `wheel` holding only the files `keep` accepts, with a RECORD rewritten to match them."""
    out = dest / wheel.name
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        record_name = next(n for n in source.namelist() if n.endswith(".dist-info/RECORD"))
        rows = []
        for info in source.infolist():
            if info.filename == record_name or not keep(info.filename):
                continue
            data = ATARI_ONLY_ENTRY if info.filename == "envpool/entry.py" else source.read(info)
            target.writestr(info, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            rows.append(f"{info.filename},sha256={digest},{len(data)}")
        target.writestr(record_name, "\n".join(rows + [f"{record_name},,"]) + "\n")
    print(f"  {wheel.name}: {wheel.stat().st_size / 2**20:.1f} MiB -> {out.stat().st_size / 2**20:.1f} MiB (trimmed)")


for wheel in sorted(download.glob("*.whl")):
    if wheel.name.startswith("envpool-"):
        trim(wheel, keep_envpool)
    elif wheel.name.startswith("envpool_assets-"):
        trim(wheel, keep_assets)
    else:
        shutil.copy(wheel, dest / wheel.name)
        print(f"  {wheel.name}: {wheel.stat().st_size / 2**20:.2f} MiB")
total = sum(p.stat().st_size for p in dest.glob("*.whl"))
print(f"{dest}: {len(list(dest.glob('*.whl')))} wheels, {total / 2**20:.1f} MiB (carry it: name {dest.name} in the device call's carry)")
EOF
