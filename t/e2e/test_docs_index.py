"""design.md, the map a newcomer reads first, links every note of
docs/internals/, and every link it has leads to a file."""
import re

from conftest import REPO

INTERNALS = REPO / "docs" / "internals"


def test_design_links_every_note_and_nothing_missing():
    text = (INTERNALS / "design.md").read_text()
    linked = set(re.findall(r"\]\(([\w.-]+\.(?:md|sql))\)", text))
    notes = {p.name for p in INTERNALS.glob("*.md")} - {"design.md"}
    assert not notes - linked, f"notes design.md does not link: {sorted(notes - linked)}"
    assert all((INTERNALS / n).exists() for n in linked), sorted(n for n in linked if not (INTERNALS / n).exists())
