"""Seeded value helpers: random tokens, heavy-tailed sizes, template slots, name casing.

Every draw takes an explicit `random.Random`; nothing here reads the clock or the
global random state, which is what makes a chain a pure function of its profile.
The fixed epoch `_BASE_TIME` stands in for "now" for the same reason.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

# Unambiguous alphabets (no 0/o, 1/l/i) so values read back unambiguously.
_LOWER = "abcdefghjkmnpqrstuvwxyz"
_DIGITS = "23456789"
_ALNUM = _LOWER + _DIGITS
_UPPER = "ABCDEFGHJKMNPQRSTUVWXYZ"
_HEX = "0123456789abcdef"
_B62 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

_SLOT = re.compile(r"«(\w+)»")


def _seed_int(text: str) -> int:
    """Integer seed from a string via sha256 (never Python's randomised ``hash``)."""
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


def _fill(template: str, ctx: Mapping[str, Any]) -> str:
    """Replace ``«name»`` slots (guillemets never clash with code braces or ``$``)."""
    return _SLOT.sub(lambda m: str(ctx[m.group(1)]), template)


def _tok(rng: random.Random, n: int) -> str:
    """Random lower-case token of `n` chars with at least one letter and one digit."""
    while True:
        s = "".join(rng.choice(_ALNUM) for _ in range(n))
        if any(c in _DIGITS for c in s) and any(c in _LOWER for c in s):
            return s


def _hex(rng: random.Random, n: int) -> str:
    """Random hex string of `n` chars with at least one letter and one digit."""
    while True:
        s = "".join(rng.choice(_HEX) for _ in range(n))
        if any(c.isdigit() for c in s) and any(c.isalpha() for c in s):
            return s


def _b62(rng: random.Random, n: int) -> str:
    """Random base-62 string of `n` chars, for ids shaped like real API ids (look-alikes included)."""
    return "".join(rng.choice(_B62) for _ in range(n))


def _heavy(rng: random.Random, median: float, sigma: float, lo: int, hi: int) -> int:
    """Log-normal draw clamped to [lo, hi]: most values near `median`, a long right tail."""
    return max(lo, min(hi, int(rng.lognormvariate(math.log(median), sigma))))


def _pick(rng: random.Random, seq: Sequence[Any]) -> Any:
    """One element of `seq`, drawn uniformly."""
    return seq[rng.randrange(len(seq))]


def _plural(noun: str) -> str:
    """English plural of a domain noun (``entry`` -> ``entries``, ``payment`` -> ``payments``)."""
    return noun[:-1] + "ies" if noun.endswith("y") and noun[-2:-1] not in "aeiou" else noun + "s"


def _camel(snake: str) -> str:
    """``snake_case`` -> ``camelCase`` (TypeScript function names)."""
    head, *rest = snake.split("_")
    return head + "".join(p.capitalize() for p in rest)


def _pascal(snake: str) -> str:
    """``snake_case`` or ``kebab-case`` -> ``PascalCase`` (class and type names)."""
    return "".join(p.capitalize() for p in re.split(r"[_\-]", snake))


#: Fixed epoch of all synthetic sessions (timestamps are base + seeded increments).
_BASE_TIME = datetime(2024, 3, 11, 8, 30, 0, tzinfo=timezone.utc)
