"""Every export format carries every field a run record may carry (issue 40, item 4).

A property test: run records generated with each optional field set or left null (the
``server`` of an openai-chat record, a study record's obligations and variant digest,
the offer, the configuration, the chain link, traces with arbitrary JSON arguments and
results) and with text holding what honest data holds (U+2028, U+2029, U+0085 inside a
prompt or a tool result, control characters, commas, quotes, line breaks, characters
outside the Basic Multilingual Plane), written as JSONL, CSV and Parquet and read back by
``import``'s reader (:func:`prereg.runners.exchange.text_formats.read_records`): the
records read back equal the records written.

On the code before this issue the JSONL reader split lines with ``str.splitlines()``
(a record holding U+2028 could not be imported) and CSV and Parquet dropped ``server``.

One documented limit: in CSV an empty text cell is null, so the generated text fields are
non-empty (Parquet keeps empty strings: tests/exchange/test_parquet_typed_columns.py). The
Parquet file is typed (timestamps, lists, structs: checked there against pyarrow); the
generated instants carry a non-UTC offset, which must read back as written.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prereg.experiments.toolbottleneck.verify import OBLIGATIONS as STUDY_OBLIGATIONS
from prereg.runners.exchange import parquet as parquet_export
from prereg.runners.exchange.text_formats import read_records, render_records
from prereg.runners.record import FUNNEL_STAGES, OBLIGATIONS, TERMINAL_CLASSES, RunRecord

pytest.importorskip("pyarrow")

#: What honest text holds and a careless reader breaks on.
AWKWARD = [
    "\u2028",
    "\u2029",
    "\x85",
    "\x1b[31m",
    "\x07",
    "\x00",
    "\r",
    "\n",
    "\r\n",
    "\t",
    ",",
    '"',
    "'",
    "\ufeff",
    "\u202e",
    "\U0001f600",
    "\U00010348",
    "\\",
    "{}",
    "[]",
]

_chars = st.characters(codec="utf-8")  # no lone surrogates: they are not text
TEXT = st.lists(
    st.one_of(st.text(_chars, min_size=1, max_size=6), st.sampled_from(AWKWARD)),
    min_size=1,
    max_size=5,
).map("".join)
DIGEST = st.text("0123456789abcdef", min_size=64, max_size=64).map(lambda h: "sha256:" + h)
COUNT = st.integers(min_value=0, max_value=2**53 - 1)
MEASURE = st.floats(min_value=0, max_value=1e12, allow_nan=False, allow_infinity=False)
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=8,
)
INSTANT = st.datetimes(
    min_value=dt.datetime(2020, 1, 1),
    max_value=dt.datetime(2030, 1, 1),
    timezones=st.sampled_from([dt.UTC, dt.timezone(dt.timedelta(hours=5, minutes=30))]),
)


def _maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.none() | strategy


TOKENS = st.fixed_dictionaries(
    {},
    optional={k: _maybe(COUNT) for k in ("input", "output", "reasoning", "cached")},
)
TRACE_EVENT = st.fixed_dictionaries(
    {
        "kind": st.sampled_from(
            ["search", "tool_call", "tool_result", "malformed", "final", "cut", "stop", "error"]
        ),
        "turn": st.integers(0, 50),
    },
    optional={
        "tool": _maybe(TEXT),
        "arguments": JSON,
        "operations": _maybe(st.lists(TEXT, max_size=3)),
        "surfaced": _maybe(st.lists(TEXT, max_size=3)),
        "result": JSON,
        "is_error": _maybe(st.booleans()),
        "text": _maybe(TEXT),
        "usage": _maybe(TOKENS),
        "latency_ms": _maybe(MEASURE),
        "cost_usd": _maybe(MEASURE),
        "model_returned": _maybe(TEXT),
        "retries": _maybe(st.integers(0, 10)),
    },
)
SERVER = st.fixed_dictionaries(
    {
        "key": TEXT,
        "surface": TEXT,
        "role": st.sampled_from(["focal", "competitor", "decoy"]),
        "name": TEXT,
        "digest": DIGEST,
        "tools": st.integers(0, 100),
    },
    optional={"snapshot_digest": _maybe(DIGEST), "transform": _maybe(TEXT), "live": st.booleans()},
)
OFFER = st.fixed_dictionaries(
    {},
    optional={
        "control": _maybe(TEXT),
        "servers": st.lists(SERVER, max_size=2),
        "server_text": st.sampled_from(["none", "name", "name_and_description"]),
        "first_server": _maybe(TEXT),
        "clone": _maybe(
            st.fixed_dictionaries(
                {
                    "cell": st.integers(0, 3),
                    "label_a": TEXT,
                    "label_b": TEXT,
                    "first": st.sampled_from(["a", "b"]),
                }
            )
        ),
    },
)
CONFIG = st.fixed_dictionaries(
    {"driver": TEXT, "digest": DIGEST},
    optional={
        "model": _maybe(TEXT),
        "params": st.dictionaries(TEXT, JSON, max_size=3),
        "tool_search": st.booleans(),
        "allow_sampling": st.booleans(),
        "budgets": st.fixed_dictionaries(
            {},
            optional={
                k: _maybe(st.integers(0, 10**6))
                for k in (
                    "completion_cap",
                    "episode_tokens",
                    "call_limit",
                    "turn_limit",
                    "call_limit_over_certified",
                    "turn_limit_over_calls",
                )
            },
        ),
        "system_prompt_sha256": _maybe(DIGEST),
        "tool_access": _maybe(st.just("connector")),
    },
)


@st.composite
def records(draw: st.DrawFn) -> RunRecord:
    started = draw(INSTANT)
    evidence = draw(st.sampled_from(["replay", "local", "api", "inspect"]))
    measured = evidence != "replay"
    status = draw(st.sampled_from(["ok", "ok", "infra_error"]))
    study = draw(st.booleans())
    # a nested funnel: true up to a stage, then (maybe) one false, the rest false or null
    reached = draw(st.integers(0, len(FUNNEL_STAGES)))
    after = draw(st.sampled_from([False, None]))
    funnel = {
        stage: (True if i < reached else (False if i == reached else after))
        for i, stage in enumerate(FUNNEL_STAGES)
    }
    data: dict[str, Any] = {
        "record_id": draw(st.text("0123456789abcdef", min_size=8, max_size=64)),
        "registration_id": draw(TEXT),
        "registration_digest": draw(DIGEST),
        "experiment": draw(TEXT),
        "arm": draw(TEXT),
        "surface": draw(TEXT),
        "task_id": draw(TEXT),
        "intent": draw(TEXT),
        "cluster": draw(TEXT),
        "split": draw(st.sampled_from(["dev", "validation", "test"])),
        "polarity": draw(st.sampled_from(["positive", "negative", "optional"])),
        "repeat": draw(st.integers(0, 1000)),
        "rotation": draw(st.integers(0, 1000)),
        "driver": draw(TEXT),
        "evidence_class": evidence,
        "model_requested": draw(_maybe(TEXT)),
        "model_returned": draw(_maybe(TEXT)),
        "started_at": started,
        "finished_at": started + draw(st.timedeltas(dt.timedelta(0), dt.timedelta(hours=3))),
        "funnel": funnel,
        "terminal_class": draw(_maybe(st.sampled_from(TERMINAL_CLASSES))),
        "oracles": draw(
            st.fixed_dictionaries(
                {},
                optional={
                    k: _maybe(st.booleans())
                    for k in (
                        "final_state",
                        "no_mutation",
                        "prohibited_operations",
                        "confirmation",
                        "answer",
                    )
                },
            )
        ),
        "selected_operations": draw(st.lists(TEXT, max_size=3)),
        "selection_rate": draw(_maybe(st.floats(0, 1))),
        "unnecessary_calls": draw(_maybe(st.integers(0, 100))),
        "calls": draw(st.integers(0, 100)),
        "turns": draw(st.integers(0, 100)),
        "status": status,
        "trace": draw(st.lists(TRACE_EVENT, max_size=3)),
        "batch": draw(st.booleans()),
        "offer": draw(_maybe(OFFER)),
        "config": draw(_maybe(CONFIG)),
        "server": draw(_maybe(TEXT)),
        "variant_digest": draw(_maybe(DIGEST)),
        "chain": draw(
            _maybe(
                st.fixed_dictionaries(
                    {"index": st.integers(0, 10**9), "prev": DIGEST, "hash": DIGEST}
                )
            )
        ),
    }
    if measured:
        data["latency_ms"] = draw(_maybe(MEASURE))
        data["tokens"] = draw(TOKENS)
        data["cost_usd"] = draw(_maybe(MEASURE))
        data["retries"] = draw(_maybe(st.integers(0, 10)))
    if study:
        data["obligations"] = {k: draw(_maybe(st.booleans())) for k in STUDY_OBLIGATIONS}
    known = STUDY_OBLIGATIONS if study else OBLIGATIONS
    if status == "infra_error":
        data["error"] = draw(TEXT)
    else:
        data["error"] = draw(_maybe(TEXT))
        success = draw(st.booleans())
        data["success"] = success
        if not success:
            data["terminal_flag"] = draw(
                st.sampled_from(["completion_cap", "call_limit", "wrong_conclusion"])
            )
            data["first_unmet_obligation"] = draw(st.sampled_from(known))
    return RunRecord.model_validate(data)


def _through(fmt: str, batch: list[RunRecord], folder: Path) -> list[RunRecord]:
    path = folder / f"export.{fmt}"
    if fmt == "parquet":
        data, _ = parquet_export.render_parquet(batch)
    else:
        data, _ = render_records(batch, fmt)  # type: ignore[arg-type]
    path.write_bytes(data)
    return [record for _, record in read_records(path)]


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(batch=st.lists(records(), min_size=1, max_size=3))
@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_every_field_survives_export_and_import(
    fmt: str, batch: list[RunRecord], tmp_path: Path
) -> None:
    back = _through(fmt, batch, tmp_path)
    assert len(back) == len(batch)
    for written, read in zip(batch, back, strict=True):
        assert read.model_dump(mode="json") == written.model_dump(mode="json")
        assert read == written


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\x85", "\x1c", "\x0b", "\x0c"])
def test_line_separators_inside_text_survive(fmt: str, separator: str, tmp_path: Path) -> None:
    """The examples of the issue, always tried (not left to the generator's luck)."""
    record = RunRecord.model_validate(
        {
            "record_id": "0123456789abcdef",
            "registration_id": "reg",
            "registration_digest": "sha256:" + "a" * 64,
            "experiment": f"exp{separator}x",
            "arm": "a",
            "surface": "s",
            "task_id": "t1",
            "intent": "i",
            "cluster": "c",
            "split": "dev",
            "polarity": "positive",
            "repeat": 0,
            "rotation": 0,
            "driver": "openai-chat",
            "evidence_class": "api",
            "started_at": "2026-01-01T00:00:00Z",
            "finished_at": "2026-01-01T00:00:01Z",
            "success": True,
            "server": "127.0.0.1:8000",
            "trace": [{"kind": "final", "turn": 0, "text": f"one{separator}two"}],
        }
    )
    assert _through(fmt, [record], tmp_path) == [record]


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(batch=st.lists(records(), min_size=1, max_size=3))
def test_parquet_is_typed_and_keeps_empty_strings(batch: list[RunRecord], tmp_path: Path) -> None:
    """Parquet, unlike CSV, keeps an empty string apart from null; its columns are typed
    (read with pyarrow: timestamps in UTC beside the stated offset, lists, structs)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    emptied = [
        r.model_copy(
            update={
                "intent": "",
                "model_requested": "",
                "selected_operations": ["", *r.selected_operations],
            }
        )
        for r in batch
    ]
    back = _through("parquet", emptied, tmp_path)
    assert [r.model_dump(mode="json") for r in back] == [r.model_dump(mode="json") for r in emptied]
    table = pq.read_table(tmp_path / "export.parquet")
    started = table.schema.field("started_at").type
    assert pa.types.is_timestamp(started) and started.tz == "UTC"
    assert table.column("started_at").to_pylist() == [r.started_at for r in emptied]
    assert table.column("started_at_utc_offset_s").to_pylist() == [
        int(r.started_at.utcoffset().total_seconds())  # type: ignore[union-attr]  # aware
        for r in emptied
    ]
    assert pa.types.is_list(table.schema.field("selected_operations").type)
    assert pa.types.is_list(table.schema.field("trace").type)
    assert table.column("selected_operations").to_pylist() == [
        r.selected_operations for r in emptied
    ]
