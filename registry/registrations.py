"""The registry: register, look up, claim the locked split.

Layout under ``<workspace>/registry/``:

- ``ledger.jsonl``: the hash chain (see :mod:`prereg.registry.ledger`);
- ``frozen/<id>.json``: the read-only frozen copy of each registration (its
  resolved document, digest, source object and the exact ledger line it added);
- ``claims/<seq>.json``: a mirror of each locked-split claim line;
- ``anchors/<seq>.json``: a mirror of each anchor line: the head of a registration's
  run records at the end of a run or at analysis (``runs-anchor``), or the heads of its
  verdict and gold chains after ``prereg judge`` and at analysis (``verdicts-anchor``);
- ``addenda/<seq>.json``: a mirror of each judge added after registration (a post-hoc
  rubric revision, :mod:`prereg.registry.addenda`);
- ``objects/``: the content-addressed bytes of every referenced file.

Every ledger line is mirrored in a file written before the line is appended,
so an edit of any line, the last one included, is detectable by ``verify``.
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prereg.core.errors import BadInput, IntegrityError, ProtocolRefusal, WriteFailure
from prereg.core.files import write_atomic
from prereg.core.safeio import MAX_EXPERIMENT_FILE_BYTES, UnreadableFile, read_regular_file
from prereg.experiments import Experiment, load_experiment
from prereg.experiments.corpus_lint import lint, split_waived
from prereg.experiments.fingerprints import (
    locked_fingerprints,
    locked_prompts,
    split_map,
    task_fingerprint,
)
from prereg.experiments.models import LOCKED_SPLIT, SplitName
from prereg.experiments.unicode.shingles import SHINGLE, THRESHOLD, ShingleIndex
from prereg.registry import feasibility
from prereg.registry.digest import canonical_json, document_digest, file_digest
from prereg.registry.judges import EntryJudge, Judge, judge_digest
from prereg.registry.ledger import Ledger, LedgerHead
from prereg.registry.objects import ObjectStore
from prereg.registry.resolve import Resolved, resolve
from prereg.registry.schema import Registration

#: Suffix of a mirror file written before its ledger line, renamed once the line is in.
PENDING_SUFFIX = ".pending"

#: Task fingerprint maps of frozen experiments, keyed by their files' digests.
_SPLIT_MAPS: dict[tuple[tuple[str, str], ...], dict[str, SplitName]] = {}
#: Locked-split prompts (fingerprint -> (task id, prompt)) of frozen experiments, likewise.
_LOCKED_PROMPTS: dict[tuple[tuple[str, str], ...], dict[str, tuple[str, str]]] = {}

#: The ledger event that pins a registration's run chain (see :meth:`Registry.anchor_runs`).
ANCHOR_EVENT = "runs-anchor"
#: The ledger event that pins a registration's verdict and gold chains (issue 18; see
#: :meth:`Registry.anchor_verdicts`). A ledger written before it holds none and verifies
#: as before.
VERDICTS_ANCHOR_EVENT = "verdicts-anchor"
#: The chains a verdicts-anchor line pins, each as {"count", "head"}.
VERDICT_CHAINS = ("verdicts", "gold")
#: The ledger event that adds a judge to a registration after it was frozen (a post-hoc
#: rubric revision; :mod:`prereg.registry.addenda`).
JUDGE_ADDENDUM_EVENT = "judge-addendum"


@dataclass
class Entry:
    """A registered registration, as the ledger and its frozen copy record it."""

    id: str
    digest: str
    registration: Registration
    frozen_path: Path
    registered_at: str
    seq: int
    files: dict[str, str]  # experiment-relative path -> sha256:<hex>
    source_path: str
    source_object: str
    runnable: bool = True
    feasibility: dict[str, Any] | None = None
    supersedes: str | None = None
    superseded_by: str | None = None
    claims: list[dict[str, Any]] = field(default_factory=list)
    #: judge-addendum ledger lines naming this registration's digest, in ledger order
    addenda: list[dict[str, Any]] = field(default_factory=list)

    @property
    def experiment(self) -> str:
        return self.registration.experiment

    @property
    def judges(self) -> list[EntryJudge]:
        """Every judge of the registration: the registered ones, then those added after
        it (post hoc), each with the digest of the rubric it reads."""
        out = [
            EntryJudge(j, self.files[j.rubric])
            for j in self.registration.judge or []
            if j.rubric in self.files
        ]
        for line in self.addenda:
            try:
                judge = Judge.model_validate(line["judge"])
                out.append(EntryJudge(judge, str(line["rubric"]), line))
            except (KeyError, TypeError, ValueError):
                raise IntegrityError(
                    f"judge addendum at ledger seq {line.get('seq')} of '{self.id}' holds no "
                    "valid judge; run `prereg verify`",
                    file="registry/ledger.jsonl",
                ) from None
        return out


@dataclass(frozen=True)
class RegisterResult:
    entry: Entry
    created: bool  # False when identical content was already registered
    #: the corpus lint at register (issue 41, item 5): open, waived and unused waivers;
    #: an exploratory registration's open findings are warnings
    corpus_lint: dict[str, Any] | None = None


def frozen_shape_problem(frozen: Any) -> str | None:
    """What is mistyped in a parsed frozen copy (``registry/frozen/<id>.json``), or None.

    The members every reader takes: ``digest``, ``ledger_line`` (text, when present), ``document``
    with ``registration`` and ``experiment.files`` (objects; file names to digests),
    ``source`` with ``path`` and ``object`` (text), ``feasibility`` (an object or null).
    """
    if not isinstance(frozen, dict):
        return "not a JSON object"
    if not isinstance(frozen.get("digest"), str):
        return "'digest' is not text"
    if not isinstance(frozen.get("ledger_line", ""), str):  # absent in the earliest copies
        return "'ledger_line' is not text"
    document = frozen.get("document")
    if not isinstance(document, dict):
        return "'document' is not an object"
    if not isinstance(document.get("registration"), dict):
        return "'document.registration' is not an object"
    experiment = document.get("experiment")
    files = experiment.get("files") if isinstance(experiment, dict) else None
    if not isinstance(files, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in files.items()
    ):
        return "'document.experiment.files' is not an object of file names and digests"
    source = frozen.get("source")
    if not isinstance(source, dict) or not all(
        isinstance(source.get(k), str) for k in ("path", "object")
    ):
        return "'source' is not an object with text 'path' and 'object'"
    if not isinstance(frozen.get("feasibility"), (dict, type(None))):
        return "'feasibility' is neither an object nor null"
    return None


def frozen_body_digest(frozen: dict[str, Any]) -> str:
    """Digest of a frozen copy without its mirrored ledger line (which the line pins)."""
    return document_digest({k: v for k, v in frozen.items() if k != "ledger_line"})


def _write_readonly(path: Path, data: bytes) -> None:
    """Write a registry file read-only, whole or not at all (WriteFailure, exit 1)."""
    write_atomic(path, data, readonly=True)


def pending_path(path: Path) -> Path:
    """Where a mirror waits until its ledger line is appended (see ``_append_mirrored``)."""
    return path.with_name(path.name + PENDING_SUFFIX)


def mirror_reads(path: Path) -> tuple[Path, Path, Path]:
    """The names to try, in order, when reading the mirror at ``path`` without the lock.

    A writer renames pending to final atomically while readers hold no lock, so a
    reader that finds neither name on one look may have looked between the two: try
    final, then pending, then final again. The rename can fall between the first two
    reads but never between the last two, so a mirror that exists is always found.
    """
    return (path, pending_path(path), path)


#: A frozen copy or a ledger mirror: a registration and its experiment's digests.
MAX_MIRROR_BYTES = 4 * MAX_EXPERIMENT_FILE_BYTES


def _read_mirror(path: Path) -> bytes:
    """A mirror's bytes under its final or pending name (FileNotFoundError for neither)."""
    for candidate in mirror_reads(path):
        try:  # regular files only, bounded: a FIFO there is "cannot be read", never a hang
            return read_regular_file(candidate, limit=MAX_MIRROR_BYTES, what="a registry file")
        except FileNotFoundError:
            continue
        except UnreadableFile as exc:
            raise OSError(errno.EINVAL, exc.reason) from None
    raise FileNotFoundError(str(path))


