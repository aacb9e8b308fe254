"""``prereg experiment new``: a selection experiment from an MCP snapshot and a prompt file.

A tool vendor has an MCP server and prompts; this writes, under the workspace's
``experiments/NAME/``, a complete selection experiment that ``prereg register`` accepts:

- ``snapshots/original.json``: the snapshot as given (the server's own descriptions);
- ``snapshots/edited.json``: a copy of it, the second surface, for the user to edit (the
  tool and server descriptions in ``server.initialize.serverInfo`` and
  ``server.lists.tools/list``); until edited the two arms are a placebo comparison;
- ``corpus.yaml``: one task per CSV row (prompt, intent, polarity, cluster; the expected
  tool, when given, is checked against the snapshot and kept in the task's notes);
- ``service.yaml``: a placeholder service. The surfaces are snapshots, so a host's calls to
  their tools are refused by the replay and never executed: no operation of it runs;
- ``experiment.yaml``: both surfaces, and the clusters split by seeded fractions
  (:mod:`prereg.experiments.splits`; a row without a cluster is a cluster of its own);

and ``drafts/NAME.yaml``, an exploratory registration on the dev split comparing the two
surfaces on selection (the first call went to the server), on the local host: offline, no
key, the snapshot replayed.

The CSV's columns: ``prompt``, ``intent``, ``polarity`` (positive, negative or optional),
and optionally ``cluster`` and ``expected_tool``. A bad row is bad input (exit 2) naming
the file, the line and the column; nothing is written until everything checked, and the
experiment is written to a temporary folder, loaded as ``register`` loads it, and only
then moved into place.
"""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from prereg.core.errors import BadInput
from prereg.core.files import write_atomic
from prereg.core.safeio import read_input
from prereg.core.workspace import Workspace
from prereg.experiments.loader import folder_reader, load_experiment
from prereg.experiments.models import ID_PATTERN, SPLIT_NAMES
from prereg.experiments.snapshots import load_snapshot_bytes, snapshot_surface
from prereg.experiments.splits import assign_by_fractions

#: An experiment (and its draft registration's) name: a registration id's characters.
NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
REQUIRED_COLUMNS = ("prompt", "intent", "polarity")
OPTIONAL_COLUMNS = ("cluster", "expected_tool")
POLARITIES = ("positive", "negative", "optional")
SURFACES = ("original", "edited")
FRACTIONS = {"dev": 0.5, "validation": 0.25, "test": 0.25}
SEED = 1
#: the largest prompt file read (bytes): a prompt list, not a data set
MAX_PROMPTS_BYTES = 8 * 1024 * 1024

_ID = re.compile(ID_PATTERN)
ID_WORDS = "an id (lower-case letters, digits, '-' and '_', starting with a letter or digit)"


@dataclass(frozen=True)
class PromptRow:
    """One CSV row, checked: the line it ends on and its values."""

    line: int
    prompt: str
    intent: str
    polarity: str
    cluster: str | None
    expected_tool: str | None


def _cell(row: dict[str, str | None], column: str) -> str:
    value = row.get(column)
    return "" if value is None else value.strip()


