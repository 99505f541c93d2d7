"""scripts/check-layers (make check-layers) catches what it is for: run on a
copy of src/ and of design.md with one breach planted at a time, against
the objects of this build, it fails and names the breach; on the copy as it
is, it passes."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO


@pytest.fixture
def tree(tmp_path, lp):
    for d in ("src", "scripts"):
        shutil.copytree(REPO / d, tmp_path / d, ignore=shutil.ignore_patterns("*.o", "*.d"))
    (tmp_path / "docs" / "internals").mkdir(parents=True)
    shutil.copy(REPO / "docs" / "internals" / "design.md", tmp_path / "docs" / "internals")
    build = os.path.dirname(lp.binary)          # its objects: build/src/**/*.o
    return tmp_path, build


def check(root, build):
    return subprocess.run([sys.executable, str(root / "scripts" / "check-layers"), build],
                          capture_output=True, text=True, timeout=120)


def plant(path, line):
    path.write_text(line + "\n" + path.read_text())


def test_the_tree_as_it_is_passes(tree):
    root, build = tree
    r = check(root, build)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("where, line, said", [
    ("util/stats.c", "#include <core/sampler.h>", "floor 0 (util) may not include floor 4 (core)"),
    ("util/stats.c", '#include "report/report.h"', "floor 0 (util) may not include floor 7 (report)"),
    ("judge/gate.c", '#include "store/internal.h"', "a private header of src/store/"),
    ("cmd/ls.c", '#include "sweep/runner-int.h"', "a private header of src/sweep/"),
])
def test_an_include_that_breaks_the_rules_fails(tree, where, line, said):
    root, build = tree
    plant(root / "src" / where, line)
    r = check(root, build)
    assert r.returncode == 1 and said in r.stderr, r.stderr


def test_a_file_missing_from_the_map_fails(tree):
    root, build = tree
    (root / "src" / "cmd" / "planted.c").write_text("int planted;\n")
    r = check(root, build)
    assert r.returncode == 1 and "cmd/planted.c: not in the floors table" in r.stderr, r.stderr


def test_a_call_up_a_floor_fails(tree, tmp_path):
    # a util/ file that calls the model's run_summary_load(): its object
    # beside the build's (linked), the file named in the map
    root, build = tree
    (root / "src" / "util" / "planted.c").write_text(
        "int run_summary_load(void);\nint planted(void) { return run_summary_load(); }\n")
    design = root / "docs" / "internals" / "design.md"
    design.write_text(design.read_text().replace("stats.c (order statistics)",
                                                 "stats.c (order statistics) planted.c"))
    objs = tmp_path / "objs"
    for o in (Path(build) / "src").rglob("*.o"):
        dest = objs / "src" / o.relative_to(Path(build) / "src")
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.symlink_to(o)
    subprocess.run(["cc", "-c", str(root / "src" / "util" / "planted.c"), "-o",
                    str(objs / "src" / "util" / "planted.o")], check=True)
    r = check(root, str(objs))
    assert r.returncode == 1 and \
        "util/planted.c: calls run_summary_load of judge/summary.c: a call up a floor" in r.stderr, r.stderr
