#!/usr/bin/env python3
"""Copy a sysfs capture (``<capture set>/sysfs/<name>``) into tests/scenarios/<name>/root/.

The capture set stores each sysfs symlink as a small text file holding the link's relative
target (e.g. sys/class/infiniband/mlx5_0 contains "../../bus/pci/devices/0000:0c:00.0/...").
A live /sys has real symlinks there, so the copy turns every such stand-in back into a symlink:
a regular file whose whole content is a relative path starting with "../" that resolves inside
the tree. No sysfs attribute's value starts with "../". Everything else is copied byte for byte.

    python tests/tools/import_sysfs_fixture.py CAPTURE_DIR [DEST_ROOT]

CAPTURE_DIR is the capture's folder (the one holding ``sys/``); its name becomes the scenario's.
Where the shared capture set lies beside the repository, tests/test_fixture_copies.py checks the
copies still match it.
"""

from __future__ import annotations

import os
import shutil
import sys
from typing import Optional

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def link_target(path: str, tree_root: str) -> Optional[str]:
    """The symlink a stand-in file represents, or None for an ordinary attribute file."""
    if os.path.getsize(path) > 4096:
        return None
    with open(path, "rb") as handle:
        data = handle.read()
    try:
        text = data.decode("ascii").strip()
    except UnicodeDecodeError:
        return None
    if not text.startswith("../") or "\n" in text:
        return None
    resolved = os.path.normpath(os.path.join(os.path.dirname(path), text))
    inside = os.path.commonpath([resolved, tree_root]) == tree_root
    return text if inside and os.path.lexists(resolved) else None


def import_tree(source_sys: str, dest_sys: str) -> int:
    """Copy source_sys to dest_sys restoring symlinks; returns how many links were restored."""
    links = 0
    source_sys = os.path.abspath(source_sys)
    for directory, _dirs, files in os.walk(source_sys):
        rel = os.path.relpath(directory, source_sys)
        os.makedirs(os.path.join(dest_sys, rel), exist_ok=True)
        for name in files:
            src = os.path.join(directory, name)
            dst = os.path.join(dest_sys, rel, name)
            target = link_target(src, source_sys)
            if target is not None:
                os.symlink(target, dst)
                links += 1
            else:
                shutil.copyfile(src, dst)
    return links


def main(argv: list) -> int:
    capture_dir = os.path.abspath(argv[1])
    name = os.path.basename(capture_dir.rstrip(os.sep))
    dest_root = argv[2] if len(argv) > 2 else os.path.join(REPO, "tests", "scenarios", name, "root")
    dest_sys = os.path.join(dest_root, "sys")
    if os.path.exists(dest_sys):
        shutil.rmtree(dest_sys)
    links = import_tree(os.path.join(capture_dir, "sys"), dest_sys)
    print(f"{name}: copied to {dest_sys}, {links} symlinks restored")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
