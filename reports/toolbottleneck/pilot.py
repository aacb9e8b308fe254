"""Table 13 of ToolBottleneckBench's development pilot and its trace selector (seed
appendix J), from the pilot's records (:mod:`prereg.runners.toolbottleneck.pilot`).

- **Success** of each action per block, pooled and by stratum (the incumbent, the
  seed's two columns of models), with counts; **after a failed probe**: the share of
  blocks whose probe failed that the action recovers, and *retain-then-act* (keep a
  successful probe, run the action only after a failed one) over every block.
- **Cost**: the simulated policy has no prices, so the table gives mean tokens (the
  mechanism's own units) per block with the probe charged and without, and mean calls
  (reading P5); never dollars.
- **The trace selector** (reading P1): a depth-one tree (a stump) over the probe's public
  numeric features, choosing an action among the probe's own outcome ("retain") and the
  available restarts. On its training blocks it takes the feature and threshold (a
  midpoint between adjacent distinct values) whose two leaves, each choosing the action
  with the most successes in the leaf, give the most successes in all; a split is kept
  only when it beats the best single action. A leaf's tie on successes goes to the
  action with the fewest tokens on its training blocks, then the earlier action (retain
  first); a tie between rules to the constant rule, then the earlier feature and the
  lower threshold. It is
  fitted with each intent held out: the blocks of an intent get the choice of the stump
  fitted on the other intents' blocks; with one intent it is withheld.
- **The oracle** chooses, per block, the cheapest (fewest tokens, then the earlier
  action) action that succeeded, and none when none did: the ceiling of any selector.

The numbers of a simulated pilot describe the simulated policy, never a model.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from prereg.core.files import write_atomic
from prereg.core.output import dumps
from prereg.reports.render.markdown import table
from prereg.reports.toolbottleneck.capsweep import estimate_of, family_resample
from prereg.reports.toolbottleneck.study import check_out
from prereg.runners.toolbottleneck.pilot import ACTIONS, FEATURES, LABELS, PilotRecord, PilotRun
from prereg.stats.bootstrap import FEW_CLUSTERS

RETAIN = "probe"


@dataclass(frozen=True)
class Stump:
    """A depth-one rule: ``feature <= threshold`` -> ``left``, else ``right``; with
    ``feature`` None every block gets ``left``."""

    feature: str | None
    threshold: float | None
    left: str
    right: str

    def choose(self, features: Mapping[str, float]) -> str:
        if self.feature is None or self.threshold is None:
            return self.left
        return self.left if features[self.feature] <= self.threshold else self.right

    def text(self) -> str:
        if self.feature is None:
            return f"always {self.left}"
        return f"{self.feature} <= {self.threshold:g} -> {self.left}, else {self.right}"


def _best(successes: npt.NDArray[np.float64], cost: npt.NDArray[np.float64]) -> int:
    """The action with the most successes, then the least cost, then the earliest."""
    order = np.lexsort((np.arange(successes.size), cost, -successes))
    return int(order[0])


def fit_stump(
    x: npt.NDArray[np.float64],
    y: npt.NDArray[np.float64],
    cost: npt.NDArray[np.float64],
    features: Sequence[str],
    actions: Sequence[str],
) -> Stump:
    """The stump of the module docstring: ``x`` blocks x features, ``y`` blocks x
    actions (1 success, 0 failure), ``cost`` blocks x actions (tokens; a leaf's ties on
    successes go to the action with the least summed cost, then the earlier one)."""
    const = _best(y.sum(axis=0), cost.sum(axis=0))
    best = (float(y[:, const].sum()), Stump(None, None, actions[const], actions[const]))
    for j, name in enumerate(features):
        values = np.unique(x[:, j])
        for t in (values[:-1] + values[1:]) / 2:
            left = x[:, j] <= t
            sl, sr = y[left].sum(axis=0), y[~left].sum(axis=0)
            score = float(sl.max() + sr.max())
            if score > best[0]:
                a = _best(sl, cost[left].sum(axis=0))
                b = _best(sr, cost[~left].sum(axis=0))
                best = (score, Stump(name, float(t), actions[a], actions[b]))
    return best[1]


@dataclass(frozen=True)
class Block:
    block: str
    incumbent: str
    intent: str
    features: dict[str, float]
    success: dict[str, bool]  # available actions
    tokens: dict[str, int]
    calls: dict[str, int]


def blocks(records: Sequence[PilotRecord]) -> list[Block]:
    """The records grouped by block, in order."""
    grouped: dict[str, list[PilotRecord]] = defaultdict(list)
    for r in records:
        grouped[r.block].append(r)
    out = []
    for name, rs in grouped.items():
        probe = next(r for r in rs if r.action == RETAIN)
        ok = [r for r in rs if r.available]
        out.append(
            Block(
                name,
                probe.incumbent,
                probe.intent,
                dict(probe.features or {}),
                {r.action: bool(r.success) for r in ok},
                {r.action: int(r.tokens or 0) for r in ok},
                {r.action: int(r.calls or 0) for r in ok},
            )
        )
    return out


def available_actions(records: Sequence[PilotRecord]) -> list[str]:
    present = {r.action for r in records if r.available}
    return [a for a in ACTIONS if a in present]


@dataclass(frozen=True)
class Selection:
    choices: dict[str, str] | None  # block -> action; None: withheld
    rules: dict[str, str]  # held-out intent -> the rule fitted without it
    reason: str | None


def select_loio(bs: Sequence[Block], actions: Sequence[str]) -> Selection:
    """The trace selector fitted with each intent held out (module docstring)."""
    intents = sorted({b.intent for b in bs})
    if len(intents) < 2:
        return Selection(None, {}, "withheld: one intent, nothing to fit on with it held out")
    x = np.array([[b.features[f] for f in FEATURES] for b in bs], dtype=float)
    y = np.array([[float(b.success[a]) for a in actions] for b in bs], dtype=float)
    # the tokens an action adds to the probe (retaining the probe adds none)
    cost = np.array(
        [[0.0 if a == RETAIN else float(b.tokens[a]) for a in actions] for b in bs], dtype=float
    )
    held = np.array([b.intent for b in bs])
    choices: dict[str, str] = {}
    rules: dict[str, str] = {}
    for intent in intents:
        train = held != intent
        stump = fit_stump(x[train], y[train], cost[train], FEATURES, actions)
        rules[intent] = stump.text()
        for i in np.flatnonzero(~train):
            choices[bs[int(i)].block] = stump.choose(bs[int(i)].features)
    return Selection(choices, rules, None)


def oracle(bs: Sequence[Block], actions: Sequence[str]) -> dict[str, str | None]:
    """Per block the cheapest successful action (fewest tokens, then action order)."""
    out: dict[str, str | None] = {}
    for b in bs:
        wins = [a for a in actions if b.success[a]]
        out[b.block] = min(wins, key=lambda a: (b.tokens[a], actions.index(a))) if wins else None
    return out


def selector_minus_switch(
    bs: Sequence[Block], choices: Mapping[str, str], *, draws: int = 10_000, seed: int = 0
) -> dict[str, Any]:
    """The trace selector's success minus the fixed switch's over the blocks, with a 95%
    percentile intent-cluster bootstrap, the fitted rules held fixed (reading P6): each
    resample of intents gives (sum of the block differences) / (blocks), so the interval
    is for the pooled difference printed beside it (exact up to 11 intents, else drawn;
    withheld below the cluster floor, without spread, or when it misses its estimate)."""
    by_intent: dict[str, list[float]] = defaultdict(list)
    for b in bs:
        by_intent[b.intent].append(float(b.success[choices[b.block]]) - float(b.success["switch"]))
    intents = sorted(by_intent)
    rows = np.array([[sum(by_intent[i]), len(by_intent[i])] for i in intents], dtype=float)
    point = float(rows[:, 0].sum() / rows[:, 1].sum())
    out: dict[str, Any] = {"estimate": point, "low": None, "high": None, "intents": len(intents)}
    if len(intents) < FEW_CLUSTERS:
        out["reason"] = f"too few intents ({len(intents)} < {FEW_CLUSTERS})"
        return out
    boot = family_resample(rows, draws=draws, seed=seed)
    e = estimate_of(point, boot.means[:, 0] / boot.means[:, 1], boot.prob, len(intents))
    out |= {"low": e.low, "high": e.high, "reason": e.reason}
    return out


def _count(k: int, n: int) -> dict[str, Any]:
    return {"successes": k, "n": n, "rate": None if n == 0 else k / n}


def _mean(values: Sequence[float]) -> float | None:
    return None if not values else float(np.mean(values))


def pilot_table(
    records: Sequence[PilotRecord], *, draws: int = 10_000, seed: int = 0
) -> dict[str, Any]:
    """Table 13 as JSON: one row per action, the selector and the oracle, and the
    selector's difference from the switch (:func:`selector_minus_switch`)."""
    bs = blocks(records)
    actions = available_actions(records)
    strata = sorted({b.incumbent for b in bs})
    failed = [b for b in bs if not b.success[RETAIN]]
    sel = select_loio(bs, actions)
    orc = oracle(bs, actions)
    reasons = {r.action: r.reason for r in records if not r.available}
    rows: list[dict[str, Any]] = []

    def row(name: str, label: str, pick: Mapping[str, str | None]) -> dict[str, Any]:
        chosen = [(b, pick[b.block]) for b in bs]
        ok = [b for b, a in chosen if a is not None and b.success[a]]
        tokens = [b.tokens[a] for b, a in chosen if a is not None]
        charged = [
            b.tokens[RETAIN] + (0 if a == RETAIN else b.tokens[a])
            for b, a in chosen
            if a is not None
        ]
        calls = [b.calls[a] for b, a in chosen if a is not None]
        return {
            "action": name,
            "label": label,
            "available": True,
            "pooled": _count(len(ok), len(bs)),
            "strata": {
                s: _count(
                    sum(1 for b in ok if b.incumbent == s), sum(1 for b in bs if b.incumbent == s)
                )
                for s in strata
            },
            "mean_tokens_with_probe": _mean(charged),
            "mean_tokens_no_probe": None if name == RETAIN else _mean(tokens),
            "mean_calls": _mean(calls),
        }

    for a in ACTIONS:
        if a not in actions:
            if a in reasons:
                rows.append(
                    {"action": a, "label": LABELS[a], "available": False, "reason": reasons[a]}
                )
            continue
        r = row(a, LABELS[a], {b.block: a for b in bs})
        if a == "switch":
            profile = next((p.profile for p in records if p.action == a), None)
            r["label"] = f"{LABELS[a]} ({profile})"
        r["recovered"] = _count(sum(1 for b in failed if b.success[a]), len(failed))
        r["retain_then_act"] = _count(
            sum(1 for b in bs if b.success[RETAIN] or b.success[a]), len(bs)
        )
        if a == RETAIN:
            r["recovered"] = _count(0, len(failed))
        r["selector_chose"] = (
            None if sel.choices is None else sum(1 for c in sel.choices.values() if c == a)
        )
        r["oracle_chose"] = sum(1 for c in orc.values() if c == a)
        rows.append(r)
    if sel.choices is None:
        selector: dict[str, Any] = {
            "action": "selector",
            "label": "Trace selector (LOIO)",
            "available": False,
            "reason": sel.reason,
        }
    else:
        selector = row("selector", "Trace selector (LOIO)", dict(sel.choices))
    oracle_row = row("oracle", "Oracle (cheapest success)", orc)
    oracle_row["pooled"] = _count(sum(1 for c in orc.values() if c is not None), len(bs))
    oracle_row["strata"] = {
        s: _count(
            sum(1 for b in bs if b.incumbent == s and orc[b.block] is not None),
            sum(1 for b in bs if b.incumbent == s),
        )
        for s in strata
    }
    versus = (
        None
        if sel.choices is None or "switch" not in actions
        else selector_minus_switch(bs, sel.choices, draws=draws, seed=seed)
    )
    return {
        "blocks": len(bs),
        "failed_probes": len(failed),
        "selector_minus_switch": versus,
        "strata": strata,
        "actions": actions,
        "rows": [*rows, selector, oracle_row],
        "selector_rules": sel.rules,
        "features": list(FEATURES),
    }


