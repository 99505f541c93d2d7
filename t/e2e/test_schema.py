"""docs/internals/schema.sql is the schema of a store this build makes
(scripts/schema writes it from such a store and from the comments of
src/store/schema.c): a migration added without the file made again fails
here, and so does a column whose meaning was left out of the file."""
import sqlite3
import subprocess
import sys

from conftest import REPO

SCHEMA = REPO / "docs" / "internals" / "schema.sql"


def test_schema_file_is_the_schema_of_this_build(lp):
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "schema"), "--check", str(SCHEMA), lp.binary],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def test_schema_file_makes_the_store_it_describes(lp, tmp_path):
    # the file is SQL that SQLite takes: the same tables, columns and indexes
    # as a store the binary made
    made = tmp_path / "from-file.db"
    db = sqlite3.connect(made)
    db.executescript(SCHEMA.read_text())
    r = lp.run(["true"])
    assert r.rc == 0, r
    real = sqlite3.connect(lp.store)

    def shape(c):
        tables = [t for (t,) in c.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                          "AND name NOT LIKE 'sqlite_%' ORDER BY name")]
        return {t: [row[1:] for row in c.execute(f"PRAGMA table_info({t})")] for t in tables}, \
            sorted(c.execute("SELECT name, tbl_name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"))

    assert shape(db) == shape(real)
