"""The registration schema: what a researcher commits to before any run exists.

Unknown fields are rejected everywhere (``extra="forbid"``), so a typo cannot
silently drop a commitment. Cross-field rules that need only the document live
here; rules that need the experiment (surfaces exist, split has tasks) live in
:mod:`prereg.registry.resolve`.

The package owns the pydantic models of a registration document, one idea a module:

- :mod:`.base`: the strict base model (``Strict``) and the shared constrained types
  (identifiers, probabilities, pairs written as lists);
- :mod:`.host`: where arms run (``Host``, ``Live``, ``HostOverride``,
  ``SAMPLING_PARAMS``);
- :mod:`.harness`: budgets, an arm's budget override and the harness rules;
- :mod:`.arms`: arms (each a whole configuration), the resolved ``Configuration`` and
  the factorial designs that generate arms;
- :mod:`.analysis`: outcomes, registered tests (``TestSpec``), contrasts, multiplicity
  and the InvokeRank score's interval method;
- :mod:`.design`: repeats and rotations, the stopping rule and the planning figures;
- :mod:`.registration`: ``Registration`` itself and its cross-field validators.

Submodules import one another, never this package. Class names, field order, config
and validators are those the frozen registrations were digested with: moving a model
between modules changes no digest and no generated JSON schema.
"""

from __future__ import annotations

from prereg.registry.schema.analysis import Contrast, Multiplicity, TestSpec
from prereg.registry.schema.arms import Arm
from prereg.registry.schema.host import SAMPLING_PARAMS, Host
from prereg.registry.schema.registration import Registration

__all__ = [
    "SAMPLING_PARAMS",
    "Arm",
    "Contrast",
    "Host",
    "Multiplicity",
    "Registration",
    "TestSpec",
]
