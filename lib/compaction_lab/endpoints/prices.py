"""Price tables: what a provider charges per token, read from ``data/prices/*.yaml``.

A price table holds, per 1M tokens and in one currency, the price of input
tokens served from no cache (``input``, a cache miss), input tokens served
from the provider's prefix cache (``cache_read``, a hit), input tokens written
to the cache where the provider bills writes (``cache_write``; ``None`` when
writes are not billed separately) and output tokens. A table may add peak
prices (``peak``) with a description of when they apply. It names the cache
rule its provider follows (see `compaction_lab.cost.cache`) with that rule's
parameters, the page the prices were read from and the date they were read:
prices change, so every figure computed from a table is "as read on
``date_read``".

Billing convention (`price`)
----------------------------
``input_tokens`` is the request's TOTAL input. Of it, ``cached_tokens`` are
billed at ``cache_read`` and ``cache_write_tokens`` at ``cache_write``; the
rest (``input_tokens - cached_tokens - cache_write_tokens``) at ``input``.
Output tokens are billed at ``output``. When a table bills no cache writes
(``cache_write is None``: DeepSeek, OpenAI) any ``cache_write_tokens`` are
ordinary input and billed at ``input``.

Money in different currencies is never added silently: `convert` needs an
explicit rate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, overload

from compaction_lab.core import paths, user_yaml

#: Periods a table can be priced in; ``peak`` falls back to off-peak prices
#: when the table has none.
PERIODS: tuple[str, ...] = ("off_peak", "peak")

#: Cache rules a table may name (the simulators of `compaction_lab.cost.cache`).
CACHE_RULES: tuple[str, ...] = ("deepseek", "openai", "anthropic", "none")

_PRICE_KEYS = ("input", "cache_read", "cache_write", "output")
_TOP_KEYS = frozenset(
    {
        "name",
        "model",
        "provider",
        "currency",
        *_PRICE_KEYS,
        "peak",
        "cache",
        "cache_params",
        "source",
        "date_read",
        "notes",
    }
)
_REQUIRED = ("name", "model", "provider", "currency", "input", "cache_read", "output", "cache", "source", "date_read")


class UnknownPriceTable(LookupError):
    """No price table of that name (the message lists the available ones)."""


@dataclass(frozen=True)
class Rates:
    """Per-1M-token prices of one period, in the table's currency.

    Parameters
    ----------
    input : float
        Input tokens not served from the cache (a miss).
    cache_read : float
        Input tokens served from the prefix cache (a hit).
    cache_write : float or None
        Input tokens written to the cache, where billed; ``None`` when the
        provider bills no writes (they are ordinary input).
    output : float
        Output tokens.
    """

    input: float
    cache_read: float
    cache_write: float | None
    output: float


@dataclass(frozen=True)
class PeakPrices:
    """A table's peak-hour prices (same keys as the off-peak ones) and when they apply.

    Parameters
    ----------
    input, cache_read, cache_write, output : float (cache_write may be None)
        Per-1M-token prices during peak hours.
    periods : str
        When peak prices apply, as the provider documents it (UTC times).
    """

    input: float
    cache_read: float
    cache_write: float | None
    output: float
    periods: str = ""


@dataclass(frozen=True)
class PriceTable:
    """One model's prices, cache rule and provenance.

    Parameters
    ----------
    name : str
        Table name (the YAML file's stem), e.g. ``deepseek-flash``.
    model : str
        The model name the provider bills under.
    provider : str
    currency : str
        ISO 4217 code (``CNY``, ``USD``).
    input, cache_read, output : float
        Off-peak (or only) per-1M-token prices: cache miss, cache hit, output.
    cache_write : float or None
        Per-1M-token price of cache writes; ``None`` when not billed.
    peak : PeakPrices or None
        Peak-hour prices, when the provider has them.
    cache_rule : str
        Which simulator rule applies (one of `CACHE_RULES`).
    cache_params : mapping
        That rule's parameters (e.g. ``unit``, ``min_tokens``, ``ttl``,
        Anthropic's ``write_multipliers``).
    source : str
        The provider's pricing page the prices were read from.
    date_read : str
        ISO date the prices were read; they may have changed since.
    notes : str
        Free text (what the table leaves out, e.g. long-context surcharges).
    """

    name: str
    model: str
    provider: str
    currency: str
    input: float
    cache_read: float
    cache_write: float | None
    output: float
    peak: PeakPrices | None
    cache_rule: str
    cache_params: Mapping[str, Any] = field(default_factory=dict)
    source: str = ""
    date_read: str = ""
    notes: str = ""


# --------------------------------------------------------------------------- loading


def list_price_tables(directory: str | Path | None = None) -> list[str]:
    """Names of the shipped price tables (YAML stems in ``data/prices``), sorted."""
    folder = Path(directory) if directory is not None else paths.PRICES_DIR
    return sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else []


def _resolve(name_or_path: str | Path) -> Path:
    p = Path(name_or_path)
    # A name never contains a separator or the .yaml suffix; anything else is a path.
    if p.suffix in (".yaml", ".yml") or len(p.parts) > 1:
        if not p.is_file():
            raise UnknownPriceTable(f"price table file {str(p)!r} not found")
        return p
    candidate = paths.PRICES_DIR / f"{name_or_path}.yaml"
    if not candidate.is_file():
        available = ", ".join(list_price_tables()) or "none"
        raise UnknownPriceTable(f"no price table {str(name_or_path)!r} in {paths.PRICES_DIR}; available: {available}")
    return candidate


@overload
def _price(value: Any, key: str, where: str, *, optional: Literal[False] = False) -> float: ...
@overload
def _price(value: Any, key: str, where: str, *, optional: bool) -> float | None: ...
def _price(value: Any, key: str, where: str, *, optional: bool = False) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{where}: {key} must be a non-negative number{' or null' if optional else ''}, got {value!r}")
    return float(value)


def _peak(block: Any, where: str) -> PeakPrices | None:
    if block is None:
        return None
    if not isinstance(block, Mapping):
        raise ValueError(f"{where}: peak must be a mapping of prices and periods")
    unknown = set(block) - {*_PRICE_KEYS, "periods"}
    if unknown:
        raise ValueError(f"{where}: unknown peak keys {sorted(unknown)}")
    return PeakPrices(
        input=_price(block.get("input"), "peak.input", where),
        cache_read=_price(block.get("cache_read"), "peak.cache_read", where),
        cache_write=_price(block.get("cache_write"), "peak.cache_write", where, optional=True),
        output=_price(block.get("output"), "peak.output", where),
        periods=str(block.get("periods") or ""),
    )


def _check_write_multipliers(table: PriceTable, where: str) -> None:
    # Anthropic prices writes as a multiple of input; the listed write price must agree with it.
    mult = table.cache_params.get("write_multipliers")
    ttl = table.cache_params.get("ttl")
    if not mult or table.cache_write is None or ttl is None:
        return
    if ttl not in mult:
        raise ValueError(f"{where}: cache_params.ttl {ttl!r} has no entry in write_multipliers {dict(mult)}")
    if not math.isclose(table.cache_write, table.input * float(mult[ttl]), rel_tol=1e-9, abs_tol=1e-12):
        raise ValueError(
            f"{where}: cache_write {table.cache_write} != input {table.input} x write multiplier "
            f"{mult[ttl]} for ttl {ttl!r}"
        )


def table_from_mapping(data: Mapping[str, Any], where: str = "price table") -> PriceTable:
    """Validate a parsed YAML mapping and build its `PriceTable`.

    Raises
    ------
    ValueError
        On a missing or unknown key, a negative or non-numeric price, an
        unknown cache rule, or a write price that disagrees with the write
        multiplier.
    """
    if not isinstance(data, Mapping):
        raise ValueError(f"{where}: expected a mapping, got {type(data).__name__}")
    missing = [k for k in _REQUIRED if data.get(k) in (None, "")]
    if missing:
        raise ValueError(f"{where}: missing {', '.join(missing)}")
    unknown = set(data) - _TOP_KEYS
    if unknown:
        raise ValueError(f"{where}: unknown keys {sorted(unknown)}")
    currency = str(data["currency"]).upper()
    if len(currency) != 3 or not currency.isalpha():
        raise ValueError(f"{where}: currency must be an ISO 4217 code, got {data['currency']!r}")
    rule = str(data["cache"])
    if rule not in CACHE_RULES:
        raise ValueError(f"{where}: unknown cache rule {rule!r}; expected one of {CACHE_RULES}")
    params = data.get("cache_params") or {}
    if not isinstance(params, Mapping):
        raise ValueError(f"{where}: cache_params must be a mapping")
    table = PriceTable(
        name=str(data["name"]),
        model=str(data["model"]),
        provider=str(data["provider"]),
        currency=currency,
        input=_price(data["input"], "input", where),
        cache_read=_price(data["cache_read"], "cache_read", where),
        cache_write=_price(data.get("cache_write"), "cache_write", where, optional=True),
        output=_price(data["output"], "output", where),
        peak=_peak(data.get("peak"), where),
        cache_rule=rule,
        # Read-only, so a frozen table cannot be changed through its parameters.
        cache_params=MappingProxyType(dict(params)),
        source=str(data["source"]),
        # YAML turns an unquoted 2026-11-30 into a date; keep the ISO text either way.
        date_read=str(data["date_read"]),
        notes=str(data.get("notes") or "").strip(),
    )
    _check_write_multipliers(table, where)
    return table


def load_price_table(name_or_path: str | Path) -> PriceTable:
    """Load a price table by name (``deepseek-flash``) or by path to a YAML file.

    Raises
    ------
    UnknownPriceTable
        If no such table exists; the message names the available tables.
    ValueError
        If the file is malformed (see `table_from_mapping`), or cannot be read as YAML
        (`core.user_yaml.UserYamlError`, naming the file).
    """
    path = _resolve(name_or_path)
    data = user_yaml.load(path)
    table = table_from_mapping(data, where=str(path))
    if table.name != path.stem:
        raise ValueError(f"{path}: name {table.name!r} differs from the file name {path.stem!r}")
    return table


# --------------------------------------------------------------------------- pricing


def _check_period(period: str) -> None:
    if period not in PERIODS:
        raise ValueError(f"unknown period {period!r}; expected one of {PERIODS}")


def rates(table: PriceTable, period: str = "off_peak", *, ttl: str | None = None) -> Rates:
    """Return the per-1M-token prices that apply in `period`.

    Parameters
    ----------
    table : PriceTable
    period : {"off_peak", "peak"}
        ``peak`` falls back to the off-peak prices when the table has no peak.
    ttl : str, optional
        For tables whose writes are priced as a multiple of input
        (``cache_params.write_multipliers``, Anthropic): the cache TTL whose
        write price applies (``"5m"``, ``"1h"``). Default: the table's own
        ``cache_write``.
    """
    _check_period(period)
    src = table.peak if (period == "peak" and table.peak is not None) else table
    write = src.cache_write
    if ttl is not None:
        mult = table.cache_params.get("write_multipliers") or {}
        if ttl not in mult:
            raise ValueError(
                f"table {table.name!r} has no write multiplier for ttl {ttl!r} (has: {sorted(mult) or 'none'})"
            )
        write = src.input * float(mult[ttl])
    return Rates(input=src.input, cache_read=src.cache_read, cache_write=write, output=src.output)


def price(
    table: PriceTable,
    *,
    input_tokens: int,
    cached_tokens: int,
    cache_write_tokens: int = 0,
    output_tokens: int,
    period: str = "off_peak",
    ttl: str | None = None,
) -> float:
    """Cost of one request in the table's currency.

    Parameters
    ----------
    table : PriceTable
    input_tokens : int
        The request's TOTAL input tokens (misses, hits and writes together).
    cached_tokens : int
        Of `input_tokens`, those served from the cache: billed at ``cache_read``.
    cache_write_tokens : int
        Of `input_tokens`, those written to the cache: billed at
        ``cache_write``, or at ``input`` when the table bills no writes.
    output_tokens : int
        Billed at ``output``.
    period : {"off_peak", "peak"}
    ttl : str, optional
        Cache TTL whose write price applies (see `rates`).

    Returns
    -------
    float
        ``(miss * input + cached * cache_read + writes * cache_write + output * output) / 1e6``
        with ``miss = input_tokens - cached_tokens - cache_write_tokens``.

    Raises
    ------
    ValueError
        If a count is negative or cached + written tokens exceed the input.
    """
    counts = {
        "input_tokens": input_tokens,
        "cached_tokens": cached_tokens,
        "cache_write_tokens": cache_write_tokens,
        "output_tokens": output_tokens,
    }
    for k, v in counts.items():
        if v < 0:
            raise ValueError(f"{k} must be >= 0, got {v}")
    miss = input_tokens - cached_tokens - cache_write_tokens
    if miss < 0:
        raise ValueError(
            f"cached_tokens ({cached_tokens}) + cache_write_tokens ({cache_write_tokens}) "
            f"exceed input_tokens ({input_tokens})"
        )
    r = rates(table, period, ttl=ttl)
    write_rate = r.input if r.cache_write is None else r.cache_write
    return (
        miss * r.input + cached_tokens * r.cache_read + cache_write_tokens * write_rate + output_tokens * r.output
    ) / 1_000_000


def convert(amount: float, from_currency: str, to_currency: str, rate: float | None = None) -> float:
    """Convert money between currencies, only with an explicit rate.

    Parameters
    ----------
    amount : float
    from_currency, to_currency : str
        ISO codes (case-insensitive).
    rate : float, optional
        Units of `to_currency` per one unit of `from_currency`. Required when
        the currencies differ: exchange rates move, and a figure converted at
        an unstated rate cannot be checked. Ignored when they are the same.

    Raises
    ------
    ValueError
        If the currencies differ and no positive, finite rate is given.
    """
    src, dst = from_currency.strip().upper(), to_currency.strip().upper()
    if src == dst:
        return float(amount)
    if rate is None:
        raise ValueError(f"converting {src} to {dst} needs an explicit rate ({dst} per 1 {src}); none was given")
    if isinstance(rate, bool) or not math.isfinite(rate) or rate <= 0:
        raise ValueError(f"rate must be a positive finite number, got {rate!r}")
    return float(amount) * float(rate)


__all__ = [
    "CACHE_RULES",
    "PERIODS",
    "PeakPrices",
    "PriceTable",
    "Rates",
    "UnknownPriceTable",
    "convert",
    "list_price_tables",
    "load_price_table",
    "price",
    "rates",
    "table_from_mapping",
]
