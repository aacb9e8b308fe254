"""The stateful service: typed operations, reads never mutate, confirmations enforced."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from prereg.experiments import load_experiment
from prereg.experiments.loader import folder_reader
from prereg.experiments.models import ServiceFile
from prereg.experiments.service import OperationError, ServiceStore
from prereg.experiments.surfaces import execute_tool

BUNDLED = Path(__file__).resolve().parents[2] / "experiments" / "bundled"


@pytest.fixture
def store() -> ServiceStore:
    data = yaml.safe_load((BUNDLED / "music-library" / "service.yaml").read_text())
    return ServiceStore(ServiceFile.model_validate(data))


def test_reads_return_copies_and_never_mutate(store: ServiceStore) -> None:
    before = copy.deepcopy(store.state)
    found = store.call("search_tracks", {"query": "Lumen Drift"})
    found["items"][0]["title"] = "changed by the caller"
    playlist = store.call("get_playlist", {"playlist_id": "pl-001"})
    playlist["track_ids"].append("trk-999")
    store.call("search_albums", {})
    store.call("list_playlists", {"name": "road"})
    assert store.state == before
    assert all(not e.mutated for e in store.log)


def test_search_ranks_by_matched_words(store: ServiceStore) -> None:
    result = store.call("search_tracks", {"query": "paper moon"})
    titles = [t["title"] for t in result["items"]]
    # "Paper Moon Radio" matches both words; "Paper Kites" and "Copper Moon" one each
    assert titles[0] == "Paper Moon Radio"
    assert set(titles[1:]) == {"Paper Kites", "Copper Moon"}
    assert result["count"] == 3
    jazz = store.call("search_tracks", {"query": "jazz", "genre": "jazz"})
    assert {t["id"] for t in jazz["items"]} == {"trk-008", "trk-009", "trk-010"}


def test_get_expands_references(store: ServiceStore) -> None:
    album = store.call("get_album", {"album_id": "alb-004"})
    assert [t["title"] for t in album["tracks"]] == [
        "Ferryman's Daughter",
        "Woodsmoke Letters",
        "Barley Fields",
    ]


def test_create_update_append_remove(store: ServiceStore) -> None:
    created = store.call("create_playlist", {"name": "Focus Flow"})
    assert created == {"id": "pl-006", "name": "Focus Flow", "description": None, "track_ids": []}
    store.call("add_track_to_playlist", {"playlist_id": "pl-006", "track_id": "trk-002"})
    with pytest.raises(OperationError, match="already"):
        store.call("add_track_to_playlist", {"playlist_id": "pl-006", "track_id": "trk-002"})
    store.call("remove_track_from_playlist", {"playlist_id": "pl-001", "track_id": "trk-005"})
    assert store.state["playlists"]["pl-001"]["track_ids"] == ["trk-001", "trk-017", "trk-024"]
    store.call("rate_track", {"track_id": "trk-021", "rating": 5})
    assert store.state["tracks"]["trk-021"]["rating"] == 5


@pytest.mark.parametrize(
    "args, message",
    [
        ({"track_id": "trk-021", "rating": 6}, "<= 5"),
        ({"track_id": "trk-021", "rating": "5"}, "type integer"),
        ({"track_id": "trk-999", "rating": 3}, "no tracks record"),
        ({"track_id": "trk-021"}, "missing required parameter 'rating'"),
        ({"track_id": "trk-021", "rating": 3, "stars": 3}, "unknown parameter 'stars'"),
    ],
)
def test_typed_parameters(store: ServiceStore, args: dict[str, object], message: str) -> None:
    before = copy.deepcopy(store.state)
    with pytest.raises(OperationError, match=message):
        store.call("rate_track", args)
    assert store.state == before
    assert store.log[-1].ok is False


def test_destructive_operations_need_the_exact_name(store: ServiceStore) -> None:
    for confirm in (None, "old favourites", "Road Trip", True):
        args = {"playlist_id": "pl-004"}
        if confirm is not None:
            args["confirm"] = confirm  # type: ignore[assignment]
        with pytest.raises(OperationError):
            store.call("delete_playlist", args)
        assert "pl-004" in store.state["playlists"]
    assert [e.confirmed for e in store.log] == [False, False, False, False]
    store.call("delete_playlist", {"playlist_id": "pl-004", "confirm": "Old Favourites"})
    assert "pl-004" not in store.state["playlists"]
    assert store.log[-1].confirmed is True and store.log[-1].destructive


def test_clear_keeps_the_playlist(store: ServiceStore) -> None:
    store.call("clear_playlist", {"playlist_id": "pl-003", "confirm": "Gym Mix"})
    assert store.state["playlists"]["pl-003"] == {
        "id": "pl-003",
        "name": "Gym Mix",
        "description": "Loud and fast",
        "track_ids": [],
    }


def test_composite_tool_is_all_or_nothing() -> None:
    exp = load_experiment(folder_reader(BUNDLED / "music-library"), "music-library")
    store = ServiceStore(exp.service)
    tool = exp.surfaces["semantic"].tool("new_playlist_with_song")
    assert tool is not None and tool.operations == (
        "create_playlist",
        "search_tracks",
        "add_track_to_playlist",
    )
    before = copy.deepcopy(store.state)
    with pytest.raises(OperationError, match="out of range"):
        execute_tool(tool, {"title": "X", "song": "no such words zzz"}, store)
    assert store.state == before  # the created playlist was rolled back
    result = execute_tool(tool, {"title": "Late Night Drive", "song": "Midnight Arcade"}, store)
    assert result["name"] == "Late Night Drive" and result["track_ids"] == ["trk-002"]


def test_a_created_id_is_one_past_the_seed_records_even_after_a_delete(
    store: ServiceStore,
) -> None:
    """The next id is numbered from the seed records (as they were when the store was
    built), not from what is left: deleting the highest seed record first must not make
    a new record reuse its id (an oracle naming ``pl-006`` would then see ``pl-005``)."""
    seeds = [rec["id"] for rec in store.spec.collections["playlists"].records]
    highest = max(seeds, key=lambda i: int(str(i).rsplit("-", 1)[1]))
    name = store.state["playlists"][highest]["name"]
    store.call("delete_playlist", {"playlist_id": highest, "confirm": name})
    created = store.call("create_playlist", {"name": "After The Delete"})
    assert created["id"] == f"pl-{int(str(highest).rsplit('-', 1)[1]) + 1:03d}"
    assert store.call("create_playlist", {"name": "And Another"})["id"] == (
        f"pl-{int(str(highest).rsplit('-', 1)[1]) + 2:03d}"
    )


def _reference_search(store: ServiceStore, op_name: str, args: dict[str, object]) -> list[str]:
    """The ranking of a search, spelled out the plain way (every filter and every query
    evaluated per record): the ids the service must return, in order."""
    from prereg.experiments.text import content_words, normalise

    op = store.spec.operations[op_name]

    def equal(actual: object, wanted: object) -> bool:
        if isinstance(actual, str) and isinstance(wanted, str):
            return normalise(actual) == normalise(wanted)
        return bool(actual == wanted)

    ranked = []
    for order, record in enumerate(store.state[op.collection].values()):
        if not all(
            equal(record.get(field), args[param])
            for param, field in op.equals.items()
            if args.get(param) is not None
        ):
            continue
        score, dropped = 0, False
        for param, fields in op.match.items():
            if args.get(param) in (None, ""):
                continue
            wanted = set(content_words(str(args[param])))
            haystack = {w for f in fields for w in content_words(str(record.get(f, "")))}
            hits = len(wanted & haystack)
            if hits == 0:
                dropped = True
                break
            score += hits
        if not dropped:
            ranked.append((-score, order, str(record["id"])))
    return [rid for _, _, rid in sorted(ranked)[: op.limit]]


def test_search_agrees_with_a_plain_reference_on_random_queries(store: ServiceStore) -> None:
    import random

    rng = random.Random(15)
    words = sorted(
        {
            w
            for coll in store.state.values()
            for rec in coll.values()
            for v in rec.values()
            if isinstance(v, str)
            for w in v.split()
        }
    )
    genres = sorted({str(t.get("genre")) for t in store.state["tracks"].values()})
    searches = [(n, op) for n, op in store.spec.operations.items() if op.kind == "search"]
    checked = 0
    for _ in range(400):
        name, op = rng.choice(searches)
        args: dict[str, object] = {}
        for param in op.match:
            if rng.random() < 0.85:
                args[param] = " ".join(rng.choice(words) for _ in range(rng.randint(1, 3)))
        for param in op.equals:
            if rng.random() < 0.5:
                genre = rng.choice(genres)
                args[param] = rng.choice([genre, genre.upper(), f"  {genre} "])
        if any(p.required and p_name not in args for p_name, p in op.params.items()):
            continue
        found = [item["id"] for item in store.call(name, args)["items"]]
        assert found == _reference_search(store, name, args), (name, args)
        checked += bool(found)
    assert checked > 100  # most random queries find something: the ranking is exercised
