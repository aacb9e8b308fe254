"""The public surface of prereg.stats: names, purity, frozen results."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import numpy as np
import pytest

import prereg.stats as S

STATS_DIR = Path(S.__file__).resolve().parent
ALLOWED_TOP_LEVEL = {
    "__future__",
    "numpy",
    "scipy",
    "math",
    "itertools",
    "typing",
    "dataclasses",
    "collections",
    "importlib",
    "types",
    "warnings",
    "functools",
    "statistics",  # NormalDist's quantile: a plan from options without importing scipy
    "prereg",
}

ISSUE_NAMES = [
    "mcnemar_exact",
    "jeffreys_interval",
    "design_effect",
    "icc_binary",
    "pass_hat_k",
    "benjamini_hochberg",
    "holm",
    "e_bh",
    "beta_mixture_evalue",
    "sequential_monitor",
    "paired_bootstrap",
    "tost_paired",
    "equivalence_margin",
    "exact_permutation_test",
    "sign_flip_test",
    "loss_shares",
    "mde_paired",
    "prompts_for_mde",
    "mcnemar_sample_size",
    "min_discordant",
    "simulate_sequential_monitor",
]


def test_every_issue_name_is_exported() -> None:
    for name in ISSUE_NAMES:
        assert name in S.__all__ and callable(getattr(S, name))
    for name in S.__all__:
        assert hasattr(S, name)


def test_stats_imports_only_numpy_scipy_and_itself() -> None:
    for path in STATS_DIR.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                assert top in ALLOWED_TOP_LEVEL, f"{path.name} imports {name}"
                if top == "prereg":
                    assert name.startswith("prereg.stats"), f"{path.name} imports {name}"


def test_results_are_frozen() -> None:
    results = [
        S.mcnemar_exact(3, 9),
        S.jeffreys_interval(3, 10),
        S.holm([0.01, 0.2]),
        S.beta_mixture_evalue(4, 1),
        S.tost_paired([0.1, -0.2, 0.05], 0.5),
        S.sign_flip_test([1.0, 2.0, -0.5]),
        S.paired_bootstrap([0, 1, 1], [1, 1, 1], [0, 1, 2], draws=20),
        S.sequential_monitor([1, 0, 1], [0, 0, 1], min_prompts=0),
    ]
    for res in results:
        assert dataclasses.is_dataclass(res)
        field = dataclasses.fields(res)[0].name
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(res, field, 0)
        assert isinstance(res.method, str) and res.method


def test_pure_functions_do_not_modify_inputs() -> None:
    x = np.array([0.1, -0.3, 0.2, 0.05])
    before = x.copy()
    S.sign_flip_test(x)
    S.tost_paired(x, 0.5)
    S.paired_bootstrap(x, x[::-1], [0, 0, 1, 1], draws=10)
    assert np.array_equal(x, before)