def _cell(c: Mapping[str, Any] | None) -> str:
    if c is None:
        return ""
    if c["n"] == 0:
        return "- (0/0)"
    return f"{100 * c['rate']:.1f} ({c['successes']}/{c['n']})"


def _num(x: float | None) -> str:
    return "" if x is None else f"{x:,.0f}"


def _calls(x: float | None) -> str:
    return "" if x is None else f"{x:.2f}"


def table_rows(
    data: Mapping[str, Any], *, unavailable: bool = True
) -> tuple[list[str], list[list[str]]]:
    """Table 13's header and rows as text (unavailable rows give their reason; left out
    with ``unavailable`` False, for :func:`unavailable_lines`)."""
    strata = list(data["strata"])
    header = [
        "action or policy",
        "pooled",
        *strata,
        "recovered",
        "retain-then-act",
        "tokens with probe",
        "tokens no probe",
        "calls",
        "selector chose",
        "oracle chose",
    ]
    out = []
    for r in data["rows"]:
        if not r["available"]:
            if not unavailable:
                continue
            out.append([r["label"], r["reason"], *[""] * (len(header) - 2)])
            continue
        chose = r.get("selector_chose")
        out.append(
            [
                r["label"],
                _cell(r["pooled"]),
                *[_cell(r["strata"][s]) for s in strata],
                _cell(r.get("recovered")),
                _cell(r.get("retain_then_act")),
                _num(r["mean_tokens_with_probe"]),
                _num(r["mean_tokens_no_probe"]),
                _calls(r["mean_calls"]),
                "" if chose is None else str(chose),
                "" if "oracle_chose" not in r else str(r["oracle_chose"]),
            ]
        )
    return header, out


