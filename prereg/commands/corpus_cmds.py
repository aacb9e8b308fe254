"""``prereg corpus lint`` and ``prereg corpus eligibility`` (wiring only; the rules are
prereg.experiments.corpus_lint and prereg.experiments.eligibility, the record
prereg.registry.eligibility)."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from prereg.commands._common import FlagHelpGroup, JsonOpt, complete_experiment, workspace
from prereg.commands._experiment import workspace_experiment
from prereg.core.errors import BadInput
from prereg.core.output import console, emit
from prereg.core.untrusted import display
from prereg.experiments import Experiment
from prereg.experiments.corpus_lint import lint
from prereg.experiments.eligibility import FAKE_JUDGES, Decision, PairProposal, propose
from prereg.registry.audit_log import AuditLog
from prereg.registry.eligibility import (
    current,
    log_path,
    parse_pair,
    record_decisions,
    record_proposal,
)
from prereg.runners.judging.eligibility import Family, ask_family, parse_family
from prereg.runners.providers.spend import SpendMeter

corpus_app = typer.Typer(
    help="Corpus hygiene: near-duplicates, realism, brand names, canaries, tool-text guardrails.",
    no_args_is_help=True,
    cls=FlagHelpGroup,
)


@corpus_app.command("lint")
def lint_cmd(
    ctx: typer.Context,
    experiment: Annotated[
        str, typer.Argument(help="Experiment folder name.", autocompletion=complete_experiment)
    ],
    strict: Annotated[
        bool, typer.Option("--strict", help="Exit 1 when there is any finding.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Lint an experiment's corpus and tool text; findings are listed (exit 0, or 1 with
    --strict).

    Near-duplicate prompts within and across splits and intents (threshold
    ``corpus_lint.near_duplicate`` in experiment.yaml, default 0.55), prompts that refer
    to context the harness never supplies, declared brand names and canary strings, and
    the description guardrail on every surface's server and tool text
    (docs/experiments.md, "Corpus lint"). A confirmatory ``register`` refuses an
    experiment with findings its registration does not waive.
    """
    loaded = workspace_experiment(workspace(ctx), experiment)
    result = lint(loaded)
    data = result.to_json()

    def human() -> None:
        for f in result.findings:
            console.print(
                Text.assemble(
                    ("finding", "yellow"),
                    " ",
                    display(f.rule, "bold"),
                    display(f" {f.where()}"),
                    display(f" ({f.field})" if f.field else ""),
                    display(f": {f.message}: "),
                    display(repr(f.matched)),
                )
            )
        for family, why in result.skipped.items():
            console.print(display(f"skipped {family}: {why}", "dim"))
        summary = ", ".join(f"{rule} {n}" for rule, n in data["counts"].items())
        console.print(
            display(
                f"{result.experiment}: {len(result.findings)} finding(s)"
                + (f" ({summary})" if summary else "")
            )
        )

    emit(data, as_json, human)
    if strict and result.findings:
        raise typer.Exit(1)


DEFAULT_FAMILIES = ",".join(FAKE_JUDGES)


def _families(text: str) -> list[str] | list[Family]:
    """The two families of ``--families``: both offline fakes or both provider families
    ``DRIVER:MODEL`` of different drivers (``openai-chat`` may serve both with different
    models); exit 2 naming the option otherwise."""
    chosen = [f.strip() for f in text.split(",") if f.strip()]
    if len(chosen) != 2 or chosen[0] == chosen[1]:
        raise BadInput(f"--families needs two different families, got {text!r}", field="--families")
    if all(f in FAKE_JUDGES for f in chosen):
        return chosen
    providers = [parse_family(f) for f in chosen]
    unknown = [
        f for f, p in zip(chosen, providers, strict=True) if p is None and f not in FAKE_JUDGES
    ]
    if unknown:
        raise BadInput(
            f"unknown family {', '.join(unknown)} (offline: {DEFAULT_FAMILIES}; or a provider "
            "family DRIVER:MODEL with driver anthropic, openai or openai-chat)",
            field="--families",
        )
    a, b = providers
    if a is None or b is None:
        raise BadInput(
            "--families mixes an offline fake with a provider family: give two of either",
            field="--families",
        )
    if a.driver == b.driver and a.driver != "openai-chat":
        raise BadInput(
            f"--families names one provider twice ({a.driver}): the two families must differ",
            field="--families",
        )
    return [a, b]


