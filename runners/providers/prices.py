"""The versioned price table and cost computation.

Why a table with a version: a cost in a run record is only as good as the
price it was computed from, and prices change. The packaged table
(``prices.yaml``) carries a version and a date; a user overrides it with their
own file (``--prices FILE`` or ``PREREG_PRICES``) in the same format, and the
version in use is reported with every run summary.

A model is priced by exact name or by a listed name plus a dated snapshot
suffix (``-20250929``, ``-2024-08-06``, ``-latest``); anything else is unpriced
and its cost is null, never a neighbour's price (a near-miss like ``gpt-5.1``
priced as ``gpt-5`` would be a silent estimate).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from prereg.core.errors import BadInput
from prereg.registry.hosts import DRIVERS

PRICES_ENV = "PREREG_PRICES"
_SNAPSHOT_SUFFIX = re.compile(r"^-(\d{8}|\d{4}-\d{2}-\d{2}|latest)$")
_PER = 1_000_000


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelPrice(_Strict):
    """USD per million tokens."""

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cached_input: float | None = Field(None, ge=0)
    cache_write: float | None = Field(None, ge=0)


class ProviderPrices(_Strict):
    batch_discount: float = Field(1.0, gt=0, le=1)
    models: dict[str, ModelPrice] = Field(default_factory=dict)


class PriceTable(_Strict):
    version: str = Field(min_length=1)
    date: str = Field(min_length=1)
    currency: str = "USD"
    unit: str = "per_million_tokens"
    sources: dict[str, str] = Field(default_factory=dict)
    providers: dict[str, ProviderPrices]
    #: where the table came from ("packaged" or a file path); not part of the file
    origin: str = "packaged"

    def price(self, provider: str, model: str | None) -> ModelPrice | None:
        """The price of ``model`` (exact name or a dated snapshot of a listed one)."""
        if not model:
            return None
        table = self.providers.get(provider)
        if table is None:
            return None
        if model in table.models:
            return table.models[model]
        best: str | None = None
        for name in table.models:
            if model.startswith(name) and _SNAPSHOT_SUFFIX.match(model[len(name) :]):
                if best is None or len(name) > len(best):
                    best = name
        return table.models[best] if best is not None else None

    def batch_discount(self, provider: str) -> float:
        table = self.providers.get(provider)
        return 1.0 if table is None else table.batch_discount


@dataclass(frozen=True)
class Priced:
    """Token counts to bill, in the provider-neutral split the drivers report."""

    uncached_input: int
    cached_input: int
    cache_write: int
    output: int  # every generated token, reasoning included


def cost_usd(
    price: ModelPrice | None, tokens: Priced, *, discount: float = 1.0, cache_credit: bool = True
) -> float | None:
    """Cost of one request; None if the model is unpriced (not measured, not guessed).

    ``cache_credit`` (the registration's ``harness.cache_credit``): with it, cache reads
    and writes are priced at their own rates where the table lists them; without it
    (seed 001: frozen rates, no cache credit) every input token is priced at the
    uncached input rate, however the provider served it.
    """
    if price is None:
        return None
    cached_rate = price.cached_input if price.cached_input is not None else price.input
    write_rate = price.cache_write if price.cache_write is not None else price.input
    if not cache_credit:
        cached_rate = write_rate = price.input
    total = (
        tokens.uncached_input * price.input
        + tokens.cached_input * cached_rate
        + tokens.cache_write * write_rate
        + tokens.output * price.output
    ) / _PER
    return round(total * discount, 10)


def spend_measured(drivers: Iterable[str]) -> bool:
    """Whether a run on ``drivers`` (names) measured its spend: only provider drivers
    price their requests from this table; the replay and local hosts price nothing, so
    their spend is null, "not measured", never $0 (invariant 7)."""
    names = set(drivers)
    return any(spec.provider for name, spec in DRIVERS.items() if name in names)


def worst_case_usd(
    price: ModelPrice, input_tokens: int, output_tokens: int, *, discount: float = 1.0
) -> float:
    """An upper bound: every input token uncached (or cache-written, if dearer)."""
    input_rate = max(price.input, price.cache_write or 0.0)
    return (input_tokens * input_rate + output_tokens * price.output) / _PER * discount


def _parse(data: Any, origin: str) -> PriceTable:
    if not isinstance(data, dict):
        raise BadInput("a price table is a mapping with version, date and providers", file=origin)
    try:
        return PriceTable.model_validate({**data, "origin": origin})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise BadInput(
            f"invalid price table: {first['msg']}", file=origin, field=where or None
        ) from None


@lru_cache(maxsize=1)
def packaged_prices() -> PriceTable:
    text = (
        resources.files("prereg.runners.providers")
        .joinpath("prices.yaml")
        .read_text(encoding="utf-8")
    )
    return _parse(yaml.safe_load(text), "packaged")


def load_prices(path: Path | str | None = None) -> PriceTable:
    """The table from ``path``, else ``PREREG_PRICES``, else the packaged one."""
    chosen = path if path is not None else (os.environ.get(PRICES_ENV) or None)
    if chosen is None:
        return packaged_prices()
    file = Path(chosen)
    if file.is_dir():
        raise BadInput("is a folder, not a price table file", file=str(file))
    if not file.is_file():
        raise BadInput("price table file not found", file=str(file))
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise BadInput(f"price table is not valid YAML/JSON: {exc}", file=str(file)) from None
    return _parse(data, str(file))
