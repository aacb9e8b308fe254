"""The strict base model and the constrained field types every part of a registration shares.

One place for what "strict" means (unknown fields refused, instances frozen, no type
coercion) and for the identifier pattern, so every model of the schema agrees on them.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictStr

ID_PATTERN = r"^[a-z0-9][a-z0-9-]*$"


class Strict(BaseModel):
    """Unknown fields are errors; instances are immutable; types are strict.

    Strict: no string or number becomes a boolean (``allow_sampling: 'yes'``), no
    boolean a number (``repeats: true``), no float an integer (``repeats: 3.0``), no
    number a string. YAML gives real booleans and numbers, so plain YAML is unaffected.
    A pair (``compare``, ``prior``) is written as a YAML list: see :data:`StrictPair`.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


Identifier = Annotated[str, Field(pattern=ID_PATTERN, min_length=1, max_length=100)]
PositiveWeight = Annotated[float, Field(gt=0, allow_inf_nan=False)]
#: A pair written as a YAML (or JSON) list: the tuple alone is lax (strict mode accepts
#: only a tuple, which YAML cannot write); its items stay strict.
StrictPair = Annotated[tuple[StrictStr, StrictStr], Field(strict=False)]
StrictFloatPair = Annotated[tuple[StrictFloat, StrictFloat], Field(strict=False)]
Probability = Annotated[float, Field(gt=0.0, lt=1.0)]


def is_valid_id(value: str) -> bool:
    return re.fullmatch(ID_PATTERN, value) is not None
