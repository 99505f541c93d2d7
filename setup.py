"""setup.py — builds the leakproof wheel (pyproject.toml holds the metadata).

The wheel installs what `make install PREFIX=<environment>` would, laid out
so that the binary finds its tracer and Python client beside itself
(find_beside_binary in the C sources looks in ../lib/leakproof relative to
the binary's own directory):

    <prefix>/bin/leakproof                            the binary (wheel data)
    <prefix>/lib/leakproof/libleakproof-trace.so      the tracer (wheel data)
    <prefix>/lib/leakproof/python/leakproof/*.py      the client, for jobs'
                                                      PYTHONPATH (wheel data)
    <prefix>/lib/leakproof/python/leakproof/hook/     the startup hook of `run --census`
    <site-packages>/leakproof/*.py                    the client, for
                                                      `import leakproof`
    <prefix>/share/man/man1/leakproof.1, bash completion

<prefix> is the virtual environment (or ~/.local with --user). The C build
runs `make` into build-wheel/c; setuptools' own files go to build-wheel/.
The wheel's tag is py3-none-linux_<arch>: the binary does not depend on the
Python ABI, but it is linked against this machine's libraries (see
docs/install.md for what a manylinux wheel would need).
"""

import glob
import os
import re
import subprocess

from setuptools import Command, setup
from setuptools.command.build import build
from wheel.bdist_wheel import bdist_wheel

HERE = os.path.dirname(os.path.abspath(__file__))
C_BUILD = "build-wheel/c"
CLIENT = sorted(glob.glob("python/leakproof/*.py"))


def version():
    with open(os.path.join(HERE, "Makefile"), encoding="utf-8") as f:
        m = re.search(r"^VERSION\s*=\s*(\S+)", f.read(), re.M)
    return m.group(1)


class build_c(Command):
    """Run make for the binary and the tracer into build-wheel/c."""

    description = "build the leakproof binary and tracer with make"
    user_options = []

    def initialize_options(self):
        pass

    def finalize_options(self):
        pass

    def run(self):
        jobs = os.environ.get("LEAKPROOF_MAKE_JOBS", "2")
        subprocess.check_call(["make", "-j" + jobs, "B=" + C_BUILD,
                               C_BUILD + "/leakproof", C_BUILD + "/libleakproof-trace.so"],
                              cwd=HERE)
        # bash-completion looks the file up by the command's name.
        os.makedirs(os.path.join(HERE, C_BUILD, "completion"), exist_ok=True)
        self.copy_file(os.path.join(HERE, "completion/leakproof.bash"),
                       os.path.join(HERE, C_BUILD, "completion/leakproof"))


class build_with_c(build):
    sub_commands = [("build_c", None)] + build.sub_commands


class bdist_wheel_platform(bdist_wheel):
    """Not pure: the wheel carries a binary for this platform, whatever the
    Python version (py3-none-linux_x86_64)."""

    def finalize_options(self):
        super().finalize_options()
        self.root_is_pure = False

    def get_tag(self):
        _, _, plat = super().get_tag()
        return "py3", "none", plat


os.makedirs(os.path.join(HERE, "build-wheel"), exist_ok=True)
setup(
    version=version(),
    packages=["leakproof"],
    package_dir={"": "python"},
    data_files=[
        ("bin", [C_BUILD + "/leakproof"]),
        ("lib/leakproof", [C_BUILD + "/libleakproof-trace.so"]),
        ("lib/leakproof/python/leakproof", CLIENT),
        ("lib/leakproof/python/leakproof/hook", ["python/leakproof/hook/sitecustomize.py"]),
        ("share/man/man1", ["man/leakproof.1"]),
        ("share/bash-completion/completions", [C_BUILD + "/completion/leakproof"]),
    ],
    cmdclass={"build_c": build_c, "build": build_with_c, "bdist_wheel": bdist_wheel_platform},
    options={"build": {"build_base": "build-wheel/py"},
             "egg_info": {"egg_base": "build-wheel"}},
)