def _reader(files: dict[str, bytes]) -> Callable[[str], bytes]:
    """Read resolved experiment files (FileNotFoundError for one not resolved)."""

    def read(relative: str) -> bytes:
        if relative not in files:
            raise FileNotFoundError(relative)
        return files[relative]

    return read


class Registry:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.ledger = Ledger(self.root / "ledger.jsonl")
        self.objects = ObjectStore(self.root / "objects")
        self.frozen_dir = self.root / "frozen"
        self.claims_dir = self.root / "claims"
        self.anchors_dir = self.root / "anchors"
        self.addenda_dir = self.root / "addenda"

    # ---- reading -------------------------------------------------------------------------

    def frozen_path(self, reg_id: str) -> Path:
        return self.frozen_dir / f"{reg_id}.json"

    def _load_frozen(self, reg_id: str) -> dict[str, Any]:
        path = self.frozen_path(reg_id)
        try:
            data: dict[str, Any] = json.loads(_read_mirror(path))
            mistyped = frozen_shape_problem(data)
            if mistyped is not None:  # a typed read: exit 3 naming the file, no traceback
                raise IntegrityError(
                    f"frozen copy of '{reg_id}' is not a frozen registration ({mistyped}); "
                    "run `prereg verify`",
                    file=str(path),
                )
            return data
        except FileNotFoundError:
            raise IntegrityError(
                f"frozen copy of '{reg_id}' is missing ({path}); run `prereg verify`"
            ) from None
        except OSError as exc:  # a folder (or a link loop) in place of the file
            raise IntegrityError(
                f"frozen copy of '{reg_id}' cannot be read ({exc.strerror or exc}); it should "
                "be a file; run `prereg verify`",
                file=str(path),
            ) from None
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise IntegrityError(
                f"frozen copy of '{reg_id}' is not valid JSON; run `prereg verify`"
            ) from None

    def entries(self) -> list[Entry]:
        """Every registration, in ledger order, with supersession and claims filled in."""
        events = self.ledger.events()
        regs = [e for e in events if e.get("event") == "registration"]
        claims = [e for e in events if e.get("event") == "locked-split-claim"]
        addenda = [e for e in events if e.get("event") == JUDGE_ADDENDUM_EVENT]
        superseded_by = {e["supersedes"]: e["id"] for e in regs if e.get("supersedes")}
        out = []
        for event in regs:
            frozen = self._load_frozen(event["id"])
            try:
                registration = Registration.model_validate(frozen["document"]["registration"])
            except ValueError as exc:  # pydantic's ValidationError is a ValueError
                raise IntegrityError(
                    f"frozen copy of '{event['id']}' holds no valid registration "
                    f"({str(exc).splitlines()[0]}); run `prereg verify`",
                    file=str(self.frozen_path(event["id"])),
                ) from None
            out.append(
                Entry(
                    id=event["id"],
                    digest=event["digest"],
                    registration=registration,
                    frozen_path=self.frozen_path(event["id"]),
                    registered_at=event["time"],
                    seq=event["seq"],
                    files=dict(frozen["document"]["experiment"]["files"]),
                    source_path=frozen["source"]["path"],
                    source_object=frozen["source"]["object"],
                    runnable=bool(event.get("runnable", True)),
                    feasibility=frozen.get("feasibility"),
                    supersedes=event.get("supersedes"),
                    superseded_by=superseded_by.get(event["id"]),
                    claims=[c for c in claims if c.get("id") == event["id"]],
                    addenda=[a for a in addenda if a.get("digest") == event["digest"]],
                )
            )
        return out

    def find(self, reg_id: str) -> Entry | None:
        for entry in self.entries():
            if entry.id == reg_id:
                return entry
        return None

    def get(self, reg_id: str) -> Entry:
        entry = self.find(reg_id)
        if entry is None:
            known = [e.id for e in self.entries()]
            raise BadInput(
                f"no registration '{reg_id}' in {self.root} (registered: "
                f"{', '.join(known) or 'none'})",
                field="id",
            )
        return entry

    def head(self) -> LedgerHead:
        return self.ledger.head()

    def read_object(self, digest: str) -> bytes:

        try:
            data = self.objects.get(digest)
        except FileNotFoundError:
            raise IntegrityError(
                f"registry object {digest} is missing; run `prereg verify`",
            ) from None
        except OSError as exc:  # a folder (or a link loop) in place of the file
            raise IntegrityError(
                f"registry object {digest} cannot be read ({exc.strerror or exc}); it should "
                "be a file; run `prereg verify`",
            ) from None
        if file_digest(data) != digest:
            raise IntegrityError(f"registry object {digest} was edited; run `prereg verify`")
        return data

    def experiment_reader(self, entry: Entry) -> Callable[[str], bytes]:
        """Read the frozen experiment files of a registration (never the workspace copy)."""
        files = dict(entry.files)

        def read(relative: str) -> bytes:
            if relative not in files:
                raise FileNotFoundError(relative)
            return self.read_object(files[relative])

        return read

    def load_experiment(self, entry: Entry) -> Experiment:

        return load_experiment(self.experiment_reader(entry), entry.experiment)

    def claim_of(self, experiment: str) -> dict[str, Any] | None:
        """The locked-split claim on an experiment, if any."""
        for event in self.ledger.events():
            if event.get("event") == "locked-split-claim" and event.get("experiment") == experiment:
                return event
        return None

    # ---- writing -------------------------------------------------------------------------

    def register(
        self, path: Path, experiments_dir: Path, display: str | None = None
    ) -> RegisterResult:
        """Validate, resolve, freeze and append. Nothing is written on any error."""
        resolved = resolve(path, experiments_dir, display)
        return self._commit(resolved)

    def _commit(self, resolved: Resolved) -> RegisterResult:
        reg = resolved.registration
        experiment = resolved.experiment or load_experiment(_reader(resolved.files), reg.experiment)
        # the split's tasks, so the gate counts clusters and intents and simulates them
        gate = feasibility.check(reg, resolved.n_prompts, experiment.tasks_in_split(reg.split))
        splits = split_map(experiment)
        # checked once before the lock, so a refusal writes nothing (not even the lock
        # file), and again under it, where a concurrent register cannot interleave
        existing = self._refusals(resolved, splits)
        if existing is not None:
            return RegisterResult(entry=existing, created=False)
        self._check_near_duplicates(experiment, resolved.source_path)
        linted = _corpus_lint_gate(reg, experiment, resolved.source_path)
        with self.ledger.locked():
            self.finish_pending()
            existing = self._refusals(resolved, splits)
            if existing is not None:
                return RegisterResult(entry=existing, created=False)
            self._check_near_duplicates(experiment, resolved.source_path)
            source_object = self.objects.put(resolved.source_bytes)
            for data in resolved.files.values():
                self.objects.put(data)
            body = {
                "digest": resolved.digest,
                "document": resolved.document,
                "source": {"path": resolved.source_path, "object": source_object},
                "feasibility": gate,
            }
            # the ledger line pins the whole frozen copy (its body's hash) and the frozen
            # copy mirrors the line: an edit of either shows against the other
            event = {
                "event": "registration",
                "id": reg.id,
                "digest": resolved.digest,
                "experiment": reg.experiment,
                "kind": reg.kind,
                "split": reg.split,
                "supersedes": reg.supersedes,
                "runnable": True if gate is None else bool(gate["runnable"]),
                "frozen": frozen_body_digest(body),
            }
            line = self.ledger.prepare(event)
            frozen = {**body, "ledger_line": line.decode()}
            # canonical bytes, so that verify can tell any byte edit, formatting included
            self._append_mirrored(self.frozen_path(reg.id), canonical_json(frozen) + b"\n", line)
        entry = self.get(reg.id)
        return RegisterResult(entry=entry, created=True, corpus_lint=linted)

    def _refusals(self, resolved: Resolved, splits: dict[str, SplitName]) -> Entry | None:
        """Raise if the protocol refuses this registration; the entry if already registered."""
        reg = resolved.registration
        existing = self.find(reg.id)
        if existing is not None:
            if existing.digest == resolved.digest:
                return existing
            raise ProtocolRefusal(
                f"registration id '{reg.id}' is already registered with digest "
                f"{existing.digest}; this content has digest {resolved.digest}. A "
                "registration is never edited: register it under a new id with "
                f"`supersedes: {reg.id}`",
                file=resolved.source_path,
                field="id",
            )
        if reg.supersedes is not None:
            old = self.find(reg.supersedes)
            if old is None:
                raise BadInput(
                    f"supersedes unknown registration '{reg.supersedes}'",
                    file=resolved.source_path,
                    field="supersedes",
                )
            if old.superseded_by is not None:
                raise ProtocolRefusal(
                    f"'{reg.supersedes}' is already superseded by '{old.superseded_by}'; "
                    f"supersede '{old.superseded_by}' instead",
                    file=resolved.source_path,
                    field="supersedes",
                )
        self._check_tasks_by_content(reg, splits, resolved.source_path)
        if reg.kind == "confirmatory":
            claim = self.claim_of(reg.experiment)
            if claim is not None:
                raise ProtocolRefusal(
                    f"the locked test split of experiment '{reg.experiment}' was already "
                    f"spent by confirmatory registration '{claim['id']}' (ledger seq "
                    f"{claim['seq']}, {claim['time']}); a second confirmatory run on it is "
                    "refused",
                    file=resolved.source_path,
                    field="split",
                )
        return None

    def claim_locked_split(self, entry: Entry) -> dict[str, Any]:
        """Claim the experiment's locked split for a confirmatory registration.

        Idempotent for the same registration; refused (exit 4) when another
        registration already claimed it, or when the registration is exploratory.
        """
        if entry.registration.kind != "confirmatory" or entry.registration.split != LOCKED_SPLIT:
            raise ProtocolRefusal(
                f"'{entry.id}' is {entry.registration.kind} on split "
                f"'{entry.registration.split}': only a confirmatory "
                "registration may run the locked test split"
            )
        tasks = sorted(locked_fingerprints(self.task_splits(entry)))
        with self.ledger.locked():
            self.finish_pending()
            claim = self.claim_of(entry.experiment)
            if claim is not None:
                if claim.get("id") == entry.id and claim.get("digest") == entry.digest:
                    return claim
                raise ProtocolRefusal(
                    f"the locked test split of experiment '{entry.experiment}' was already "
                    f"claimed by '{claim['id']}' (ledger seq {claim['seq']}, {claim['time']})"
                )
            taken = self._claimed_by_others(entry.id, tasks)
            if taken:
                raise ProtocolRefusal(
                    f"{len(taken)} test task(s) of '{entry.id}' were already claimed, by "
                    "content, by "
                    + ", ".join(sorted({c["id"] for c in taken.values()}))
                    + ": the locked split is locked whatever the experiment is called"
                )
            self._check_claim_near_duplicates(entry)
            event = {
                "event": "locked-split-claim",
                "id": entry.id,
                "digest": entry.digest,
                "experiment": entry.experiment,
                "split": LOCKED_SPLIT,
                "tasks": tasks,
            }
            line = self.ledger.prepare(event)
            parsed: dict[str, Any] = json.loads(line)
            self._append_mirrored(self.claims_dir / f"{parsed['seq']:06d}.json", line, line)
            return parsed

    def add_judge(
        self, entry: Entry, judge: Judge, rubric: bytes, rubric_path: str, reason: str
    ) -> dict[str, Any]:
        """Append a judge to ``entry`` after it was frozen (a post-hoc rubric revision):
        the rubric's bytes become an object, the judge and the reason a ledger line
        mirrored in ``addenda/``. Validation is :func:`prereg.registry.addenda.add_judge`'s;
        here only the id is checked again under the lock (two adders racing)."""
        with self.ledger.locked():
            self.finish_pending()
            fresh = self.get(entry.id)
            taken = {j.judge.key for j in fresh.judges}
            if judge.key in taken:
                raise BadInput(
                    f"registration '{entry.id}' already has a judge '{judge.key}' (judges: "
                    f"{', '.join(sorted(taken))}); give the revision its own id",
                    field="id",
                )
            digest = self.objects.put(rubric)
            event = {
                "event": JUDGE_ADDENDUM_EVENT,
                "id": entry.id,
                "digest": entry.digest,
                "judge": judge.model_dump(mode="json"),
                "judge_digest": judge_digest(judge, digest),
                "rubric": digest,
                "rubric_path": rubric_path,
                "reason": reason,
            }
            line = self.ledger.prepare(event)
            parsed: dict[str, Any] = json.loads(line)
            self._append_mirrored(self.addenda_dir / f"{parsed['seq']:06d}.json", line, line)
            return parsed

    # ---- ordered writes -------------------------------------------------------------------

    def _append_mirrored(self, path: Path, mirror: bytes, line: bytes) -> None:
        """Mirror file first (pending), then the ledger line, then the mirror's name.

        A kill before the line leaves only a pending file: no registration, claim or
        anchor happened, and the next writer removes it. A kill after the line leaves a
        pending mirror that readers use and the next writer renames. Either way the
        registry holds no half-made entry and ``verify`` raises no false alarm. Hold
        :meth:`Ledger.locked`.
        """
        pending = pending_path(path)
        _write_readonly(pending, mirror)
        try:
            self.ledger.append_prepared(line)
        except OSError as exc:
            pending.unlink(missing_ok=True)
            raise WriteFailure(
                f"cannot append to the ledger: {exc.strerror or exc}", file=str(self.ledger.path)
            ) from None
        os.replace(pending, path)

    def finish_pending(self) -> None:
        """Complete or discard mirrors a killed writer left pending. Hold the ledger lock."""
        lines = {line.raw for line in self.ledger.lines()}
        for folder in (self.frozen_dir, self.claims_dir, self.anchors_dir, self.addenda_dir):
            if not folder.is_dir():
                continue
            for pending in sorted(folder.glob("*" + PENDING_SUFFIX)):
                data = pending.read_bytes()
                if folder == self.frozen_dir:
                    try:
                        line = json.loads(data).get("ledger_line", "").encode()
                    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
                        line = b""
                else:
                    line = data
                final = pending.with_name(pending.name.removesuffix(PENDING_SUFFIX))
                if line in lines and not final.exists():
                    os.replace(pending, final)
                else:
                    pending.unlink()

    # ---- the locked split, by content -----------------------------------------------------

    def task_splits(self, entry: Entry) -> dict[str, SplitName]:
        """Task fingerprint -> split under ``entry``'s frozen experiment (cached by content).

        Always the current fingerprint version, recomputed from the frozen experiment (its
        objects are pinned by digest), so registrations made before a change of the
        fingerprint function are compared under the new one (issue 40)."""
        self._frozen_content(entry)
        return _SPLIT_MAPS[tuple(sorted(entry.files.items()))]

    def locked_prompts(self, entry: Entry) -> dict[str, tuple[str, str]]:
        """Fingerprint -> (task id, prompt) of the locked split of ``entry``'s frozen
        experiment (cached by content)."""
        self._frozen_content(entry)
        return _LOCKED_PROMPTS[tuple(sorted(entry.files.items()))]

    def _frozen_content(self, entry: Entry) -> None:
        key = tuple(sorted(entry.files.items()))
        if key in _SPLIT_MAPS and key in _LOCKED_PROMPTS:
            return
        for cache in (_SPLIT_MAPS, _LOCKED_PROMPTS):
            if len(cache) >= 64:
                cache.pop(next(iter(cache)))
        experiment = self.load_experiment(entry)
        _SPLIT_MAPS[key] = split_map(experiment)
        _LOCKED_PROMPTS[key] = locked_prompts(experiment)

    def claimed_tasks(self) -> dict[str, dict[str, Any]]:
        """Fingerprint -> the claim event that holds it, over every claim of the ledger.

        The fingerprints a claim line names (of the version current when it was written:
        version 1 before issue 40) and those of the current version, recomputed from the
        claimant's frozen experiment: the versions' digests never coincide (each hashes
        its version's name), so one map holds both, and a claim line written before claims
        named their tasks is covered too.
        """
        held: dict[str, dict[str, Any]] = {}
        entries = {e.id: e for e in self.entries()}
        for event in self.ledger.events():
            if event.get("event") != "locked-split-claim":
                continue
            tasks = set(event.get("tasks") or ())
            if event.get("id") in entries:
                tasks |= locked_fingerprints(self.task_splits(entries[event["id"]]))
            for fingerprint in sorted(tasks):
                held.setdefault(fingerprint, event)
        return held

    def _check_near_duplicates(self, experiment: Experiment, source: str) -> None:
        """Refuse (exit 4) a new prompt that is a near-duplicate of a claimed test prompt.

        New: its fingerprint is in no earlier registration (a task registered before
        keeps the rules of :meth:`_check_tasks_by_content`, exact ones). Near: the
        Jaccard similarity of the two prompts' 5-character shingles of their reader's
        form is at least :data:`~prereg.experiments.unicode.shingles.THRESHOLD`
        (docs/experiments.md, "Fingerprints"). Every split counts: a near-duplicate
        in dev is a test prompt seen by exploratory work, one in test a second spending.
        A ToolBottleneckBench study's tasks are generated from (family, seed) and differ
        by design only in their ids: they are neither probed nor indexed.
        """
        if experiment.toolbottleneck is not None:
            return
        entries = {e.id: e for e in self.entries()}
        claimed = self._claimed_prompts(entries, None)
        if not claimed:
            return
        known: set[str] = set(claimed)
        for earlier in entries.values():
            known.update(self.task_splits(earlier))
        new = [(t.id, t.prompt) for t in experiment.tasks if task_fingerprint(t) not in known]
        found = _near_duplicates(new, claimed)
        if found:
            raise ProtocolRefusal(
                f"{len(found)} new prompt(s) of experiment '{experiment.name}' are "
                f"near-duplicates of test prompts already claimed ({found[0]}): the "
                "locked split is spent whatever the exact characters; near-duplicates are "
                f"matched by {SHINGLE}-character shingles of what a reader sees, at "
                f"Jaccard >= {THRESHOLD:g}",
                file=source,
                field="experiment",
                details=found[:10],
            )

    def _check_claim_near_duplicates(self, entry: Entry) -> None:
        """At a claim: refuse (exit 4) test prompts near-duplicates of another
        registration's claimed test prompts (a copy registered before that claim)."""
        entries = {e.id: e for e in self.entries()}
        claimed = self._claimed_prompts(entries, entry.id)
        mine = [
            (task_id, prompt)
            for fp, (task_id, prompt) in self.locked_prompts(entry).items()
            if fp not in claimed
        ]
        found = _near_duplicates(mine, claimed)
        if found:
            raise ProtocolRefusal(
                f"{len(found)} test prompt(s) of '{entry.id}' are near-duplicates of test "
                f"prompts already claimed ({found[0]}): the locked split is spent "
                "whatever the exact characters",
                details=found[:10],
            )

    def _claimed_prompts(
        self, entries: dict[str, Entry], exclude: str | None
    ) -> dict[str, tuple[str, str, str]]:
        """Fingerprint -> (claimant id, task id, prompt) of every claimed test prompt
        (of claims by registrations other than ``exclude``), from the frozen copies."""
        claimed: dict[str, tuple[str, str, str]] = {}
        for event in self.ledger.events():
            if event.get("event") != "locked-split-claim" or event.get("id") == exclude:
                continue
            if event.get("id") in entries:
                for fp, (task_id, prompt) in self.locked_prompts(entries[event["id"]]).items():
                    claimed.setdefault(fp, (event["id"], task_id, prompt))
        return claimed

    def _claimed_by_others(self, reg_id: str, tasks: list[str]) -> dict[str, dict[str, Any]]:
        held = self.claimed_tasks()
        return {fp: held[fp] for fp in tasks if fp in held and held[fp].get("id") != reg_id}

    def _check_tasks_by_content(
        self, reg: Registration, splits: dict[str, SplitName], source: str
    ) -> None:
        """A task keeps the locked split, in or out, across registrations and experiments.

        Refused (exit 4): a task an earlier registration had in the locked split now in
        another split, or one it had outside now in the locked split (its prompt was
        seen by exploratory work); and a confirmatory registration whose test tasks are
        claimed by another registration, by content. Moving a task between the
        exploratory splits (dev, validation) is allowed.
        """
        first: dict[str, tuple[SplitName, str]] = {}
        for earlier in self.entries():
            for fingerprint, split in self.task_splits(earlier).items():
                first.setdefault(fingerprint, (split, earlier.id))
        moved = [
            (fingerprint, was, now)
            for fingerprint, now in splits.items()
            if fingerprint in first
            and (was := first[fingerprint])[0] != now
            and LOCKED_SPLIT in (was[0], now)
        ]
        if moved:
            shown = [
                f"a task '{was[1]}' had in split {was[0]} is in split {now} here"
                for _, was, now in moved
            ]
            raise ProtocolRefusal(
                f"{len(moved)} task(s) of experiment '{reg.experiment}' change sides of the "
                f"locked split ('{LOCKED_SPLIT}') against earlier registrations: a task keeps "
                "the split it was first registered in (tasks are matched by content)",
                file=source,
                field="experiment",
                details=shown[:10],
            )
        if reg.kind == "confirmatory":
            taken = self._claimed_by_others(reg.id, sorted(locked_fingerprints(splits)))
            if taken:
                raise ProtocolRefusal(
                    f"{len(taken)} test task(s) were already claimed, by content, by "
                    + ", ".join(sorted({c["id"] for c in taken.values()}))
                    + ": the locked split is spent whatever the experiment is called",
                    file=source,
                    field="split",
                )

    # ---- run-chain anchors -------------------------------------------------------------

    def anchors(self, digest: str | None = None) -> list[dict[str, Any]]:
        """Run-chain anchors in ledger order (of one registration digest, if given)."""
        return [
            e
            for e in self.ledger.events()
            if e.get("event") == ANCHOR_EVENT and (digest is None or e.get("digest") == digest)
        ]

    def anchor_runs(self, entry: Entry, count: int, head: str) -> dict[str, Any] | None:
        """Pin the head of ``entry``'s run chain in the ledger (None: already pinned).

        The line is mirrored in ``anchors/<seq>.json`` first, like a claim, so an edit
        of the newest line shows too. A chain head that the ledger pins can no longer
        be rewritten, even by someone who recomputes every record hash, without
        rewriting the ledger after it.
        """
        with self.ledger.locked():
            self.finish_pending()
            latest = self.anchors(entry.digest)
            if latest and (latest[-1].get("count"), latest[-1].get("head")) == (count, head):
                return None
            return self._append_anchor(
                {
                    "event": ANCHOR_EVENT,
                    "id": entry.id,
                    "digest": entry.digest,
                    "count": count,
                    "head": head,
                }
            )

    def pin_link(self, entry: Entry, count: int, head: str) -> dict[str, Any]:
        """Pin one link of ``entry``'s run chain as soon as it is stored (issue 40, item 8).

        A confirmatory run on the locked split calls this for every record it appends
        (:func:`prereg.runners.store.verify.link_pin`), so removing records of a run killed
        before its end-of-run anchor leaves a chain shorter than the ledger pinned. The
        link is the one this process just wrote (its hash over the bytes it wrote), so
        it is pinned as a verified head is. Cost independent of the ledger's length: the
        ledger's newest line is read from the file's end, and mirrors a killed writer
        left pending are finished only when one is in the way.
        """
        event = {
            "event": ANCHOR_EVENT,
            "id": entry.id,
            "digest": entry.digest,
            "count": count,
            "head": head,
        }
        with self.ledger.locked():
            line = self.ledger.prepare(event)
            path = self.anchors_dir / f"{json.loads(line)['seq']:06d}.json"
            if pending_path(path).exists():
                self.finish_pending()
                line = self.ledger.prepare(event)
                path = self.anchors_dir / f"{json.loads(line)['seq']:06d}.json"
            self._append_mirrored(path, line, line)
            parsed: dict[str, Any] = json.loads(line)
            return parsed

    def _append_anchor(self, event: dict[str, Any]) -> dict[str, Any]:
        """Append an anchor line, mirrored in ``anchors/<seq>.json``; hold the lock."""
        line = self.ledger.prepare(event)
        parsed: dict[str, Any] = json.loads(line)
        self._append_mirrored(self.anchors_dir / f"{parsed['seq']:06d}.json", line, line)
        return parsed

    def verdict_anchors(self, digest: str | None = None) -> list[dict[str, Any]]:
        """Verdict-chain anchors in ledger order (of one registration digest, if given)."""
        return [
            e
            for e in self.ledger.events()
            if e.get("event") == VERDICTS_ANCHOR_EVENT
            and (digest is None or e.get("digest") == digest)
        ]

    def anchor_verdicts(
        self, entry: Entry, heads: dict[str, dict[str, Any]]
    ) -> dict[str, Any] | None:
        """Pin the heads of ``entry``'s verdict and gold chains (None: already pinned).

        ``heads`` maps "verdicts" and "gold" to ``{"count": int, "head": str}``. One line
        pins both chains; like a run-chain anchor it is mirrored in ``anchors/`` first,
        so removing the newest verdicts or gold labels, even with every hash recomputed,
        shows against it.
        """
        pinned = {
            name: {"count": heads[name]["count"], "head": heads[name]["head"]}
            for name in VERDICT_CHAINS
        }
        with self.ledger.locked():
            self.finish_pending()
            latest = self.verdict_anchors(entry.digest)
            if latest and all(latest[-1].get(n) == pinned[n] for n in VERDICT_CHAINS):
                return None
            return self._append_anchor(
                {
                    "event": VERDICTS_ANCHOR_EVENT,
                    "id": entry.id,
                    "digest": entry.digest,
                    **pinned,
                }
            )


