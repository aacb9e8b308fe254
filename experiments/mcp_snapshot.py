"""The MCP snapshot: what a live server serves, recorded verbatim, and its digest.

A snapshot is the unit the InvokeRank method pins (seed, sections 5.1 and 5.4):
the replay server serves it byte for byte so that a pool is identical across runs
whatever the live servers do. Two concerns are kept apart in the file:

* ``server``: what the server serves. The raw ``initialize`` result (identity,
  capabilities, protocol version, instructions, ``_meta``) and, for each list
  method the server offers, every page of the raw result, in order. These are
  the JSON objects the server sent, not the SDK's models of them: the v2 SDK
  drops unknown fields and reorders keys, and a snapshot must not.
* ``server.revisions`` (optional; snapshots taken since issue 43): for each further
  protocol revision the capturing SDK could ask for and the server accepted with
  different answers (an older handshake revision answered differently, or a
  2026-07-28-era revision reached by ``server/discover``), that revision's own answers:
  the raw ``initialize`` or ``server/discover`` result and its list pages. Revisions
  answered exactly as the main recording are listed in ``protocol_versions`` instead.
  Absent in older snapshots, so their bytes and digests are unchanged.
* ``capture``: how and when it was taken (time, transport, command line, SDK
  version). Provenance only; never digested, so two snapshots of an unchanged
  server share a digest.

Everything in ``server`` is untrusted data from a third party. This module only
checks its shape; it never executes, resolves (``$ref``) or interprets it.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
from datetime import datetime
from pathlib import Path
from typing import Any, Final, Literal

import rfc8785
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from prereg.core.errors import BadInput
from prereg.core.yamlio import format_loc

FORMAT: Final = "prereg-mcp-snapshot/1"
DIGEST_PREFIX = "sha256:"

TOOLS_LIST = "tools/list"
# The paginated list methods of the handshake-era protocol, each with the key of its items.
LIST_ITEMS: dict[str, str] = {
    "tools/list": "tools",
    "prompts/list": "prompts",
    "resources/list": "resources",
    "resources/templates/list": "resourceTemplates",
}
# Which capability advertises each list method (a server need not serve the others).
LIST_CAPABILITY: dict[str, str] = {
    "tools/list": "tools",
    "prompts/list": "prompts",
    "resources/list": "resources",
    "resources/templates/list": "resources",
}

_SAFE_INT = 2**53 - 1


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RecordedError(_Strict):
    """A JSON-RPC error the live server answered a list request with, kept to replay it."""

    code: int
    message: str
    data: Any = None


class ListRecording(_Strict):
    """One list method: every page of the raw result in order, or the error it gave."""

    pages: list[dict[str, Any]] | None = None
    error: RecordedError | None = None

    @model_validator(mode="after")
    def _one_of(self) -> ListRecording:
        if (self.pages is None) == (self.error is None):
            raise ValueError("give exactly one of 'pages' (the raw result pages) or 'error'")
        if self.pages is not None and not self.pages:
            raise ValueError("'pages' must hold at least one page")
        return self


#: The ``_meta`` key of a ``server/discover`` result that carries the server's identity.
SERVER_INFO_META_KEY = "io.modelcontextprotocol/serverInfo"


class RevisionRecording(_Strict):
    """What the server answered a client that asked for one protocol revision.

    Exactly one of ``initialize`` (a handshake-era revision: the raw InitializeResult)
    and ``discover`` (a 2026-07-28-era revision: the raw ``server/discover`` result),
    and the raw pages of every list method, as asked for at that revision.
    """

    initialize: dict[str, Any] | None = None
    discover: dict[str, Any] | None = None
    lists: dict[str, ListRecording]

    @model_validator(mode="after")
    def _one_opening(self) -> RevisionRecording:
        if (self.initialize is None) == (self.discover is None):
            raise ValueError("give exactly one of 'initialize' or 'discover'")
        if self.initialize is not None:
            _check_initialize(self.initialize)
        if self.discover is not None:
            _require(self.discover, "capabilities", dict)
            supported = self.discover.get("supportedVersions")
            if not isinstance(supported, list) or not all(isinstance(v, str) for v in supported):
                raise ValueError("'supportedVersions' must be a list of strings")
            if "instructions" in self.discover and not isinstance(
                self.discover["instructions"], str
            ):
                raise ValueError("'instructions' must be a string")
        _check_lists(self.lists)
        return self

    @property
    def era(self) -> Literal["handshake", "modern"]:
        return "handshake" if self.initialize is not None else "modern"

    def opening(self) -> dict[str, Any]:
        """The raw result that opened the revision (initialize or server/discover)."""
        opening = self.initialize if self.initialize is not None else self.discover
        return copy.deepcopy(opening) or {}

    def capabilities(self) -> dict[str, Any]:
        return dict(copy.deepcopy(self.opening().get("capabilities") or {}))

    def server_info(self) -> dict[str, Any] | None:
        """``serverInfo`` (handshake) or the discover result's ``_meta`` identity (modern)."""
        opening = self.opening()
        if self.initialize is not None:
            return dict(opening["serverInfo"])
        meta = opening.get("_meta")
        info = meta.get(SERVER_INFO_META_KEY) if isinstance(meta, dict) else None
        return dict(info) if isinstance(info, dict) else None