def _prompt_row(
    raw: dict[str, str | None],
    line: int,
    where: str,
    tools: list[str],
    clusters: dict[str, tuple[str, str, int]],
) -> PromptRow:
    """One CSV row checked (``clusters``: each cluster's first intent, polarity, line)."""
    prompt = _cell(raw, "prompt")
    if not prompt:
        raise BadInput("the prompt is empty", file=where, field="prompt")
    intent = _cell(raw, "intent")
    if not _ID.fullmatch(intent) or len(intent) > 100:
        raise BadInput(f"intent {intent!r} is not {ID_WORDS}", file=where, field="intent")
    polarity = _cell(raw, "polarity")
    if polarity not in POLARITIES:
        raise BadInput(
            f"polarity {polarity!r} is not one of {', '.join(POLARITIES)}",
            file=where,
            field="polarity",
        )
    cluster = _cell(raw, "cluster") or None
    if cluster is not None:
        if not _ID.fullmatch(cluster) or len(cluster) > 100:
            raise BadInput(f"cluster {cluster!r} is not {ID_WORDS}", file=where, field="cluster")
        first = clusters.setdefault(cluster, (intent, polarity, line))
        if first[:2] != (intent, polarity):
            raise BadInput(
                f"cluster '{cluster}' has intent/polarity {first[0]}/{first[1]} on line "
                f"{first[2]}: the prompts of a cluster are paraphrases, with one intent "
                "and one polarity",
                file=where,
                field="cluster",
            )
    expected = _cell(raw, "expected_tool") or None
    if expected is not None and expected not in tools:
        raise BadInput(
            f"expected_tool {expected!r} is not a tool of the snapshot ({', '.join(tools)})",
            file=where,
            field="expected_tool",
        )
    if expected is not None and polarity == "negative":
        raise BadInput(
            "a negative prompt expects no tool (the right behaviour uses none)",
            file=where,
            field="expected_tool",
        )
    return PromptRow(line, prompt, intent, polarity, cluster, expected)


def read_prompts(path: Path, tools: list[str]) -> list[PromptRow]:
    """The checked rows of a prompt file; BadInput naming file, line and column otherwise."""
    data = read_input(path, limit=MAX_PROMPTS_BYTES, what="a prompt file")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise BadInput(f"not UTF-8 text ({exc})", file=str(path)) from None
    reader = csv.DictReader(io.StringIO(text, newline=""))
    header = [h.strip() for h in (reader.fieldnames or [])]
    reader.fieldnames = header
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise BadInput(
            f"missing column(s) {missing} (columns: prompt, intent, polarity, and optionally "
            "cluster and expected_tool)",
            file=f"{path}:1",
        )
    unknown = [c for c in header if c not in REQUIRED_COLUMNS + OPTIONAL_COLUMNS]
    if unknown:
        raise BadInput(
            f"unknown column(s) {unknown} (columns: prompt, intent, polarity, and optionally "
            "cluster and expected_tool)",
            file=f"{path}:1",
        )
    rows: list[PromptRow] = []
    clusters: dict[str, tuple[str, str, int]] = {}
    for raw in reader:
        where = f"{path}:{reader.line_num}"
        if None in raw or any(v is None for v in raw.values()):
            raise BadInput("the row has more or fewer fields than the header", file=where)
        if any(_cell(raw, c) for c in header):  # else a blank line
            rows.append(_prompt_row(raw, reader.line_num, where, tools, clusters))
    if not rows:
        raise BadInput("the prompt file holds no prompts", file=str(path))
    return rows


def _task_ids(rows: list[PromptRow]) -> list[tuple[str, str]]:
    """(task id, cluster) per row: ``t001``...; a row without a cluster gets ``c001``..."""
    width = max(3, len(str(len(rows))))
    taken = {r.cluster for r in rows if r.cluster is not None}
    out = []
    for i, row in enumerate(rows, start=1):
        cluster = row.cluster
        if cluster is None:
            cluster = f"c{i:0{width}d}"
            while cluster in taken:
                cluster = "c" + cluster
        taken.add(cluster)
        out.append((f"t{i:0{width}d}", cluster))
    return out


def _corpus(path: Path, rows: list[PromptRow]) -> dict[str, Any]:
    intents: dict[str, str] = {}
    for row in rows:
        intents.setdefault(row.intent, f"Prompts of intent '{row.intent}' ({path.name}).")
    tasks = []
    for row, (task_id, cluster) in zip(rows, _task_ids(rows), strict=True):
        task: dict[str, Any] = {
            "id": task_id,
            "intent": row.intent,
            "cluster": cluster,
            "polarity": row.polarity,
            "prompt": row.prompt,
        }
        notes = f"{path.name} line {row.line}"
        if row.expected_tool is not None:
            notes += f"; expected tool: {row.expected_tool}"
        task["notes"] = notes
        tasks.append(task)
    return {"intents": intents, "tasks": tasks}


def _dump(header: str, document: dict[str, Any]) -> bytes:
    body = yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=88)
    return (header + body).encode("utf-8")


