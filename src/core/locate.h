/*
 * locate.h — the files that ship with leakproof, found beside the binary
 * (a build tree, an installed tree moved as a whole, the portable bundle)
 * or where `make install` put them (locate.c).
 */
#ifndef LP_CORE_LOCATE_H
#define LP_CORE_LOCATE_H

/*
 * The directory holding the Python client package (DIR/leakproof/
 * __init__.py: the job's PYTHONPATH, and the Python programs of a sweep,
 * DIR/leakproof/_prefork.py and _optuna_worker.py), or NULL when there is
 * none. The string is static; it is looked for at each call.
 */
const char *python_client_dir(void);

#endif
