"""``verify`` names the first break of a chain and counts the links after it (issue 40,
item 7): one removed or damaged record used to make it call every later link "edited"
(six problems a link), although each later link is intact and only shifted."""

from __future__ import annotations

from pathlib import Path

from tests.integrity.tamper_tools import (
    PILOT_ID,
    attacker,
    copy_workspace,
    digest_of,
    edited,
    flip_outcome,
    rewrite,
    stored,
)


def _chain_problems(cli, ws: Path) -> list[dict[str, str]]:
    checked = cli("-w", ws, "verify", "--json")
    assert checked.code == 3
    return [p for p in checked.json()["problems"] if p["kind"] == "runs-chain"]


def _links_named(problems: list[dict[str, str]]) -> set[int]:
    return {
        int(p["entry"].split(" link ")[1].split()[0]) for p in problems if " link " in p["entry"]
    }


def test_a_removed_record_is_one_break_and_the_rest_after_it(
    cli, small_template: Path, tmp_path: Path
) -> None:
    ws = copy_workspace(small_template, tmp_path / "ws")
    with attacker(ws, "TRIGGER records_no_delete") as conn:
        conn.execute(
            "DELETE FROM records WHERE registration_digest = ? AND chain_index = 3",
            (digest_of(ws, PILOT_ID),),
        )
    problems = _chain_problems(cli, ws)
    assert _links_named(problems) == {3}, problems
    said = [p["message"] for p in problems]
    assert not any("(it was edited)" in m or "does not match its content" in m for m in said)
    (after,) = [p for p in problems if "after the break" in p["message"]]
    assert after["message"].startswith("7 link(s) after the break at link 3")
    analysed = cli("-w", ws, "analyse", PILOT_ID)
    assert analysed.code == 3


def test_an_edited_record_is_named_alone(cli, small_template: Path, tmp_path: Path) -> None:
    """A body edited without its hash recomputed: that link is named as edited; the link
    after it, which names the stored hash, is counted after the break, and the rest
    continue from it (before issue 40 all eight later links were called edited)."""
    ws = copy_workspace(small_template, tmp_path / "ws")
    digest = digest_of(ws, PILOT_ID)
    with attacker(ws, "TRIGGER records_no_update") as conn:
        seq, record = stored(conn, digest)[3]
        rewrite(conn, seq, edited(flip_outcome(record)))
    problems = _chain_problems(cli, ws)
    assert _links_named(problems) == {3}, problems
    assert any("edited" in p["message"] or "does not match" in p["message"] for p in problems)
    (after,) = [p for p in problems if "after the break" in p["message"]]
    assert after["message"].startswith("1 link(s) after the break at link 3")