class ServedContent(_Strict):
    """What the server serves: the part of a snapshot its digest covers."""

    initialize: dict[str, Any] = Field(
        description="The raw InitializeResult: protocolVersion, capabilities, serverInfo, "
        "instructions and _meta, exactly as the server sent them."
    )
    lists: dict[str, ListRecording] = Field(
        description="Raw result pages per list method ('tools/list' is always present)."
    )
    protocol_versions: list[str] | None = Field(
        default=None,
        description="Every handshake protocol revision the live server accepted at capture "
        "time with the same answers otherwise; the replay negotiates among these. Absent "
        "(older snapshots): only initialize.protocolVersion.",
    )
    revisions: dict[str, RevisionRecording] | None = Field(
        default=None,
        description="Per negotiated protocol revision, the answers of a revision the live "
        "server accepted with answers other than the main recording's (an older handshake "
        "revision answered differently, or a server/discover-era revision). Absent (older "
        "snapshots): none.",
    )

    @field_validator("initialize")
    @classmethod
    def _initialize_shape(cls, value: dict[str, Any]) -> dict[str, Any]:
        return _check_initialize(value)

    @field_validator("lists")
    @classmethod
    def _lists_shape(cls, value: dict[str, ListRecording]) -> dict[str, ListRecording]:
        return _check_lists(value)

    @field_validator("protocol_versions")
    @classmethod
    def _versions_shape(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and (not value or len(set(value)) != len(value)):
            raise ValueError("'protocol_versions' must list each revision once, at least one")
        return value

    @model_validator(mode="after")
    def _recorded_version_offered(self) -> ServedContent:
        recorded = self.initialize["protocolVersion"]
        if self.protocol_versions is not None and recorded not in self.protocol_versions:
            raise ValueError(
                f"'protocol_versions' must include the recorded protocolVersion {recorded!r}"
            )
        return self

    @model_validator(mode="after")
    def _revisions_consistent(self) -> ServedContent:
        if self.revisions is None:
            return self
        if not self.revisions:
            raise ValueError("'revisions' must hold at least one revision when given")
        main = set(self.protocol_versions or [self.initialize["protocolVersion"]])
        for revision, recording in self.revisions.items():
            if revision in main:
                raise ValueError(
                    f"revision {revision!r} is served by the main recording "
                    "('protocol_versions'); record it once"
                )
            opening = recording.opening()
            if recording.initialize is not None and opening["protocolVersion"] != revision:
                raise ValueError(
                    f"revisions.{revision}: the initialize result negotiated "
                    f"{opening['protocolVersion']!r}, not {revision!r}"
                )
            if recording.discover is not None and revision not in opening["supportedVersions"]:
                raise ValueError(
                    f"revisions.{revision}: the discover result does not list {revision!r} "
                    "in 'supportedVersions'"
                )
        return self

    @model_validator(mode="after")
    def _finite(self) -> ServedContent:
        lists = [r.pages for r in self.lists.values() if r.pages is not None]
        for recording in (self.revisions or {}).values():
            lists.append([recording.opening()])
            lists.extend(r.pages for r in recording.lists.values() if r.pages is not None)
        if any(not math.isfinite(f) for f in _floats([self.initialize, lists])):
            raise ValueError("a number is not finite (JSON has no NaN or infinity)")
        return self


class CaptureInfo(_Strict):
    """Provenance of a snapshot: never part of its digest."""

    taken_at: datetime
    transport: Literal["stdio", "streamable-http"]
    command: list[str] | None = None
    url: str | None = None
    client: dict[str, str] = Field(default_factory=dict)
    sdk: str | None = None
    derived_from: str | None = None  # digest of the snapshot a transformation started from
    # The capabilities the capturing client declared: they can change what a server lists
    # (sampling, elicitation, roots). None in snapshots taken before they were recorded.
    client_capabilities: dict[str, Any] | None = None
    # Names of the headers sent (--header); never their values, which are credentials.
    headers: list[str] | None = None
    # Offered revisions the server accepted but answered differently (not replayed).
    versions_differing: list[str] | None = None
    derivation: str | None = None  # which transformation (see Snapshot.derive)


class Snapshot(_Strict):
    """A recorded MCP server. Build one with :func:`load_snapshot` or the capture client.

    The raw recorded objects are reachable through the accessors below, which return
    deep copies as plain dicts: callers (surfaces, rotations, control arms) may
    transform them freely without touching the snapshot they came from.
    """

    format: Literal["prereg-mcp-snapshot/1"] = FORMAT
    server: ServedContent
    capture: CaptureInfo

    # -- identity -------------------------------------------------------------------------
    @property
    def protocol_version(self) -> str:
        return str(self.server.initialize["protocolVersion"])

    @property
    def server_name(self) -> str:
        return str(self.server.initialize["serverInfo"]["name"])

    @property
    def server_version(self) -> str:
        return str(self.server.initialize["serverInfo"]["version"])

    @property
    def server_title(self) -> str | None:
        return _opt_str(self.server.initialize["serverInfo"].get("title"))

    @property
    def server_description(self) -> str | None:
        """``serverInfo.description`` (2025-11-25), the text a host may show for the server."""
        return _opt_str(self.server.initialize["serverInfo"].get("description"))

    @property
    def instructions(self) -> str | None:
        return _opt_str(self.server.initialize.get("instructions"))

    def server_info(self) -> dict[str, Any]:
        """The raw ``serverInfo`` object, every field the server sent."""
        return copy.deepcopy(self.server.initialize["serverInfo"])

    def capabilities(self) -> dict[str, Any]:
        return copy.deepcopy(self.server.initialize["capabilities"])

    def protocol_versions(self) -> list[str]:
        """The revisions a replay may answer: recorded ones, else the one initialize gave."""
        return list(self.server.protocol_versions or [self.protocol_version])

    def initialize_result(self) -> dict[str, Any]:
        return copy.deepcopy(self.server.initialize)

    def revisions(self) -> list[str]:
        """Every revision the live server negotiated at capture time and a replay can
        answer: the main recording's (:meth:`protocol_versions`) and each one of
        ``server.revisions``, oldest first (revision dates sort as revisions do)."""
        return sorted({*self.protocol_versions(), *(self.server.revisions or {})})

    def revision(self, version: str) -> RevisionRecording | None:
        """The answers recorded for ``version`` when they differ from the main recording."""
        return (self.server.revisions or {}).get(version)

    def identity(self) -> dict[str, Any]:
        """The server's identity as one plain dict (for reports and host surfaces)."""
        return {
            "name": self.server_name,
            "version": self.server_version,
            "title": self.server_title,
            "description": self.server_description,
            "instructions": self.instructions,
            "protocol_version": self.protocol_version,
        }

    # -- lists ----------------------------------------------------------------------------
    def tools(self) -> list[dict[str, Any]]:
        """The complete tools/list, pages concatenated in the order served, as plain dicts."""
        return self.items(TOOLS_LIST)

    def tool_names(self) -> list[str]:
        return [str(tool["name"]) for tool in self.tools()]

    def items(self, method: str) -> list[dict[str, Any]]:
        """Every item of a recorded list method across its pages (empty if not recorded)."""
        recording = self.server.lists.get(method)
        if recording is None or recording.pages is None:
            return []
        key = LIST_ITEMS[method]
        return [copy.deepcopy(item) for page in recording.pages for item in page[key]]

    def pages(self, method: str) -> list[dict[str, Any]] | None:
        recording = self.server.lists.get(method)
        if recording is None or recording.pages is None:
            return None
        return copy.deepcopy(recording.pages)

    def derive(
        self,
        *,
        initialize: dict[str, Any] | None = None,
        tools: list[dict[str, Any]] | None = None,
        derivation: str,
    ) -> Snapshot:
        """A new, validated snapshot serving ``initialize`` and/or ``tools`` instead.

        For transformations of a recorded server (blinded metadata, relabelled clones):
        the result is served and digested like any snapshot. With as many tools as
        before, the recorded page boundaries and cursors are kept; otherwise the tools
        are served as one page. ``derivation`` names the transformation; it and the
        source's digest go into the provenance block, which the digest leaves out.

        The revisions recorded apart (``server.revisions``) are dropped: they hold the
        untransformed answers, so the derived server speaks only the main recording's
        revisions (``protocol_versions``).
        """
        served = self.server.model_dump(mode="json", exclude_none=True)
        served.pop("revisions", None)
        if initialize is not None:
            served["initialize"] = copy.deepcopy(initialize)
        if tools is not None:
            pages = served["lists"][TOOLS_LIST]["pages"]
            new = copy.deepcopy(tools)
            if len(new) == sum(len(p["tools"]) for p in pages):
                start = 0
                for page in pages:
                    count = len(page["tools"])
                    page["tools"], start = new[start : start + count], start + count
            else:
                served["lists"][TOOLS_LIST] = {"pages": [{"tools": new}]}
        capture = self.capture.model_dump(mode="json", exclude_none=True)
        capture.update(derived_from=snapshot_digest(self), derivation=derivation)
        return Snapshot.model_validate(
            {"format": self.format, "server": served, "capture": capture}
        )

    def to_json_bytes(self) -> bytes:
        """The file form: pretty JSON, keys in the order recorded (not sorted), UTF-8."""
        document = self.model_dump(mode="json", exclude_none=True)
        return (json.dumps(document, ensure_ascii=False, indent=2) + "\n").encode("utf-8")


# ----------------------------------------------------------------------------------------
# digest


def digest_document(snapshot: Snapshot) -> dict[str, Any]:
    """The document the digest is taken over: the format and the served content.

    Left out, because they say how or when a snapshot was taken and not what the
    server serves: the whole ``capture`` block, and the bytes of pagination cursors
    (opaque tokens by the protocol, often random or time-based); a cursor is
    replaced by the position of the page it leads to, so page boundaries still count.
    """
    served = snapshot.server.model_dump(mode="json", exclude_none=True)
    lists = [served["lists"], *(r["lists"] for r in (served.get("revisions") or {}).values())]
    for recordings in lists:
        for recording in recordings.values():
            for index, page in enumerate(recording.get("pages") or []):
                if page.get("nextCursor") is not None:
                    page["nextCursor"] = {"prereg:page": index + 1}
    return {"format": snapshot.format, "server": _json_safe_ints(served)}


def snapshot_digest(snapshot: Snapshot) -> str:
    """``sha256:<hex>`` over the RFC 8785 canonical JSON of :func:`digest_document`."""
    canonical = rfc8785.dumps(digest_document(snapshot))
    return DIGEST_PREFIX + hashlib.sha256(canonical).hexdigest()


def _json_safe_ints(value: Any) -> Any:
    """Stand-in for integers beyond I-JSON's exact range, which RFC 8785 cannot encode.

    Schemas do carry such bounds (an int64 ``maximum``); they are hashed by their
    exact decimal spelling instead of being refused or rounded.
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and abs(value) > _SAFE_INT:
        return {"prereg:bigint": str(value)}
    if isinstance(value, dict):
        return {k: _json_safe_ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe_ints(v) for v in value]
    return value


# ----------------------------------------------------------------------------------------
# loading


def load_snapshot(data: bytes, filename: str) -> Snapshot:
    """Parse and validate snapshot bytes; :class:`BadInput` (exit 2) names file and field.

    Duplicate keys and the non-JSON constants ``NaN``/``Infinity`` are refused: both
    would make the bytes on disk mean something other than what is served and hashed.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(f"not UTF-8 (byte {exc.start})", file=filename, field="(file)") from None
    try:
        document = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constants)
    except json.JSONDecodeError as exc:
        raise BadInput(
            f"malformed JSON: {exc.msg}",
            file=filename,
            field=f"(line {exc.lineno}, column {exc.colno})",
        ) from None
    except _DuplicateKey as exc:
        raise BadInput(
            f"duplicate key {exc.key!r} in an object", file=filename, field=exc.key
        ) from None
    except _BadConstant as exc:
        raise BadInput(f"{exc.constant} is not JSON", file=filename, field="(value)") from None
    if not isinstance(document, dict):
        raise BadInput("expected a JSON object (a snapshot)", file=filename, field="(root)")
    if document.get("format") != FORMAT:
        raise BadInput(
            f"expected {FORMAT!r}, got {document.get('format')!r}", file=filename, field="format"
        )
    try:
        return Snapshot.model_validate(document)
    except ValidationError as exc:
        first, *rest = exc.errors()
        details = [f"{format_loc(e['loc'])}: {_error_message(e)}" for e in rest]
        raise BadInput(
            _error_message(first), file=filename, field=format_loc(first["loc"]), details=details
        ) from None