@corpus_app.command("eligibility")
def eligibility_cmd(
    ctx: typer.Context,
    experiment: Annotated[
        str, typer.Argument(help="Experiment folder name.", autocompletion=complete_experiment)
    ],
    propose_: Annotated[
        bool,
        typer.Option(
            "--propose",
            help="Judge every (intent, competitor) with both families and record the proposal.",
        ),
    ] = False,
    families: Annotated[
        str,
        typer.Option(
            "--families",
            metavar="A,B",
            help="The two judging families (with --propose): the offline deterministic fakes "
            f"{DEFAULT_FAMILIES}, or two provider families DRIVER:MODEL (keys from the "
            "providers' usual variables).",
        ),
    ] = DEFAULT_FAMILIES,
    accept: Annotated[
        list[str] | None,
        typer.Option(
            "--accept", metavar="INTENT:COMPETITOR", help="Record: eligible (repeatable)."
        ),
    ] = None,
    reject: Annotated[
        list[str] | None,
        typer.Option(
            "--reject", metavar="INTENT:COMPETITOR", help="Record: not eligible (repeatable)."
        ),
    ] = None,
    reason: Annotated[
        str | None, typer.Option("--reason", help="Why (required with --accept/--reject).")
    ] = None,
    spend_usd: Annotated[
        float | None,
        typer.Option(
            "--spend-usd",
            min=0,
            help="Spend cap for provider families (required with anthropic or openai).",
        ),
    ] = None,
    as_yaml: Annotated[
        bool,
        typer.Option("--yaml", help="Print only the corpus.yaml 'eligible:' block to paste."),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Propose per-intent eligible sets (InvokeRank 3.4), record a person's decisions, show
    the record.

    With --propose, two families judge every (intent, competitor) of the pool, each with
    a quote that must occur verbatim in the competitor's pinned tool text; a pair is
    eligible when both say yes with valid quotes, and a disagreement or an invalid answer
    is flagged for review. Families: the offline deterministic fakes (the default), or two
    provider families DRIVER:MODEL (one request per pair each, under --spend-usd).
    --accept/--reject INTENT:COMPETITOR --reason TEXT record a decision. Everything is
    appended to registry/eligibility/EXPERIMENT.jsonl (hash-chained; never edited).
    Without options: the record as it stands and the 'eligible:' block for corpus.yaml,
    which this command never edits (docs/invokerank.md, "Neutral eligibility proposals").
    """
    ws = workspace(ctx)
    loaded = workspace_experiment(ws, experiment)
    decisions: list[tuple[Decision, str, str]] = [
        ("accept", *parse_pair(p, "--accept")) for p in accept or []
    ] + [("reject", *parse_pair(p, "--reject")) for p in reject or []]
    if propose_ and decisions:
        raise BadInput("--propose and --accept/--reject are separate steps", field="--propose")
    if reason is not None and not decisions:
        raise BadInput("--reason goes with --accept or --reject", field="--reason")
    chosen = _families(families)
    if propose_ and not any(m.role == "competitor" for m in loaded.pool):
        raise BadInput(
            f"experiment '{experiment}' has no competitors in its pool: nothing to judge",
            field="pool",
        )
    log = AuditLog(log_path(ws.registry, loaded.name))
    written: list[dict[str, Any]] = []
    if propose_:
        pairs, meta = _judged(loaded, chosen, spend_usd)
        written = [record_proposal(log, loaded, pairs, meta)]
    elif decisions:
        written = record_decisions(log, loaded, decisions, reason or "")
    now = current(log, loaded)
    data = {
        "experiment": loaded.name,
        "record": ws.relative(log.path),
        "written": [{"seq": w["seq"], "event": w["event"]} for w in written],
        **now.to_json(),
    }

    if as_yaml and not as_json:
        _print_record(data, as_yaml=True)
        return
    emit(data, as_json, lambda: _print_record(data, as_yaml=False))


def _judged(
    loaded: Experiment, chosen: list[str] | list[Family], spend_usd: float | None
) -> tuple[list[PairProposal], dict[str, dict[str, Any]]]:
    """Both families' judgements combined, and what the record says of each family."""
    fakes = [f for f in chosen if isinstance(f, str)]
    if fakes:
        judges = {f: FAKE_JUDGES[f] for f in fakes}
        return propose(loaded, judges), {f: {"kind": "offline-fake", "model": None} for f in fakes}
    providers = [f for f in chosen if isinstance(f, Family)]
    if spend_usd is None and any(f.driver != "openai-chat" for f in providers):
        raise BadInput("provider families need a spend cap: --spend-usd USD", field="--spend-usd")
    spend = SpendMeter(spend_usd)
    asked = [ask_family(loaded, f, spend) for f in providers]
    pairs = propose(
        loaded,
        {a.family.name: a.judge() for a in asked},
        {a.family.name: ",".join(sorted(a.models)) or a.family.model for a in asked},
    )
    return pairs, {a.family.name: a.to_json() for a in asked}


def _print_record(data: dict[str, Any], as_yaml: bool) -> None:
    """The record for a person: the pairs, the answers to review, the YAML block."""
    if as_yaml:
        _print_lines(data["yaml"] or "# no intent has a proposed set yet")
        return
    if data["proposal"] is None:
        console.print(display(f"{data['experiment']}: no eligibility proposal yet (--propose)"))
        return
    table = Table(
        title=display(f"{data['experiment']}: eligibility (proposal {data['proposal']['seq']})")
    )
    for col in ("intent", "competitor", "agreement", "decision", "eligible"):
        table.add_column(col)
    for p in data["pairs"]:
        decided = f"{p['decision']}: {p['reason']}" if p["decision"] else ""
        table.add_row(
            display(p["intent"]),
            display(p["competitor"]),
            display(p["status"] + (" (stale)" if p["stale"] else "")),
            display(decided or ("review" if p["needs_review"] else "")),
            "yes" if p["eligible"] else "no",
        )
    console.print(table)
    for pair in data["pairs"]:
        if pair["needs_review"]:
            for family, a in pair["answers"].items():
                console.print(
                    display(
                        f"  {pair['intent']}:{pair['competitor']} {family}: {a['answer']}"
                        + (f" ({a['reason']})" if a["reason"] else "")
                        + (f" quote {a['quote']!r}" if a["quote"] else "")
                    )
                )
    if data["needs_review"]:
        console.print(display(f"needs review: {', '.join(data['needs_review'])}", "yellow"))
    if data["stale"]:
        console.print(
            display(
                f"stale (surface changed since the proposal): {', '.join(data['stale'])}",
                "yellow",
            )
        )
    _print_lines(data["yaml"] or "no intent has a proposed set yet")


def _print_lines(text: str) -> None:
    for line in text.splitlines():
        console.print(display(line), soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add this group's commands to the app."""
    app.add_typer(corpus_app, name="corpus")
