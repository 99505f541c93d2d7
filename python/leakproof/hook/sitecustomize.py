"""sitecustomize.py — the startup hook of `leakproof run --census`: starts
the object census in a Python job that never imports leakproof, then runs
the user's own sitecustomize, if there is one, as if this file were not
there (docs/internals/census.md).

The supervisor puts this file's directory first on the job's PYTHONPATH
only with --census. Python's site module imports the first sitecustomize
it finds on sys.path: this one. It looks for the next one on the rest of
sys.path and executes it under the name sitecustomize, so the user's hook
still runs, with its own __file__, and its errors surface the way site
reports them. Nothing here raises: a failed census start is silent.
"""

import os
import sys


def _start_census():
    try:
        import leakproof
        leakproof._census_start(thread=True)
    except Exception:
        pass


def _chain():
    import importlib.machinery
    import importlib.util
    here = os.path.dirname(os.path.abspath(__file__))
    rest = []
    for entry in sys.path:
        try:
            same = os.path.abspath(entry or os.curdir) == here
        except (TypeError, ValueError):
            same = False
        if not same:
            rest.append(entry)
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)      # the user's errors go to site's report


_start_census()
_chain()