SERVICE = """\
# A placeholder service. Both surfaces of this experiment are MCP snapshots: a host's
# calls to their tools are refused by the replay, never executed, so no operation here
# runs. A loaded experiment needs a service; this is the smallest one.
name: placeholder
description: No operation of this service runs (the surfaces are MCP snapshots).
collections:
  items:
    id_prefix: it
    fields: {name: string}
    records:
      - {id: it-001, name: placeholder}
operations:
  find_items:
    kind: search
    collection: items
    params:
      query: {type: string, required: true}
    match: {query: [name]}
"""


def _experiment_yaml(name: str, server: str, snapshot_file: str) -> str:
    return f"""\
# Written by `prereg experiment new` from {snapshot_file}: a selection experiment.
# original: the MCP server's own descriptions, as recorded.
# edited: a copy for you to edit (tool and server descriptions in the JSON); until you
# edit it, the two arms are a placebo comparison.
name: {name}
title: {json.dumps(f"Selection of {server}: own vs edited descriptions")}
description: >
  Does the host select the server's tools when a prompt needs them, and leave them alone
  when it does not, with the server's own descriptions and with the edited ones?
service: service.yaml
corpus: corpus.yaml
surfaces:
  original: snapshots/original.json
  edited: snapshots/edited.json
splits:
  seed: {SEED}
  fractions: {{{", ".join(f"{k}: {v}" for k, v in FRACTIONS.items())}}}
"""


def _draft_yaml(name: str) -> str:
    return f"""\
# Written by `prereg experiment new`: the server's own descriptions (original) against the
# edited copy (edited), on the dev split, on the local host (offline, no API key: the MCP
# snapshot is replayed and every tool call refused). Edit experiments/{name}/snapshots/edited.json
# first, then:
#   prereg register drafts/{name}.yaml
#   prereg run {name}
#   prereg analyse {name}
id: {name}
title: Own vs edited tool descriptions ({name})
hypothesis: >
  The edited descriptions change how often the host selects the server's tools.
falsification: >
  The paired bootstrap's 95% interval of edited minus original selection covers 0.
experiment: {name}
kind: exploratory
split: dev
arms:
  - {{id: original, surface: original}}
  - {{id: edited, surface: edited}}
host: {{driver: local}}
budgets: {{completion_cap: 1024, episode_tokens: 32000, call_limit: 4, turn_limit: 6}}
design: {{repeats: 2, rotations: 1, seed: {SEED}}}
outcome: selected
primary:
  test: paired_bootstrap
  compare: [original, edited]
  favours: edited
  alpha: 0.05
  sides: two-sided
  draws: 10000
secondary:
  - {{test: mcnemar_exact, compare: [original, edited], alpha: 0.05, aggregate: majority}}
"""