def versus_line(data: Mapping[str, Any]) -> str:
    """The selector's difference from the switch as one sentence."""
    v = data.get("selector_minus_switch")
    if v is None:
        return "Trace selector minus fixed switch: not computed (no selector or no switch)."
    head = f"Trace selector minus fixed switch: {100 * v['estimate'] + 0.0:+.1f} pp"
    if v["low"] is None or v["high"] is None:
        return f"{head} over {v['intents']} intents; {v['reason']}: no interval."
    return (
        f"{head} [{100 * v['low'] + 0.0:+.1f}, {100 * v['high'] + 0.0:+.1f}] (95% percentile "
        f"bootstrap over {v['intents']} intent clusters, the fitted rules held fixed)."
    )


def unavailable_lines(data: Mapping[str, Any]) -> list[str]:
    """One line per row the pilot could not run, with its reason."""
    return [f"{r['label']}: {r['reason']}" for r in data["rows"] if not r["available"]]


NOTE = (
    "Success, % (successes/blocks), pooled and by incumbent; recovered: among blocks whose "
    "probe failed; retain-then-act: a successful probe kept, the action run after a failed "
    "one. Tokens: mean per block in the simulated policy's own units (no prices: the "
    "seed's USD columns), with the probe charged and without; calls: mean per block. The "
    "trace selector is a depth-one tree over the probe's public numeric features, fitted "
    "with each intent held out (LOIO); the oracle takes the cheapest action that "
    "succeeded. Simulated policy: these numbers describe a mechanism, not a model."
)


