"""``prereg run --dry-run`` (units, requests, a spend bound) and ``prereg run --batch``.

Dry run. Nothing is sent and nothing is written. For the units still missing
an ``ok`` record it reports the number of requests (at least one per unit, at
most its ``turn_limit``) and an upper bound on spend from the budgets and the price
table, per arm and in total, summed over the units with each unit's own limits (a
per-task rule resolved for its task; a study unit's from its compiled variant, and
none for a unit stopped before any request), derived from how the harness stops an
episode:

- a unit makes at most ``turn_limit`` requests, each generating at most
  ``completion_cap`` tokens (reasoning included: both providers count it
  against ``max_tokens`` / ``max_output_tokens``);
- the harness stops once the reported tokens of the episode pass
  ``episode_tokens`` (E), so everything before the last request totals at most
  E, and the last request adds its prompt and at most the cap;
- assuming no single prompt is longer than E, a unit's input tokens are at most
  E (one turn) or 2E, and its output tokens at most
  ``min(E, (turn_limit - 1) * cap) + cap``;
- priced at the model's dearest input rate and its output rate, times the
  batch discount for ``--batch``.

The registered ``spend_usd`` caps what will actually be spent (the
orchestration starts no unit once it is reached, and the drivers refuse a
request that could pass it), so the report shows both the bound and the cap.

Batch run: see :mod:`prereg.runners.providers.batch` for the flow; this module
only ties it to a registration, the run store and the orchestration.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from prereg.core.errors import BadInput
from prereg.core.workspace import Workspace
from prereg.experiments import Experiment
from prereg.experiments.models import LOCKED_SPLIT
from prereg.registry.hosts import PROVIDER_DRIVERS
from prereg.registry.pilot import PilotOptions
from prereg.registry.units import ArmConfig, Budgets, RunPlan, RunUnit, expand_units, unit_budgets
from prereg.runners.drivers.base import InfraError
from prereg.runners.harness import Harness
from prereg.runners.orchestrate import Progress, RunSummary, run_plan, settled_keys
from prereg.runners.prepare import prepare
from prereg.runners.providers.batch import (
    BatchReport,
    BatchStatus,
    mark_collected,
    prefetch_first_turns,
)
from prereg.runners.providers.batch_store import BatchStore
from prereg.runners.providers.driver import ModelDriver
from prereg.runners.providers.factory import create_run_drivers, spent_so_far
from prereg.runners.providers.prices import load_prices, worst_case_usd
from prereg.runners.providers.settings import ProviderSettings
from prereg.runners.store.choose import StoreLocation, open_store, resolve_store
from prereg.runners.store.interface import WrittenLinks
from prereg.runners.store.sqlite import RunStore
from prereg.runners.store.verify import anchor_runs, link_pin, verified_records
from prereg.runners.toolbottleneck.study import StudyUnits

ASSUMPTION = (
    "no single request's prompt is longer than the episode token budget (budgets.episode_tokens)"
)


def _pending(
    plan: RunPlan, experiment: Experiment, runs: StoreLocation, max_units: int | None
) -> tuple[int, int, list[RunUnit]]:
    """(units planned, units with an ok record, the units to run)."""
    units = expand_units(plan, experiment)
    store = open_store(runs)
    try:
        done = settled_keys(plan, store)  # ok, or settled under count_as_failure
    finally:
        store.close()
    pending = [u for u in units if u.key not in done]
    recorded = len(units) - len(pending)
    if max_units is not None:
        pending = pending[:max_units]
    return len(units), recorded, pending


def unit_bounds(
    turn_limit: int | None, completion_cap: int | None, episode_tokens: int | None
) -> dict[str, int | None]:
    """Per-unit maxima of requests, input and output tokens (None: unbounded); a turn
    limit of 0 is a unit that stops before any request (a study's unavailable Discovery
    tools) and costs nothing."""
    if turn_limit == 0:
        return {"requests": 0, "input_tokens": 0, "output_tokens": 0}
    if turn_limit is None or completion_cap is None or episode_tokens is None:
        return {"requests": turn_limit, "input_tokens": None, "output_tokens": None}
    before_output = min(episode_tokens, (turn_limit - 1) * completion_cap)
    return {
        "requests": turn_limit,
        "input_tokens": episode_tokens * (1 if turn_limit == 1 else 2),
        "output_tokens": before_output + completion_cap,
    }


def estimate_run(
    ws: Workspace,
    registration_id: str,
    *,
    batch: bool = False,
    max_units: int | None = None,
    prices: Path | str | None = None,
    store: str | None = None,
    pilot: PilotOptions | None = None,
) -> dict[str, Any]:
    """The dry-run report (see the module docstring); sends and writes nothing.
    ``pilot``: a pilot's options (subset of the units, response cache), as ``run`` takes them.

    ``store``: the run store the recorded units and spend are read from (``--store``,
    else ``PREREG_STORE``, else the workspace's runs/; SQLite or PostgreSQL).

    ``arms`` gives each arm's units, requests and spend bound under its own configuration;
    the top-level figures are their sums (a bound is unknown when any arm's is).
    """
    _, entry, plan, experiment = prepare(ws, registration_id, pilot)
    if batch:  # refused here exactly as ``run --batch`` refuses it (run_batched)
        check_batchable(plan)
    runs = resolve_store(ws.runs, store)
    planned, recorded, pending = _pending(plan, experiment, runs, max_units)
    batch = batch or plan.batch
    configs = plan.arm_configs()
    resolve = unit_resolver(plan, experiment)
    arms = {
        arm: _arm_estimate(
            config,
            [u for u in pending if u.arm == arm],
            batch=batch,
            prices=prices,
            resolve=resolve,
        )
        for arm, config in configs.items()
    }
    first = next(iter(arms.values()))
    bounds = [a["spend_upper_bound_usd"] for a in arms.values()]
    maxima = [a["requests"]["max"] for a in arms.values()]
    notes = list(dict.fromkeys(n for a in arms.values() for n in a["notes"]))
    b = plan.budgets
    out: dict[str, Any] = {
        "registration_id": plan.registration_id,
        "registration_digest": plan.digest,
        "driver": "+".join(dict.fromkeys(c.driver for c in configs.values())),
        "model": "+".join(dict.fromkeys(str(c.model) for c in configs.values()))
        if any(c.model for c in configs.values())
        else None,
        "batch": batch,
        "tool_search": bool(entry.registration.host.tool_search),
        "units_planned": planned,
        "units_recorded": recorded,
        "units_to_run": len(pending),
        "requests": {
            "min": sum(a["requests"]["min"] for a in arms.values()),
            "max": None if None in maxima else sum(maxima),
        },
        "per_unit_max": first["per_unit_max"],
        "budgets": {
            "completion_cap": b.completion_cap,
            "episode_tokens": b.episode_tokens,
            "call_limit": b.call_limit,
            "turn_limit": b.turn_limit,
            "spend_usd": b.spend_usd,
        },
        "price_table": next((a["price_table"] for a in arms.values() if a["price_table"]), None),
        "price": first["price"],
        "spend_upper_bound_usd": None if None in bounds else round(sum(bounds), 6),
        "spent_usd": spent_so_far(runs, plan.digest),
        "spend_cap_usd": b.spend_usd,
        "assumptions": [ASSUMPTION],
        "notes": notes,
        "arms": arms,
    }
    if b.spend_usd is not None and out["spend_upper_bound_usd"] is not None:
        remaining = max(b.spend_usd - out["spent_usd"], 0.0)
        out["notes"].append(
            f"the registered spend cap leaves ${remaining:.4f}; the run stops "
            "there whatever the bound"
        )
    return out


#: A unit's budgets with its limits resolved (a per-task rule for its task, or a study
#: unit's compiled variant).
Resolve = Callable[[RunUnit], Budgets]


def unit_resolver(plan: RunPlan, experiment: Experiment) -> Resolve:
    """How each unit's limits are resolved, as running resolves them: a study unit's from
    its own compiled variant (:meth:`StudyUnits.budgets_of`, reading 38), any other's by
    the registered per-task rules for its task (:func:`unit_budgets`)."""
    if experiment.toolbottleneck is not None:
        return StudyUnits(plan, experiment).budgets_of
    configs = plan.arm_configs()
    return lambda unit: unit_budgets(configs[unit.arm].budgets, unit.task)


def _largest(bounds: list[dict[str, int | None]]) -> dict[str, int | None]:
    """The per-unit maxima over units (None: unbounded for some unit)."""
    out: dict[str, int | None] = {}
    for key in bounds[0]:
        values = [b[key] for b in bounds]
        out[key] = None if None in values else max(v for v in values if v is not None)
    return out


def _arm_estimate(
    config: ArmConfig,
    units: list[RunUnit],
    *,
    batch: bool,
    prices: Path | str | None,
    resolve: Resolve | None = None,
) -> dict[str, Any]:
    """One arm's dry-run figures: its units, requests and spend bound (no cap applied),
    summed over its units with each unit's own limits (``resolve``; by default the
    registered per-task rules), so the bound is exact per unit; ``per_unit_max`` is the
    maximum over the units (the registered budgets when none is pending)."""
    n = len(units)
    b = config.budgets
    resolve = resolve or (lambda unit: unit_budgets(b, unit.task))
    # units with the same limits have the same bounds: one figure per distinct limits
    groups = Counter(
        (r.turn_limit, r.completion_cap, r.episode_tokens) for r in map(resolve, units)
    )
    per = {key: unit_bounds(*key) for key in groups}
    widest = (
        _largest(list(per.values()))
        if per
        else unit_bounds(b.turn_limit, b.completion_cap, b.episode_tokens)
    )
    requests = [(per[key]["requests"], count) for key, count in groups.items()]
    out: dict[str, Any] = {
        "driver": config.driver,
        "model": config.model,
        "units_to_run": n,
        "requests": {
            # a unit stopped before any request (turn limit 0) makes none
            "min": sum(count for most, count in requests if most != 0),
            "max": None
            if any(most is None for most, _ in requests)
            else sum((most or 0) * count for most, count in requests),
        },
        "per_unit_max": widest,
        "price_table": None,
        "price": None,
        "spend_upper_bound_usd": None,
        "notes": [],
    }
    if config.driver not in PROVIDER_DRIVERS:
        out["spend_upper_bound_usd"] = 0.0
        out["notes"].append(f"driver '{config.driver}' makes no paid requests (cost null)")
        return out
    settings = ProviderSettings.from_env(config.driver)
    table = load_prices(prices if prices is not None else settings.prices_path)
    out["price_table"] = {"version": table.version, "date": table.date, "origin": table.origin}
    price = table.price(config.driver, config.model)
    if price is None:
        out["notes"].append(
            f"model '{config.model}' is not in the price table: no spend bound "
            "(add it with --prices FILE)"
        )
        return out
    out["price"] = price.model_dump()
    discount = table.batch_discount(config.driver) if batch else 1.0
    if any(v["input_tokens"] is None or v["output_tokens"] is None for v in per.values()):
        out["notes"].append("a budget is unlimited: no spend bound")
        return out

    def usd(bounds: dict[str, int | None]) -> float:
        return worst_case_usd(
            price, bounds["input_tokens"] or 0, bounds["output_tokens"] or 0, discount=discount
        )

    if widest["input_tokens"] is not None and widest["output_tokens"] is not None:
        out["per_unit_max"] = {**widest, "usd": round(usd(widest), 6)}
    # nothing pending: nothing to spend (0), whatever the registered limits
    out["spend_upper_bound_usd"] = round(
        sum((usd(per[key]) * count for key, count in groups.items()), 0.0), 6
    )
    return out


def check_batchable(plan: RunPlan) -> None:
    """BadInput unless every arm is a single-turn provider configuration on one driver."""
    configs = plan.arm_configs()
    for arm, config in configs.items():
        if config.driver not in PROVIDER_DRIVERS:
            raise BadInput(
                f"--batch needs an anthropic or openai host (arm '{arm}' runs on "
                f"driver '{config.driver}')",
                field="host.driver",
            )
        if config.budgets.turn_limit != 1:
            raise BadInput(
                "--batch runs single-turn units only (selection runs): register "
                f"budgets.turn_limit: 1 (arm '{arm}' has {config.budgets.turn_limit})",
                field="budgets.turn_limit",
            )
    if len({c.host_key for c in configs.values()}) > 1:
        raise BadInput(
            "--batch sends every arm through one provider batch: the arms' hosts differ",
            field="host.batch",
        )


def run_batched(
    ws: Workspace,
    registration_id: str,
    *,
    concurrency: int = 4,
    max_units: int | None = None,
    progress: Progress | None = None,
    on_poll: Callable[[BatchStatus], None] | None = None,
    prices: Path | str | None = None,
    pilot: PilotOptions | None = None,
) -> tuple[RunSummary, BatchReport]:
    """Run a single-turn registration's missing units through the provider's batch API
    (``pilot``: a pilot's options, :mod:`prereg.registry.pilot`)."""
    if concurrency < 1:
        raise BadInput("--concurrency must be at least 1", field="concurrency")
    registry, entry, plan, experiment = prepare(ws, registration_id, pilot)
    check_batchable(plan)
    plan = replace(plan, batch=True)
    drivers = create_run_drivers(plan, ws, prices=prices, for_batch=True)
    driver = drivers[plan.arms[0][0]]
    if not isinstance(driver, ModelDriver):  # PROVIDER_DRIVERS build ModelDriver subclasses
        raise InfraError(f"driver '{plan.driver}' has no batch API")
    _, _, pending = _pending(plan, experiment, ws.runs, max_units)
    verified_records(ws.runs, registry, entry)  # resume only onto a chain that verifies
    if plan.split == LOCKED_SPLIT:
        registry.claim_locked_split(entry)
    harness = Harness(
        experiment,
        plan.budgets,
        plan.model,
        dict(plan.params),
        plan.rotations,
        configs=plan.arm_configs(),
    )
    episodes = [(u.key, harness.episode_for(u, driver, harness.offered(u))) for u in pending]
    store = RunStore(ws.runs)
    batches = BatchStore(ws.runs)

    async def main() -> tuple[RunSummary, BatchReport, int]:
        try:
            report = BatchReport()
            if episodes:
                report = await prefetch_first_turns(
                    driver, episodes, digest=plan.digest, batches=batches, progress=on_poll
                )
            summary = await run_plan(
                plan,
                experiment,
                store,
                driver,
                concurrency=concurrency,
                max_units=max_units,
                progress=progress,
                written=WrittenLinks(pin=link_pin(registry, entry)),
            )
            return summary, report, driver.primed_count()
        finally:
            await driver.aclose()

    try:
        summary, report, unused = asyncio.run(main())
        if unused == 0:
            # every result was turned into a record: the batches are done with. Otherwise
            # (a spend cap stopped the run, say) they stay open and the next run re-reads
            # them instead of paying again.
            mark_collected(batches, report)
    finally:
        store.close()
        batches.close()
    anchor_runs(ws.runs, registry, entry)
    return summary, report
