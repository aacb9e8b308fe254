"""Copy on write in the service store: shared records never change under anyone's feet.

A store starts on the experiment's own seed records and its snapshots share records with
it (no deep copies per unit). What must hold: the seed records never change, two stores
of one service never see each other's writes, a snapshot keeps the state it was taken in
whatever the store does next (update, append, remove, create, delete), and a rolled-back
transaction leaves no trace, also in a snapshot taken before it.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from prereg.experiments import load_experiment
from prereg.experiments.loader import folder_reader
from prereg.experiments.models import ServiceFile
from prereg.experiments.service import OperationError, ServiceStore
from prereg.experiments.surfaces import execute_tool

BUNDLED = Path(__file__).resolve().parents[2] / "experiments" / "bundled"


@pytest.fixture
def service() -> ServiceFile:
    return load_experiment(folder_reader(BUNDLED / "music-library"), "music-library").service


def _writes(store: ServiceStore) -> None:
    """One call of every kind that writes."""
    store.call("rate_track", {"track_id": "trk-021", "rating": 5})
    store.call("add_track_to_playlist", {"playlist_id": "pl-001", "track_id": "trk-002"})
    store.call("remove_track_from_playlist", {"playlist_id": "pl-001", "track_id": "trk-005"})
    store.call("create_playlist", {"name": "Focus Flow"})
    store.call("clear_playlist", {"playlist_id": "pl-003", "confirm": "Gym Mix"})
    store.call("delete_playlist", {"playlist_id": "pl-004", "confirm": "Old Favourites"})


def test_writes_never_reach_the_seed_records_or_another_store(service: ServiceFile) -> None:
    seed = copy.deepcopy({n: c.records for n, c in service.collections.items()})
    first, second = ServiceStore(service), ServiceStore(service)
    pristine = copy.deepcopy(second.state)
    _writes(first)
    assert first.state != pristine  # the writes happened
    assert {n: c.records for n, c in service.collections.items()} == seed
    assert second.state == pristine
    assert ServiceStore(service).state == pristine


def test_a_snapshot_keeps_its_state_through_every_kind_of_write(service: ServiceFile) -> None:
    store = ServiceStore(service)
    before = store.snapshot()
    frozen = copy.deepcopy(before)
    _writes(store)
    assert before == frozen
    middle = store.snapshot()
    frozen_middle = copy.deepcopy(middle)
    # the same records written again, after the snapshot that now shares them
    store.call("rate_track", {"track_id": "trk-021", "rating": 2})
    store.call("add_track_to_playlist", {"playlist_id": "pl-001", "track_id": "trk-003"})
    store.call("rename_playlist", {"playlist_id": "pl-006", "name": "Deep Focus"})
    assert middle == frozen_middle and before == frozen
    assert store.state["tracks"]["trk-021"]["rating"] == 2
    assert store.state["playlists"]["pl-006"]["name"] == "Deep Focus"
    assert "trk-003" in store.state["playlists"]["pl-001"]["track_ids"]


def test_a_rolled_back_transaction_leaves_no_trace(service: ServiceFile) -> None:
    exp = load_experiment(folder_reader(BUNDLED / "music-library"), "music-library")
    store = ServiceStore(service)
    store.call("add_track_to_playlist", {"playlist_id": "pl-001", "track_id": "trk-002"})
    before = store.snapshot()
    frozen = copy.deepcopy(before)
    with pytest.raises(OperationError), store.transaction():
        store.call("add_track_to_playlist", {"playlist_id": "pl-001", "track_id": "trk-003"})
        store.call("rate_track", {"track_id": "trk-021", "rating": 4})
        store.call("rate_track", {"track_id": "trk-999", "rating": 4})  # fails: rolled back
    assert store.state == frozen and before == frozen
    # writing after the rollback still copies: the snapshot is untouched
    store.call("add_track_to_playlist", {"playlist_id": "pl-001", "track_id": "trk-004"})
    assert before == frozen
    tool = exp.surfaces["semantic"].tool("new_playlist_with_song")
    assert tool is not None
    with pytest.raises(OperationError):
        execute_tool(tool, {"title": "X", "song": "no such words zzz"}, store)
    assert "trk-004" in store.state["playlists"]["pl-001"]["track_ids"]
    assert len(store.state["playlists"]) == len(frozen["playlists"])
