"""Copy torch, torchaudio and their CUDA wheels from one virtual environment into another.

``make test-next`` builds a second environment (.venv-next) with the same constraints
as .venv except for braindecode. Downloading torch and its CUDA libraries again is about
4.5 GB; when an existing environment already holds the pinned versions, this copies their
installed files (hard links where the file system allows, copies otherwise) so that pip
finds them installed and downloads nothing for them.

Usage, with the new environment's python::

    .venv-next/bin/python .ci/reuse_torch.py SOURCE_VENV CONSTRAINTS

Only distributions whose installed version equals their pin in CONSTRAINTS are copied,
and only when the two environments run the same Python (the wheels hold compiled code);
otherwise nothing is copied and pip installs them as usual. The source is only read.
Files that a distribution installed outside site-packages are not copied; its console
scripts (``torchrun``, which the docs' Slurm script launches) are written anew from its
entry points, for the new environment's Python, as pip writes them.
"""

import os
import re
import shutil
import sys
import sysconfig
from importlib import metadata
from pathlib import Path

#: the heavy distributions: torch and torchaudio, and what torch brings for CUDA
HEAVY = re.compile(r"^(torch|torchaudio|triton|nvidia-.*|cuda-.*)$")


def _canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def _pins(constraints):
    pins = {}
    for line in Path(constraints).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            pins[_canonical(name)] = version.strip()
    return pins


def _place(src, dst):
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


#: pip's console-script template
SCRIPT = """#!{python}
import re
import sys
from {module} import {head}
if __name__ == "__main__":
    sys.argv[0] = re.sub(r"(-script\\.pyw|\\.exe)?$", "", sys.argv[0])
    sys.exit({call}())
"""


def _write_scripts(dist, scripts):
    """Write ``dist``'s console scripts into ``scripts`` (the new environment's bin/)."""
    for entry in dist.entry_points:
        if entry.group != "console_scripts" or (scripts / entry.name).exists():
            continue
        module, _, attr = entry.value.partition(":")
        attr = attr.split("[", 1)[0].strip()
        path = scripts / entry.name
        path.write_text(
            SCRIPT.format(
                python=sys.executable, module=module.strip(), head=attr.split(".")[0], call=attr
            )
        )
        path.chmod(0o755)


def main(source_venv, constraints):
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    source = Path(source_venv) / "lib" / version / "site-packages"
    target = Path(sysconfig.get_paths()["purelib"])
    if not source.is_dir():
        print(f"reuse_torch: no {source} (another Python?); pip installs torch")
        return 0
    pins = _pins(constraints)
    chosen = []
    for dist in metadata.distributions(path=[str(source)]):
        name = _canonical(dist.metadata["Name"])
        if HEAVY.match(name) and pins.get(name) == dist.version:
            chosen.append(dist)
    if "torch" not in {_canonical(d.metadata["Name"]) for d in chosen}:
        print(f"reuse_torch: {source} has not torch=={pins.get('torch')}; pip installs it")
        return 0
    for dist in chosen:
        _write_scripts(dist, Path(sysconfig.get_paths()["scripts"]))
        if any(True for _ in metadata.distributions(path=[str(target)], name=dist.name)):
            continue  # already there
        for rel in dist.files or ():
            if rel.parts and rel.parts[0] == "..":
                continue  # bin/ and the like, outside site-packages
            src = source / rel
            if src.is_file():
                _place(src, target / rel)
    print(
        f"reuse_torch: {len(chosen)} distributions from {source}: "
        + ", ".join(f"{d.metadata['Name']}=={d.version}" for d in chosen[:3])
        + (", ..." if len(chosen) > 3 else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