def pilot_markdown(data: Mapping[str, Any], *, study: str, digest: str) -> str:
    """The pilot report as Markdown (every cell escaped)."""
    header, rows = table_rows(data)
    lines = [
        f"# Development pilot of study {study}",
        "",
        "Simulated policy (prereg.runners.toolbottleneck.host): these numbers describe a "
        "documented mechanism with seeded error rates, not a model.",
        "",
        f"Pilot digest: `{digest}`; {data['blocks']} blocks, "
        f"{data['failed_probes']} failed probes.",
        "",
        "## Actions and policies (seed Table 13)",
        "",
        *table(header, rows),
        "",
        NOTE,
        "",
        versus_line(data),
        "",
        "## The trace selector's rules (each fitted without the intent it serves)",
        "",
        *table(
            ["held-out intent", "rule"],
            [[k, v] for k, v in data["selector_rules"].items()],
        ),
        "",
        "Features: " + ", ".join(data["features"]) + ".",
    ]
    return "\n".join(lines)


def pilot_report(run: PilotRun, *, draws: int = 10_000) -> dict[str, Any]:
    """report.json's document."""
    return {
        "format": "prereg-toolbottleneck-pilot-report/1",
        "study": run.records[0].study if run.records else None,
        "digest": run.digest,
        "incumbents": list(run.incumbents),
        "switch": run.switch,
        "evidence_class": "simulated",
        "table13": pilot_table(run.records, draws=draws),
    }


def write_pilot(out: Path, run: PilotRun, *, draws: int = 10_000) -> list[Path]:
    """``out/records.jsonl``, ``out/report.json`` and ``out/report.md``; the paths."""
    check_out(out)
    records = out / "records.jsonl"
    lines = "".join(
        json.dumps(r.model_dump(mode="json"), sort_keys=True) + "\n" for r in run.records
    )
    write_atomic(records, lines.encode(), what="the pilot records")
    report = pilot_report(run, draws=draws)
    write_atomic(out / "report.json", (dumps(report) + "\n").encode(), what="the pilot report")
    text = pilot_markdown(report["table13"], study=str(report["study"]), digest=run.digest)
    write_atomic(out / "report.md", (text + "\n").encode(), what="the pilot report")
    return [records, out / "report.json", out / "report.md"]


def load_pilot_records(path: Path) -> list[PilotRecord]:
    """A pilot's records.jsonl (for tests and re-analysis)."""
    text = path.read_text(encoding="utf-8")
    return [PilotRecord.model_validate_json(line) for line in text.splitlines() if line]
