"""Shared by the calibration tests: an app with ``calibrate`` alone, and exact references.

The app is built from :mod:`prereg.commands.calibrate_cmds` as ``prereg.cli`` builds its own
(a root callback that records ``-w``), and errors map to exit codes as ``prereg.cli.main``
maps them, so these tests do not depend on the command being wired into ``prereg.cli``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from scipy import stats as sps
from scipy.special import gammaln, xlogy

from prereg.commands import calibrate_cmds
from prereg.commands._common import RootOptions
from prereg.core.errors import PreregError
from prereg.stats.calibration_model import Population, aggregate, simulate


def make_app() -> typer.Typer:
    app = typer.Typer(pretty_exceptions_enable=False, rich_markup_mode="rich")

    @app.callback()
    def _root(
        ctx: typer.Context,
        workspace: Annotated[Path | None, typer.Option("--workspace", "-w")] = None,
    ) -> None:
        ctx.obj = RootOptions(workspace)

    calibrate_cmds.register(app)
    return app


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str
    error: PreregError | None = None

    def json(self) -> Any:
        return json.loads(self.stdout)


def run(capsys: Any, *args: str | Path) -> Result:
    """``prereg calibrate ...`` in-process: exit code, output, the error raised."""
    capsys.readouterr()
    error = None
    try:
        make_app()(args=[str(a) for a in args], standalone_mode=False)
        code = 0
    except PreregError as exc:
        error, code = exc, exc.exit_code
    except SystemExit as exc:  # click usage errors
        code = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return Result(code, out, err, error)


# ---- exact references, computed here from scipy only ----------------------------------


def aggregate_probability(x: np.ndarray, how: str, runs: int) -> np.ndarray:
    """P(the per-task aggregate is 1 | every repeat succeeds with probability x)."""
    if how == "majority":
        return sps.binom.sf(runs // 2, runs, x)
    if how == "all":
        return x**runs
    if how == "any":
        return 1 - (1 - x) ** runs
    return x


def discordance(pop: Population, how: str, delta: float) -> tuple[float, float]:
    """(p10, p01) of per-task aggregates without a run component: control only, treatment
    only. A prompt's arms share their rate with probability lambda, else draw it
    independently; the treatment's rate is moved by the latent effect ``delta``."""
    theta = pop.grid
    f_c = aggregate_probability(theta, how, pop.runs)
    f_t = aggregate_probability(pop.shifted(theta, delta), how, pop.runs)
    lam = pop.shared
    p10 = lam * np.mean(f_c * (1 - f_t)) + (1 - lam) * np.mean(f_c) * np.mean(1 - f_t)
    p01 = lam * np.mean((1 - f_c) * f_t) + (1 - lam) * np.mean(1 - f_c) * np.mean(f_t)
    return float(p10), float(p01)


def trinomial(n: int, p10: float, p01: float) -> np.ndarray:
    """P(b, c) over the (n + 1) x (n + 1) grid, b + c <= n (0 elsewhere)."""
    b = np.arange(n + 1)[:, None]
    c = np.arange(n + 1)[None, :]
    rest = np.maximum(n - b - c, 0)
    log = (
        gammaln(n + 1)
        - gammaln(b + 1)
        - gammaln(c + 1)
        - gammaln(rest + 1)
        + xlogy(b, p10)
        + xlogy(c, p01)
        + xlogy(rest, 1 - p10 - p01)
    )
    return np.where(b + c <= n, np.exp(log), 0.0)


def mcnemar_rejects(b: int, c: int, alpha: float) -> bool:
    """The exact two-sided binomial test of b successes in b + c at 1/2 (scipy's)."""
    if b + c == 0:
        return False
    return bool(sps.binomtest(b, b + c, 0.5).pvalue <= alpha)


def simulate_aggregates(
    pop: Population, delta: float, sims: int, seed: int, how: str
) -> tuple[np.ndarray, np.ndarray]:
    """Per-task aggregates of ``sims`` data sets (for checks that need raw data)."""
    data = simulate(pop, [delta], sims, np.random.default_rng(seed))
    return aggregate(data.control, how), aggregate(data.treatment[delta], how)