def _near_duplicates(
    prompts: list[tuple[str, str]], claimed: dict[str, tuple[str, str, str]]
) -> list[str]:
    """'task X ~ test task Y claimed by Z (similarity s)' for each of ``prompts`` (task id,
    prompt) near a claimed test prompt (its most similar one)."""
    if not prompts or not claimed:
        return []
    index = ShingleIndex((fp, prompt) for fp, (_, _, prompt) in claimed.items())
    found = []
    for task_id, prompt in prompts:
        for match in index.matches(prompt)[:1]:
            claimant, claimed_task, _ = claimed[str(match.key)]
            found.append(
                f"task '{task_id}' ~ test task '{claimed_task}' claimed by '{claimant}' "
                f"(similarity {match.similarity:.2f})"
            )
    return found


def _corpus_lint_gate(reg: Registration, experiment: Experiment, source: str) -> dict[str, Any]:
    """The corpus lint of ``experiment`` against ``reg``'s waivers; refuse (exit 4) a
    confirmatory registration with an unwaived finding (docs/experiments.md, "Corpus
    lint"). Exploratory: never refused, the open findings are returned as warnings."""
    waivers = [] if reg.corpus_lint is None else [w.to_json() for w in reg.corpus_lint.waive]
    confirmatory = reg.kind == "confirmatory"
    linted = lint(experiment, near_duplicates_too=confirmatory)
    open_, waived, unused = split_waived(linted.findings, waivers)
    out: dict[str, Any] = {
        "open": [f.to_json() for f in open_],
        "waived": [{**f.to_json(), "waiver": dict(w)} for f, w in waived],
        "unused_waivers": [dict(w) for w in unused],
    }
    if reg.kind == "confirmatory" and open_:
        first = open_[0]
        raise ProtocolRefusal(
            f"the corpus lint of experiment '{experiment.name}' has {len(open_)} unwaived "
            f"finding(s) (first: {first.rule} at {first.where()}: {first.message}); a "
            "confirmatory registration needs a clean corpus or a waiver with a reason "
            "(corpus_lint: {waive: [{rule, task or tool, reason}]}); see `prereg corpus "
            f"lint {experiment.name}`",
            file=source,
            field="corpus_lint",
            details=[f"{f.rule} {f.where()}: {f.matched!r}" for f in open_[:10]],
        )
    return out