def new_experiment(
    ws: Workspace, name: str, snapshot_path: Path, prompts_path: Path
) -> dict[str, Any]:
    """Write ``experiments/NAME/`` and ``drafts/NAME.yaml`` (see the module docstring).

    BadInput (exit 2, nothing written): a name that is not an id, an experiment or draft
    of that name already there, a snapshot that does not load or offers no tool, a bad
    prompt row, or an experiment that does not load as ``register`` loads it.
    """
    if not NAME_PATTERN.fullmatch(name):
        raise BadInput(
            f"'{name}' is not an experiment name (lower-case letters, digits and '-', "
            "starting with a letter or digit, at most 63)",
            field="NAME",
        )
    folder = ws.experiments / name
    draft = ws.drafts / f"{name}.yaml"
    for taken in (folder, draft):
        if taken.exists() or taken.is_symlink():
            raise BadInput(f"{taken} exists: choose another name", field="NAME")
    raw = read_input(snapshot_path, limit=MAX_PROMPTS_BYTES * 4, what="an MCP snapshot")
    snapshot = load_snapshot_bytes(raw, str(snapshot_path))
    surface = snapshot_surface("original", str(snapshot_path), snapshot)
    tools = [tool.name for tool in surface.tools]
    rows = read_prompts(prompts_path, tools)
    corpus = _corpus(prompts_path, rows)
    clusters = [(t["cluster"], t["intent"]) for t in corpus["tasks"]]
    splits = assign_by_fractions(clusters, SEED, FRACTIONS)
    counts = {s: sum(1 for t in corpus["tasks"] if splits[t["cluster"]] == s) for s in SPLIT_NAMES}
    if counts["dev"] == 0:
        raise BadInput(
            "no prompt falls in the dev split, where the draft runs: give each intent "
            "two or more clusters (a row without a cluster is a cluster of its own)",
            file=str(prompts_path),
        )
    ws.experiments.mkdir(parents=True, exist_ok=True)
    ws.drafts.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=ws.experiments))
    try:
        (staging / "snapshots").mkdir()
        for sid in SURFACES:
            data = raw if sid == "original" else _main_recording(raw)
            write_atomic(staging / "snapshots" / f"{sid}.json", data, what="a snapshot copy")
        header = f"# Written by `prereg experiment new` from {prompts_path.name}.\n"
        write_atomic(staging / "corpus.yaml", _dump(header, corpus), what="the corpus")
        write_atomic(staging / "service.yaml", SERVICE.encode(), what="the service")
        experiment_text = _experiment_yaml(name, surface.name, snapshot_path.name)
        write_atomic(staging / "experiment.yaml", experiment_text.encode(), what="experiment")
        loaded = load_experiment(folder_reader(staging), name)
        staging.rename(folder)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    write_atomic(draft, _draft_yaml(name).encode(), what="the draft")
    return {
        "experiment": name,
        "folder": str(folder),
        "draft": str(draft),
        "server": surface.name,
        "tools": tools,
        "surfaces": {sid: f"snapshots/{sid}.json" for sid in SURFACES},
        "tasks": len(loaded.tasks),
        "intents": sorted(loaded.intents),
        "tasks_per_split": {s: len(loaded.tasks_in_split(s)) for s in loaded.split_names},
        "next": [
            f"edit {folder / 'snapshots' / 'edited.json'}",
            f"prereg register {draft}",
            f"prereg run {name}",
            f"prereg analyse {name}",
        ],
    }


def experiment_summary(ws: Workspace, name: str) -> dict[str, Any]:
    """One workspace experiment for ``prereg list --experiments``: its surfaces (id and
    file, pool members with their role) and task counts per split; a folder that does not
    load is listed with its problem instead."""
    try:
        loaded = load_experiment(folder_reader(ws.experiments / name), name)
    except BadInput as exc:
        return {"experiment": name, "problem": exc.render()}
    pool = {member.id: member.role for member in loaded.pool}
    return {
        "experiment": name,
        "title": loaded.title,
        "surfaces": [
            {
                "id": sid,
                "file": surface.file,
                "role": pool.get(sid, "surface"),
                "source": surface.source,
                "tools": len(surface.tools),
            }
            for sid, surface in loaded.surfaces.items()
        ],
        "tasks": len(loaded.tasks),
        "tasks_per_split": {s: len(loaded.tasks_in_split(s)) for s in loaded.split_names},
    }


def list_experiments(ws: Workspace) -> list[dict[str, Any]]:
    """Every experiment folder of the workspace (a folder holding ``experiment.yaml``)."""
    if not ws.experiments.is_dir():
        return []
    names = sorted(
        p.name
        for p in ws.experiments.iterdir()
        if not p.name.startswith(".") and (p / "experiment.yaml").is_file()
    )
    return [experiment_summary(ws, name) for name in names]


def _main_recording(raw: bytes) -> bytes:
    """The snapshot without the revisions recorded apart (``server.revisions``): the
    edited copy's descriptions are edited in the main recording, and a client that
    negotiated another recorded revision would be served that revision's own, unedited
    descriptions (docs/mcp.md). A snapshot without them is kept byte for byte."""
    document = json.loads(raw)
    if not document.get("server", {}).get("revisions"):
        return raw
    del document["server"]["revisions"]
    return (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode()
