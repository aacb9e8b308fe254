"""One table per extension point: the schema and every consumer agree with it.

docs/architecture.md ("Extension points") lists the tables; docs/extending.md says what a
new entry touches. Each test reads the allowed values from the registration schema's own
JSON schema (what ``register`` accepts), not from the table, so a schema that stopped
deriving from its table would fail here.
"""

from __future__ import annotations

import typing
from typing import Any

import pytest
from pydantic import ValidationError

from prereg import stats
from prereg.experiments import controls as experiment_controls
from prereg.experiments.models import LOCKED_SPLIT, SPLIT_NAMES, SplitName
from prereg.registry import hosts, schema
from prereg.registry.schema import Arm, Host, Multiplicity, Registration
from prereg.reports.invokerank import controls as report_controls
from prereg.reports.registered.apply import ADAPTERS
from prereg.runners import record
from prereg.runners.drivers import local
from prereg.runners.drivers.table import FACTORIES


def _enum(model: type[Any], field: str) -> list[str]:
    """The values the schema accepts for ``field`` (a Literal, possibly optional)."""
    prop = model.model_json_schema()["properties"][field]
    for option in [prop, *prop.get("anyOf", [])]:
        if "enum" in option:
            return list(option["enum"])
        if "const" in option:
            return [option["const"]]
    raise AssertionError(f"{model.__name__}.{field} has no enumerated values: {prop}")


def test_registrable_tests() -> None:
    names = list(stats.REGISTRABLE_TESTS)
    assert _enum(schema.TestSpec, "test") == names
    assert list(ADAPTERS) == names, "every registrable test needs an adapter in the report"
    for name in names:
        needs = stats.REGISTRABLE_TESTS[name].needs_margin
        kwargs = {"test": name} if needs is False else {"test": name, "margin": 0.05}
        assert schema.TestSpec(**kwargs).test == name
        if needs:
            with pytest.raises(ValidationError, match="margin"):
                schema.TestSpec(test=name)


def test_an_unknown_test_is_refused_with_the_table_listed() -> None:
    with pytest.raises(ValidationError) as err:
        schema.TestSpec(test="mcnemar_exakt")
    text = str(err.value)
    assert "did you mean 'mcnemar_exact'" in text
    assert ", ".join(stats.TEST_NAMES) in text


def test_multiplicity_methods() -> None:
    names = list(stats.MULTIPLICITY_METHODS)
    assert names == list(typing.get_args(stats.MultiplicityMethod))
    assert _enum(Multiplicity, "method") == names
    for name, rule in stats.MULTIPLICITY_METHODS.items():
        result = rule.apply([0.001, 0.5] if rule.takes == "p" else [100.0, 1.0], 0.1)
        if name == "none":
            assert result is None
        else:
            assert result is not None and [bool(r) for r in result.reject] == [True, False]


def test_controls() -> None:
    names = list(experiment_controls.CONTROLS)
    assert names == list(typing.get_args(experiment_controls.ControlName))
    assert _enum(Arm, "control") == names
    assert list(report_controls.JUDGES) == names, "every control needs a judge in the report"


def test_drivers() -> None:
    names = list(hosts.DRIVERS)
    assert _enum(Host, "driver") == names
    assert list(FACTORIES) == names, "every declared driver needs a factory in the runners"
    for name, spec in hosts.DRIVERS.items():
        model = spec.models[0] if spec.models else "some-model"
        driver = FACTORIES[name](model=model, params={})
        assert driver.evidence_class == spec.evidence_class, name
        if not spec.needs_model:
            Host(driver=name)
        else:
            with pytest.raises(ValidationError, match="model"):
                Host(driver=name)
    assert hosts.PROVIDER_DRIVERS == tuple(n for n in names if hosts.DRIVERS[n].provider)


def test_driver_models() -> None:
    """A driver with a closed set of models: the registry's list is the driver's."""
    assert hosts.DRIVERS["local"].models == tuple(local.PROFILES)
    for name, spec in hosts.DRIVERS.items():
        if spec.models is None:
            assert hosts.model_problem(name, "any-model-at-all") is None
            continue
        for model in spec.models:
            assert hosts.model_problem(name, model) is None
            FACTORIES[name](model=model, params={})  # the driver builds it ...
        assert hosts.model_problem(name, None) is None
        problem = hosts.model_problem(name, "no-such-model")
        assert problem is not None and ", ".join(spec.models) in problem
        with pytest.raises(ValueError, match="no-such-model"):  # ... and refuses the rest
            FACTORIES[name](model="no-such-model", params={})


def test_split_names() -> None:
    assert list(SPLIT_NAMES) == list(typing.get_args(SplitName))
    assert _enum(Registration, "split") == list(SPLIT_NAMES)
    assert LOCKED_SPLIT in SPLIT_NAMES
    assert record.RunRecord.model_json_schema()["properties"]["split"]["enum"] == list(SPLIT_NAMES)