def read_snapshot(path: str | Path) -> Snapshot:
    """:func:`load_snapshot` on a file; a missing or unreadable file is bad input too."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise BadInput("no such file", file=str(path), field="(file)") from None
    except IsADirectoryError:
        raise BadInput(
            "is a directory, expected a snapshot file", file=str(path), field="(file)"
        ) from None
    except OSError as exc:
        raise BadInput(f"cannot read: {exc.strerror}", file=str(path), field="(file)") from None
    return load_snapshot(data, str(path))


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


class _BadConstant(ValueError):
    def __init__(self, constant: str) -> None:
        super().__init__(constant)
        self.constant = constant


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _no_constants(name: str) -> Any:
    raise _BadConstant(name)


def _error_message(error: Any) -> str:
    if error.get("type") == "extra_forbidden":
        return "unknown field"
    message = str(error.get("msg", "invalid"))
    return message.removeprefix("Value error, ")


def _require(obj: dict[str, Any], key: str, kind: type, prefix: str = "") -> Any:
    if key not in obj:
        raise ValueError(f"missing '{prefix}{key}'")
    if not isinstance(obj[key], kind) or isinstance(obj[key], bool):
        raise ValueError(f"'{prefix}{key}' must be a {'string' if kind is str else 'object'}")
    return obj[key]


def _check_initialize(value: dict[str, Any]) -> dict[str, Any]:
    _require(value, "protocolVersion", str)
    _require(value, "capabilities", dict)
    info = _require(value, "serverInfo", dict)
    _require(info, "name", str, "serverInfo.")
    _require(info, "version", str, "serverInfo.")
    if "instructions" in value and not isinstance(value["instructions"], str):
        raise ValueError("'instructions' must be a string")
    return value


def _check_lists(value: dict[str, ListRecording]) -> dict[str, ListRecording]:
    unknown = sorted(set(value) - set(LIST_ITEMS))
    if unknown:
        raise ValueError(f"unknown list method(s) {unknown}; expected some of {sorted(LIST_ITEMS)}")
    if TOOLS_LIST not in value or value[TOOLS_LIST].pages is None:
        raise ValueError("'tools/list' must be recorded with its pages")
    for method, recording in value.items():
        if recording.pages is not None:
            _check_pages(method, recording.pages)
    return value


def _check_pages(method: str, pages: list[dict[str, Any]]) -> None:
    """Each page has its item list; all but the last lead on with a distinct cursor."""
    key = LIST_ITEMS[method]
    seen: set[str] = set()
    for index, page in enumerate(pages):
        where = f"{method} page {index}"
        items = page.get(key)
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise ValueError(f"{where}: '{key}' must be a list of objects")
        cursor = page.get("nextCursor")
        last = index == len(pages) - 1
        if last and cursor is not None:
            raise ValueError(f"{where}: the last page must not carry a nextCursor")
        if not last:
            if not isinstance(cursor, str):
                raise ValueError(f"{where}: a page followed by another needs a string nextCursor")
            if cursor in seen:
                raise ValueError(f"{where}: nextCursor repeats an earlier page's")
            seen.add(cursor)
        if method == TOOLS_LIST:
            for position, tool in enumerate(items):
                if not isinstance(tool.get("name"), str):
                    raise ValueError(f"{where}: tool {position} needs a string 'name'")
                if not isinstance(tool.get("inputSchema"), dict):
                    raise ValueError(f"{where}: tool {position} needs an object 'inputSchema'")


def _floats(value: Any) -> list[float]:
    if isinstance(value, float):
        return [value]
    if isinstance(value, dict):
        return [f for v in value.values() for f in _floats(v)]
    if isinstance(value, list):
        return [f for v in value for f in _floats(v)]
    return []


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None
