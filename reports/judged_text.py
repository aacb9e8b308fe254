"""The judged-outcome section as plain lines (the renderers escape them: untrusted text).

The unjudged count comes first on every line, and a judge's rate always carries its
label ("uncalibrated judge" until a gold set corrects it), so no judge-only figure can
be read as a finding.
"""

from __future__ import annotations

from prereg.reports.model import Report


def judged_lines(report: Report) -> list[str]:
    """One header, one line per judge, one per judge and arm; empty without judges."""
    section = report.judged
    if section is None:
        return []
    out = ["Judged outcomes (registered judges; never the verdict)"]
    for j in section.judges:
        declared = "; family confound declared" if j.confound_declared else ""
        out.append(
            f"judge {j.judge}: {j.outcome} by {j.driver} {j.model}, rubric {j.rubric} "
            f"{j.rubric_version} ({j.rubric_digest[:19]}){declared}"
        )
    for r in section.rates:
        rate = "no parsed verdict" if r.rate is None else f"{r.met}/{r.judged} = {r.rate:.1%}"
        corrected = ""
        if r.corrected is not None:
            c = r.corrected
            corrected = (
                f"; prediction-powered {c['estimate']:.1%} ({c['low']:.1%} to {c['high']:.1%})"
            )
        oracle = ""
        if r.oracle_agreement is not None:
            a = r.oracle_agreement
            kappa = "undefined" if a["kappa"] is None else f"{a['kappa']:.2f}"
            oracle = f"; against the oracle: {a['agree']}/{a['runs']} agree, kappa {kappa}"
        out.append(
            f"  {r.arm} / {r.judge}: unjudged {r.unjudged} of {r.needed} "
            f"({r.unparseable} unparseable); judge rate {rate} [{r.label}]{corrected}{oracle}"
        )
    return out
