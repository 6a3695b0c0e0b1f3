"""The policy reference's examples stay valid: every ```json block of docs/policy.md is a whole
policy file, and `broker policy check` accepts each one (exit 0). Fragments that are not whole
policies use another fence tag (```jsonc, ```text) and are not checked here.

`policy check` also reads the user's ~/.config/broker/approved.json and judges "programs" against
the home, so each check runs with a HOME of its own (as test_cli.py's checks do)."""

import re
import subprocess
from pathlib import Path

import pytest

from conftest import BROKER_BIN, clean_env

POLICY_DOC = Path(__file__).resolve().parents[2] / "docs" / "policy.md"
# The fewest complete examples the page may hold: the test must not pass on a page that lost them.
MIN_EXAMPLES = 10

OPENING = re.compile(r"^(?P<indent>\s*)```json\s*$")
CLOSING = re.compile(r"^\s*```\s*$")


def json_blocks(path: Path):
    """(line of the opening fence, text) of each ```json block, its fence's indentation removed."""
    blocks = []
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        opening = OPENING.match(lines[i])
        if not opening:
            i += 1
            continue
        start, indent = i + 1, len(opening.group("indent"))
        body = []
        i += 1
        while i < len(lines) and not CLOSING.match(lines[i]):
            body.append(lines[i][indent:] if lines[i][:indent].isspace() else lines[i].lstrip())
            i += 1
        assert i < len(lines), f"{path.name}:{start}: ```json block is never closed"
        blocks.append((start, "\n".join(body) + "\n"))
        i += 1
    return blocks


BLOCKS = json_blocks(POLICY_DOC)


def test_the_page_has_enough_examples():
    assert len(BLOCKS) >= MIN_EXAMPLES, \
        f"{POLICY_DOC.name} has {len(BLOCKS)} ```json examples, fewer than {MIN_EXAMPLES}"


@pytest.mark.parametrize("line,text", BLOCKS, ids=[f"line-{line}" for line, _ in BLOCKS])
def test_example_passes_policy_check(tmp_path, line, text):
    home = tmp_path / "home"
    home.mkdir()
    policy = tmp_path / f"policy-md-line-{line}.json"
    policy.write_text(text)
    r = subprocess.run([BROKER_BIN, "policy", "check", str(policy)], capture_output=True,
                       text=True, timeout=30, cwd=tmp_path, env=clean_env({"HOME": str(home)}))
    assert r.returncode == 0, \
        f"docs/policy.md:{line}: the ```json block opened on this line fails `broker policy " \
        f"check` (exit {r.returncode}):\n{r.stderr}"
