"""The failure census of ToolBottleneckBench (seed 001, sections 5.2, 5.3, appendix D, H).

Pure functions over run records (anything with the attributes of :class:`CensusRow`:
a :class:`prereg.runners.record.RunRecord`, or a ToolBottleneckBench episode row):

- **census**: failures by terminal flag, in the seed's precedence, with the share of
  failures a harness limit ended (with and without infeasibility stops; seed 5.3);
- **obligation x flag**: the failure record's two parts crossed;
- **truncation**: the share of episodes cut at the completion cap, and how many of
  those were cut before the first call (seed 5.2);
- **sentinel repeats**: for units run k > 1 times, pass@1 (mean success over runs),
  all-k, any-run and the disagreement share (any-run minus all-k; appendix H);
- **truncation stratum**: for two arms paired on (task, repeat), the paired effect,
  the principal-stratum effect over pairs neither arm truncated, and the worst-case
  bounds of appendix D (each truncated failure may resolve either way, the arms
  independently; or, with both arms truncated, alike).

Reading (documented in docs/toolbottleneck.md): the census counts graded episodes
(status ``ok``) and the units the registered policy counts as failures (a row with
``counted_failure`` set: ``harness: {infrastructure: count_as_failure}``, built by
:mod:`prereg.reports.toolbottleneck.episodes`), the latter as failures of their own class
``infrastructure`` (never a harness limit, never truncated); every other infrastructure
failure is counted apart (``infra``) and never given a flag.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from prereg.reports.render.markdown import table
from prereg.runners.toolbottleneck.host import Contract, turn_limit_reachable

#: Terminal flags in the seed's precedence (section 3.4); (ii) is two flags.
FLAGS: tuple[str, ...] = (
    "completion_cap",
    "episode_budget",
    "call_limit",
    "turn_limit",
    "infeasible",
    "wrong_conclusion",
    "contract_break",
)
HARNESS_LIMITS = frozenset(FLAGS[:5])
#: The failure class (terminal flag and first unmet obligation) of a unit counted as a
#: failure under count_as_failure (:mod:`prereg.reports.toolbottleneck.episodes`).
INFRASTRUCTURE = "infrastructure"
TableData = tuple[str, list[str], list[list[Any]]]
#: The census's turn_limit column where the harness cannot reach it (reading F3).
TURN_LIMIT_UNREACHABLE = "turn_limit (structurally unreachable)"


class CensusRow(Protocol):
    """What the census reads of a run record."""

    @property
    def arm(self) -> str: ...
    @property
    def task_id(self) -> str: ...
    @property
    def repeat(self) -> int: ...
    @property
    def status(self) -> str: ...
    @property
    def success(self) -> bool | None: ...
    @property
    def terminal_flag(self) -> str | None: ...
    @property
    def first_unmet_obligation(self) -> str | None: ...
    @property
    def calls(self) -> int: ...


def scored(r: CensusRow) -> bool:
    """Whether the census counts the row: a graded episode (status ok) or a unit the
    registered policy counts as a failure (``counted_failure``)."""
    return r.status == "ok" or bool(getattr(r, "counted_failure", False))


@dataclass(frozen=True)
class Census:
    episodes: int  # graded (status ok) and counted as failures (count_as_failure)
    failures: int  # including the counted infrastructure failures
    infra: int  # infrastructure failures left out, apart
    flags: Mapping[str, int]  # every flag of FLAGS, in order (0 when absent)
    counted: int = 0  # units counted as failures of class "infrastructure"

    def share(self, flag: str) -> float | None:
        if not self.failures:
            return None
        if flag == INFRASTRUCTURE:
            return self.counted / self.failures
        return self.flags.get(flag, 0) / self.failures

    @property
    def harness_limit_share(self) -> float | None:
        """Share of failures a harness limit ended (cap, budget, calls, turns, infeasible)."""
        if not self.failures:
            return None
        return sum(self.flags[f] for f in HARNESS_LIMITS) / self.failures

    @property
    def harness_limit_share_without_infeasible(self) -> float | None:
        if not self.failures:
            return None
        return sum(self.flags[f] for f in HARNESS_LIMITS - {"infeasible"}) / self.failures


def census(rows: Iterable[CensusRow]) -> Census:
    graded = failures = infra = counted = 0
    flags: Counter[str] = Counter()
    for r in rows:
        if not scored(r):
            infra += 1
            continue
        graded += 1
        if r.status != "ok":  # counted as a failure: its own class, no terminal flag
            failures += 1
            counted += 1
        elif r.success is False:
            failures += 1
            flags[r.terminal_flag or "contract_break"] += 1
    ordered = {f: flags.get(f, 0) for f in FLAGS}
    return Census(graded, failures, infra, ordered, counted)


def census_by_arm(rows: Iterable[CensusRow]) -> dict[str, Census]:
    groups: dict[str, list[CensusRow]] = defaultdict(list)
    for r in rows:
        groups[r.arm].append(r)
    return {arm: census(groups[arm]) for arm in sorted(groups)}


def obligation_by_flag(rows: Iterable[CensusRow]) -> dict[tuple[str, str], int]:
    """(first unmet obligation, terminal flag) -> failed graded episodes."""
    out: Counter[tuple[str, str]] = Counter()
    for r in rows:
        if scored(r) and r.success is False:
            out[(r.first_unmet_obligation or "?", r.terminal_flag or "contract_break")] += 1
    return dict(out)


@dataclass(frozen=True)
class Truncation:
    episodes: int
    truncated: int
    before_first_call: int

    @property
    def rate(self) -> float | None:
        return None if not self.episodes else self.truncated / self.episodes


def truncation(rows: Iterable[CensusRow]) -> Truncation:
    graded = [r for r in rows if scored(r)]
    cut = [r for r in graded if r.terminal_flag == "completion_cap"]
    return Truncation(len(graded), len(cut), sum(1 for r in cut if r.calls == 0))


@dataclass(frozen=True)
class Repeats:
    """Sentinel repeats: units (arm, task) run more than once."""

    units: int
    runs: int
    pass_at_1: float | None
    all_runs: float | None
    any_run: float | None

    @property
    def disagreement(self) -> float | None:
        if self.all_runs is None or self.any_run is None:
            return None
        return self.any_run - self.all_runs


def sentinel_repeats(rows: Iterable[CensusRow]) -> Repeats:
    """Over (arm, task) units with at least two graded runs."""
    groups: dict[tuple[str, str], list[bool]] = defaultdict(list)
    for r in rows:
        if scored(r) and r.success is not None:
            groups[(r.arm, r.task_id)].append(bool(r.success))
    units = [g for g in groups.values() if len(g) >= 2]
    if not units:
        return Repeats(0, 0, None, None, None)
    runs = [s for g in units for s in g]
    n = len(units)
    return Repeats(
        units=n,
        runs=len(runs),
        pass_at_1=sum(runs) / len(runs),
        all_runs=sum(all(g) for g in units) / n,
        any_run=sum(any(g) for g in units) / n,
    )


@dataclass(frozen=True)
class Stratum:
    """Two arms paired on (task, repeat): the effect (stressed minus base) and its
    truncation decomposition (seed 5.2 and appendix D, "Truncation bounds")."""

    pairs: int
    effect: float | None
    losses: int
    gains: int
    losses_truncated: int  # lost pairs whose stressed episode was cut at the cap
    untruncated_pairs: int
    stratum_effect: float | None  # over pairs neither arm truncated
    bounds: tuple[float, float] | None  # each arm's truncated failures resolve independently
    bounds_alike: tuple[float, float] | None  # pairs truncated in both arms resolve alike


def _pairs(
    rows: Iterable[CensusRow], base: str, stressed: str
) -> list[tuple[CensusRow, CensusRow]]:
    by: dict[tuple[str, str, int], CensusRow] = {}
    for r in rows:
        if r.arm in (base, stressed) and scored(r) and r.success is not None:
            by[(r.arm, r.task_id, r.repeat)] = r
    keys = sorted(
        {(t, k) for a, t, k in by if a == base} & {(t, k) for a, t, k in by if a == stressed}
    )
    return [(by[(base, t, k)], by[(stressed, t, k)]) for t, k in keys]


def _cut(r: CensusRow) -> bool:
    return r.terminal_flag == "completion_cap"


def truncation_stratum(rows: Iterable[CensusRow], base: str, stressed: str) -> Stratum:
    pairs = _pairs(rows, base, stressed)
    n = len(pairs)
    if not n:
        return Stratum(0, None, 0, 0, 0, 0, None, None, None)
    y0 = [int(bool(a.success)) for a, _ in pairs]
    y1 = [int(bool(b.success)) for _, b in pairs]
    t0 = [_cut(a) for a, _ in pairs]
    t1 = [_cut(b) for _, b in pairs]
    losses = sum(1 for a, b in zip(y0, y1, strict=True) if a and not b)
    gains = sum(1 for a, b in zip(y0, y1, strict=True) if b and not a)
    lost_cut = sum(1 for i in range(n) if y0[i] and not y1[i] and t1[i])
    keep = [i for i in range(n) if not t0[i] and not t1[i]]
    stratum = None if not keep else sum(y1[i] - y0[i] for i in keep) / len(keep)
    # independent: base's truncated failures all succeed and stressed's all fail (lower),
    # and the reverse (upper); a truncated episode always failed, so y is 0 there
    lower = sum(y1[i] - (1 if t0[i] else y0[i]) for i in range(n)) / n
    upper = sum((1 if t1[i] else y1[i]) - y0[i] for i in range(n)) / n
    both = [t0[i] and t1[i] for i in range(n)]
    lower_alike = sum(0 if both[i] else y1[i] - (1 if t0[i] else y0[i]) for i in range(n)) / n
    upper_alike = sum(0 if both[i] else (1 if t1[i] else y1[i]) - y0[i] for i in range(n)) / n
    return Stratum(
        pairs=n,
        effect=(sum(y1) - sum(y0)) / n,
        losses=losses,
        gains=gains,
        losses_truncated=lost_cut,
        untruncated_pairs=len(keep),
        stratum_effect=stratum,
        bounds=(lower, upper),
        bounds_alike=(lower_alike, upper_alike),
    )


# ---- tables -----------------------------------------------------------------------------


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _pp(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:+.1f} pp"


def census_tables(
    rows: Sequence[CensusRow],
    pairs: Sequence[tuple[str, str]] = (),
    *,
    infrastructure: str | None = None,
    contract: Contract | None = None,
    contracts: Mapping[str, str] | None = None,
) -> list[TableData]:
    """The census as (title, header, rows) tables; ``pairs`` are (base, stressed) arms for
    the truncation stratum table.

    ``infrastructure``: the registered policy (``harness.infrastructure``) the rows were
    built under, or None (a study run, which has no infrastructure failures: the tables as
    before). ``count_as_failure`` adds the failure class ``infrastructure`` (the units
    counted as failures, in ``episodes`` and ``failures``) to the census and to the
    obligation x flag table; either policy adds the infra_error records left out
    (``infra``), so the table says what it did not count.

    ``contract``: the harness the rows ran under; when its turn limit can never end an
    episode (:func:`prereg.runners.toolbottleneck.host.turn_limit_reachable`, reading F3)
    the ``turn_limit`` column of both tables is labelled structurally unreachable, so its
    zeros are not read as a finding about the policy or the model.

    The census's label, its last table (:data:`CONTRACT_TITLE`; last, so the census
    tables keep their places): ``contracts`` (arm -> its contract in words,
    :func:`contract_label`; a registered study's arms may differ), else ``contract`` for
    every arm (a study run's one contract); neither: no label."""
    out: list[TableData] = []
    arms = census_by_arm(rows)
    if contracts is None and contract is not None:
        contracts = {arm: study_contract_label(contract) for arm in arms}
    arms["(all)"] = census(rows)
    counting = infrastructure == "count_as_failure"
    classes = [*FLAGS, INFRASTRUCTURE] if counting else list(FLAGS)
    labels = [
        TURN_LIMIT_UNREACHABLE
        if f == "turn_limit" and contract is not None and not turn_limit_reachable(contract)
        else f
        for f in classes
    ]
    left_out = ["infra_error left out"] if infrastructure is not None else []
    header = [
        "arm",
        "episodes",
        "failures",
        *labels,
        "harness limit",
        "limit w/o infeasible",
        *left_out,
    ]
    body = [
        [
            arm,
            c.episodes,
            c.failures,
            *[
                f"{c.counted if f == INFRASTRUCTURE else c.flags[f]} ({_pct(c.share(f))})"
                for f in classes
            ],
            _pct(c.harness_limit_share),
            _pct(c.harness_limit_share_without_infeasible),
            *([c.infra] if left_out else []),
        ]
        for arm, c in arms.items()
    ]
    out.append(("Failure census: how failed episodes ended (terminal flag)", header, body))
    crossed = obligation_by_flag(rows)
    obligations = sorted({o for o, _ in crossed})
    out.append(
        (
            "First unmet obligation x terminal flag (failed episodes)",
            ["obligation", *labels],
            [[o, *[crossed.get((o, f), 0) for f in classes]] for o in obligations],
        )
    )
    by_arm: dict[str, list[CensusRow]] = defaultdict(list)
    for r in rows:
        by_arm[r.arm].append(r)
    trunc_rows = []
    for arm in sorted(by_arm):
        t = truncation(by_arm[arm])
        trunc_rows.append([arm, t.episodes, t.truncated, _pct(t.rate), t.before_first_call])
    out.append(
        (
            "Truncation at the completion cap",
            ["arm", "episodes", "truncated", "rate", "before the first call"],
            trunc_rows,
        )
    )
    rep = sentinel_repeats(rows)
    if rep.units:
        out.append(
            (
                "Sentinel repeats (units run more than once)",
                ["units", "runs", "pass@1", "all runs", "any run", "disagreement"],
                [
                    [
                        rep.units,
                        rep.runs,
                        _pct(rep.pass_at_1),
                        _pct(rep.all_runs),
                        _pct(rep.any_run),
                        _pct(rep.disagreement),
                    ]
                ],
            )
        )
    strata = []
    for base, stressed in pairs:
        s = truncation_stratum(rows, base, stressed)
        strata.append(
            [
                f"{stressed} - {base}",
                s.pairs,
                _pp(s.effect),
                f"{s.losses} / {s.gains}",
                s.losses_truncated,
                s.untruncated_pairs,
                _pp(s.stratum_effect),
                "-" if s.bounds is None else f"[{_pp(s.bounds[0])}, {_pp(s.bounds[1])}]",
                "-"
                if s.bounds_alike is None
                else f"[{_pp(s.bounds_alike[0])}, {_pp(s.bounds_alike[1])}]",
            ]
        )
    if strata:
        out.append(
            (
                "Truncation stratum and worst-case bounds (paired on task and repeat)",
                [
                    "contrast",
                    "pairs",
                    "effect",
                    "lost / gained",
                    "lost and truncated",
                    "untruncated pairs",
                    "stratum effect",
                    "bounds",
                    "bounds (alike)",
                ],
                strata,
            )
        )
    if contracts:
        out.append(contract_table(contracts))
    return out


#: The title of the census's label: the harness contract its episodes ran under.
CONTRACT_TITLE = "Failure census: the harness contract the episodes ran under"


def contract_label(
    completion_cap: int, episode_tokens: int, call_limit: str, turn_limit: str, fires: bool | None
) -> str:
    """The harness contract in words (seed 3.3): the completion cap, the episode budget,
    the call limit and the turn limit, and whether the turn limit can end an episode
    (``fires``: None when it depends on the task's certified minimum)."""
    if fires is None:
        can = "can fire only where a task's call limit reaches it"
    elif fires:
        can = "can fire"
    else:
        can = (
            "can never fire: every non-final turn is a call, so an episode ends at the call "
            "limit first; reading F3"
        )
    return (
        f"completion cap {completion_cap:,} tokens per request; episode budget "
        f"{episode_tokens:,} tokens; call limit {call_limit}; turn limit {turn_limit} ({can})"
    )


def turn_limit_fires(contract: Contract) -> bool:
    """Whether the contract's turn limit can end an episode: at a turn slack of 0
    (:func:`turn_limit_reachable`, reading F3), or below it (a turn limit under the call
    limit, which only absolute registered limits can give)."""
    return turn_limit_reachable(contract) or contract.turn_slack < 0


def study_contract_label(contract: Contract) -> str:
    """A study's contract (limits relative to each variant's certified minimum)."""
    return contract_label(
        contract.completion_cap,
        contract.episode_tokens,
        f"= certified minimum + {contract.call_slack}",
        f"= call limit + {contract.turn_slack}",
        turn_limit_fires(contract),
    )


def contract_table(labels: Mapping[str, str]) -> TableData:
    """The census's label: each distinct contract (arm -> its contract in words) with the
    arms that ran under it ("every arm" when they share one)."""
    by_label: dict[str, list[str]] = defaultdict(list)
    for arm, label in labels.items():
        by_label[label].append(arm)
    rows: list[list[Any]] = [
        [label, "every arm" if len(by_label) == 1 else ", ".join(arms)]
        for label, arms in by_label.items()
    ]
    return (CONTRACT_TITLE, ["harness contract", "arms"], rows)


def census_markdown(tables: Sequence[TableData]) -> str:
    """The tables as Markdown (every cell escaped)."""
    lines: list[str] = []
    for title, header, body in tables:
        lines += [f"### {title}", "", *table(header, body), ""]
    return "\n".join(lines)
