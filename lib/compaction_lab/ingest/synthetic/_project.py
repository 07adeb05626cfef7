"""What a chain works on: project themes, their functional areas and vocabulary.

A theme (Python payments service, TypeScript storefront, ledger pipeline with SQL
migrations, Rust CLI) fixes the language, tooling and areas; `_make_project` draws
one concrete project from it. `_area_ctx` turns an area into the template slots
that code, tool outputs and prose all fill, which is why the same files, functions
and endpoints recur across a chain the way they do in a real session.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from compaction_lab.ingest.synthetic._random import _camel, _pascal, _pick, _plural

_FIRST = (
    "Ada",
    "Bram",
    "Chiara",
    "Dmitri",
    "Esra",
    "Farid",
    "Greta",
    "Hiro",
    "Ines",
    "Jonas",
    "Kaya",
    "Lior",
    "Mara",
    "Nils",
    "Oona",
    "Priya",
    "Quentin",
    "Rosa",
    "Sven",
    "Tomasz",
    "Uma",
    "Viktor",
    "Wen",
    "Yara",
    "Zeno",
)
_LAST = (
    "Park",
    "Okafor",
    "Lindqvist",
    "Moreau",
    "Tanaka",
    "Novak",
    "Haddad",
    "Ferreira",
    "Kowalski",
    "Brennan",
    "Achebe",
    "Ivanova",
    "Santos",
    "Hartmann",
    "Quist",
    "Delacroix",
    "Mbeki",
    "Rasmussen",
    "Oyelaran",
    "Vidal",
)
_BIRDS = (
    "kestrel",
    "heron",
    "wren",
    "plover",
    "osprey",
    "finch",
    "swift",
    "curlew",
    "merlin",
    "avocet",
    "dunlin",
    "egret",
    "lapwing",
    "siskin",
    "tern",
    "godwit",
    "shrike",
    "ibis",
)
_STATUSES = ("pending", "authorized", "captured", "failed", "cancelled", "settled", "expired")
_ATTRS = (
    "customer_id",
    "currency",
    "amount",
    "created_at",
    "external_ref",
    "version",
    "metadata",
    "updated_at",
    "region",
    "attempts",
)
_CURRENCIES = ("EUR", "USD", "GBP", "SEK", "PLN", "CHF")
_TZ_OFFSETS = ("+0100", "+0000", "-0500", "+0200")

_COMMIT_VERBS = (
    "Fix",
    "Add",
    "Refactor",
    "Handle",
    "Tighten",
    "Document",
    "Speed up",
    "Guard against",
    "Simplify",
    "Rename",
    "Test",
)
_COMMIT_THINGS = (
    "rounding in «fn»",
    "retries in «module»",
    "missing «attr» in «fn»",
    "«noun» status transitions",
    "flaky «area» tests",
    "«noun» validation",
    "logging around «fn»",
    "timeouts for the «area» client",
    "«table» index",
    "«area» config defaults",
    "type hints in «module»",
    "error mapping for «endpoint»",
)


@dataclass(frozen=True)
class _Area:
    """A functional area of a project: its modules, tests, functions and API."""

    name: str
    noun: str
    modules: tuple[str, ...]
    test: str
    funcs: tuple[str, ...]
    cls: str
    method: str
    path: str
    table: str
    id_prefix: str


@dataclass(frozen=True)
class _Theme:
    """A kind of project: language, tooling and the areas it is made of."""

    key: str
    language: str  # python | typescript | rust
    project_names: tuple[str, ...]
    package: str
    areas: tuple[_Area, ...]
    configs: tuple[str, ...]  # the first one is the app settings file tasks move values into
    schema_kind: str  # alembic | sql | zod | jsonschema
    schema_dir: str
    api_base: str
    external: tuple[str, ...]  # names of upstream services the project talks to


def _a(name, noun, modules, test, funcs, cls, method, path, table, prefix) -> _Area:
    """Positional shorthand for `_Area`, so the theme table below stays readable."""
    return _Area(name, noun, tuple(modules), test, tuple(funcs), cls, method, path, table, prefix)


_THEMES: tuple[_Theme, ...] = (
    _Theme(
        key="payments_service",
        language="python",
        project_names=("orders-service", "checkout-api", "billing-core", "payments-gateway"),
        package="app",
        areas=(
            _a(
                "payments",
                "payment",
                ["app/payments/client.py", "app/payments/retry.py"],
                "tests/test_payments_client.py",
                ["create_payment_intent", "capture_payment", "retry_with_backoff", "build_headers"],
                "PaymentsClient",
                "POST",
                "/v1/payments/intents",
                "payment_intents",
                "PAY",
            ),
            _a(
                "orders",
                "order",
                ["app/orders/service.py", "app/orders/models.py", "app/orders/api.py"],
                "tests/test_orders.py",
                ["create_order", "cancel_order", "apply_discount", "compute_totals"],
                "OrderService",
                "POST",
                "/v1/orders",
                "orders",
                "ORD",
            ),
            _a(
                "refunds",
                "refund",
                ["app/refunds/service.py", "app/refunds/errors.py"],
                "tests/test_refunds.py",
                ["create_refund", "validate_refund_amount", "notify_customer"],
                "RefundService",
                "POST",
                "/v1/refunds",
                "refunds",
                "RFD",
            ),
            _a(
                "webhooks",
                "event",
                ["app/webhooks/handlers.py", "app/webhooks/signing.py"],
                "tests/test_webhooks.py",
                ["handle_event", "verify_signature", "dispatch_event"],
                "WebhookRouter",
                "POST",
                "/v1/webhooks/psp",
                "webhook_events",
                "EVT",
            ),
            _a(
                "inventory",
                "reservation",
                ["app/inventory/reservations.py"],
                "tests/test_inventory.py",
                ["reserve_stock", "release_stock", "expire_holds"],
                "ReservationService",
                "POST",
                "/v1/reservations",
                "stock_reservations",
                "RSV",
            ),
        ),
        configs=("config/settings.yaml", "pyproject.toml", "docker-compose.yml"),
        schema_kind="alembic",
        schema_dir="migrations/versions",
        api_base="http://localhost:8000",
        external=("psp", "tax-service", "fraud-scoring"),
    ),
    _Theme(
        key="storefront_web",
        language="typescript",
        project_names=("storefront-web", "shop-frontend", "checkout-ui"),
        package="src",
        areas=(
            _a(
                "cart",
                "cart",
                ["src/store/cartSlice.ts", "src/components/Cart.tsx"],
                "src/components/Cart.test.tsx",
                ["add_item", "remove_item", "select_cart_total"],
                "CartPanel",
                "POST",
                "/api/cart/items",
                "carts",
                "CRT",
            ),
            _a(
                "checkout",
                "checkout",
                ["src/hooks/useCheckout.ts", "src/pages/CheckoutPage.tsx"],
                "src/hooks/useCheckout.test.ts",
                ["submit_order", "validate_address", "use_checkout"],
                "CheckoutPage",
                "POST",
                "/api/checkout",
                "checkouts",
                "CHK",
            ),
            _a(
                "catalog",
                "product",
                ["src/api/catalog.ts", "src/components/ProductGrid.tsx"],
                "src/api/catalog.test.ts",
                ["fetch_products", "search_products", "group_by_category"],
                "ProductGrid",
                "GET",
                "/api/products",
                "products",
                "PRD",
            ),
            _a(
                "session",
                "session",
                ["src/api/client.ts", "src/hooks/useSession.ts"],
                "src/api/client.test.ts",
                ["refresh_token", "with_auth", "request_json"],
                "ApiClient",
                "POST",
                "/api/session/refresh",
                "sessions",
                "SES",
            ),
            _a(
                "pricing",
                "coupon",
                ["src/utils/price.ts", "src/utils/coupons.ts"],
                "src/utils/price.test.ts",
                ["format_price", "apply_coupon", "round_minor"],
                "PriceTag",
                "POST",
                "/api/coupons/validate",
                "coupons",
                "CPN",
            ),
        ),
        configs=("config/runtime.yaml", "vite.config.ts", "tsconfig.json", "package.json"),
        schema_kind="zod",
        schema_dir="src/api/schemas",
        api_base="http://localhost:8787",
        external=("catalog-api", "identity", "payments-bff"),
    ),
    _Theme(
        key="ledger_pipeline",
        language="python",
        project_names=("ledger-pipeline", "settlement-etl", "finance-warehouse"),
        package="pipeline",
        areas=(
            _a(
                "extract",
                "settlement",
                ["pipeline/extract.py", "pipeline/psp_client.py"],
                "tests/test_extract.py",
                ["fetch_settlements", "paginate", "parse_page"],
                "SettlementExtractor",
                "POST",
                "/api/v1/extractions",
                "raw_settlements",
                "STL",
            ),
            _a(
                "transform",
                "entry",
                ["pipeline/transform.py"],
                "tests/test_transform.py",
                ["normalize_currency", "dedupe_entries", "to_ledger_rows"],
                "LedgerTransformer",
                "POST",
                "/api/v1/dags/ledger_transform/dagRuns",
                "ledger_staging",
                "RUN",
            ),
            _a(
                "load",
                "batch",
                ["pipeline/load.py", "pipeline/db.py"],
                "tests/test_load.py",
                ["upsert_ledger_entries", "copy_batch", "open_connection"],
                "LedgerLoader",
                "POST",
                "/api/v1/loads",
                "ledger_entries",
                "BAT",
            ),
            _a(
                "reconcile",
                "payout",
                ["pipeline/reconcile.py"],
                "tests/test_reconcile.py",
                ["match_payouts", "report_mismatches", "load_bank_file"],
                "Reconciler",
                "POST",
                "/api/v1/reconciliations",
                "payout_matches",
                "REC",
            ),
            _a(
                "schedule",
                "run",
                ["dags/daily_ledger.py"],
                "tests/test_dag.py",
                ["build_dag", "on_failure", "sla_miss_callback"],
                "DailyLedgerDag",
                "POST",
                "/api/v1/dags/daily_ledger/dagRuns",
                "dag_runs",
                "DRN",
            ),
        ),
        configs=("pipeline.yaml", "pyproject.toml", "profiles.yml"),
        schema_kind="sql",
        schema_dir="sql/migrations",
        api_base="http://localhost:8080",
        external=("psp-settlements", "bank-sftp", "warehouse"),
    ),
    _Theme(
        key="rust_cli",
        language="rust",
        project_names=("tidy", "syncpack", "depot-cli"),
        package="src",
        areas=(
            _a(
                "sync",
                "manifest",
                ["src/sync/mod.rs", "src/sync/remote.rs"],
                "tests/sync.rs",
                ["sync_all", "fetch_manifest", "retry_request"],
                "SyncEngine",
                "GET",
                "/api/v2/manifests",
                "manifests",
                "MAN",
            ),
            _a(
                "config",
                "profile",
                ["src/config.rs"],
                "tests/config.rs",
                ["load_config", "merge_profiles", "resolve_path"],
                "Config",
                "GET",
                "/api/v2/profiles",
                "profiles",
                "PRF",
            ),
            _a(
                "index",
                "entry",
                ["src/index.rs"],
                "tests/index.rs",
                ["build_index", "prune_stale", "write_atomic"],
                "Index",
                "POST",
                "/api/v2/index/rebuild",
                "index_entries",
                "IDX",
            ),
            _a(
                "upload",
                "upload",
                ["src/upload.rs", "src/chunker.rs"],
                "tests/upload.rs",
                ["upload_chunk", "finalize_upload", "split_chunks"],
                "Uploader",
                "POST",
                "/api/v2/uploads",
                "uploads",
                "UPL",
            ),
            _a(
                "cli",
                "command",
                ["src/main.rs", "src/cli.rs"],
                "tests/cli.rs",
                ["parse_args", "run_command", "print_report"],
                "Cli",
                "GET",
                "/api/v2/releases/latest",
                "releases",
                "REL",
            ),
        ),
        configs=("config/default.toml", "Cargo.toml", ".cargo/config.toml"),
        schema_kind="jsonschema",
        schema_dir="schema",
        api_base="https://registry.internal.example",
        external=("registry", "object-store", "auth-broker"),
    ),
)

_TEST_CONDITIONS = (
    "rejects_negative_amount",
    "retries_on_timeout",
    "is_idempotent",
    "handles_missing_customer",
    "rounds_half_even",
    "keeps_currency",
    "skips_cancelled",
    "returns_404_for_unknown_id",
    "preserves_order",
    "emits_metric",
    "respects_limit",
    "uses_cached_value",
    "validates_signature",
    "handles_empty_page",
    "updates_status",
    "logs_failure",
    "accepts_zero_quantity",
    "merges_duplicates",
    "honours_dry_run",
    "survives_partial_failure",
)


@dataclass
class _Project:
    """A chain's instance of a theme: its name, authors and test names per area."""

    theme: _Theme
    name: str
    root: str
    authors: list[tuple[str, str]]
    tests: dict[str, list[tuple[str, str]]]  # area -> (function, condition) per test; grows as tests are added
    branch: str
    python: str
    version: str

    @property
    def lang(self) -> str:
        """The theme's language: ``python``, ``typescript`` or ``rust``."""
        return self.theme.language


def _make_project(rng: random.Random, theme: _Theme) -> _Project:
    """Draw a concrete project of `theme`: name, authors, branch, versions and initial tests."""
    name = _pick(rng, theme.project_names)
    authors = []
    for _ in range(rng.randint(2, 4)):
        first, last = _pick(rng, _FIRST), _pick(rng, _LAST)
        authors.append((f"{first} {last}", f"{first.lower()}.{last.lower()}@{name}.dev"))
    tests: dict[str, list[tuple[str, str]]] = {}
    for area in theme.areas:
        pairs: list[tuple[str, str]] = []
        for _ in range(rng.randint(6, 16)):
            pair = (_pick(rng, area.funcs), _pick(rng, _TEST_CONDITIONS))
            if pair not in pairs:
                pairs.append(pair)
        tests[area.name] = pairs
    branch = f"{_pick(rng, ('fix', 'feat', 'chore'))}/{_pick(rng, theme.areas).name}-{rng.randint(100, 999)}"
    return _Project(
        theme=theme,
        name=name,
        root=f"/home/dev/{name}",
        authors=authors,
        tests=tests,
        branch=branch,
        python=f"3.11.{rng.randint(4, 9)}",
        version=f"0.{rng.randint(1, 9)}.{rng.randint(0, 9)}",
    )


def _area_ctx(rng: random.Random, project: _Project, area: _Area, fn: str | None = None) -> dict[str, Any]:
    """Template slots describing one area (and one of its functions)."""
    fn = fn or _pick(rng, area.funcs)
    lang = project.lang
    shown_fn = _camel(fn) if lang == "typescript" else fn
    return {
        "area": area.name,
        "noun": area.noun,
        "Noun": _pascal(area.noun),
        "nouns": _plural(area.noun),
        "fn": shown_fn,
        "module": _pick(rng, area.modules[:1] * 2 + area.modules),
        "test": area.test,
        "cls": area.cls,
        "table": area.table,
        "method": area.method,
        "endpoint": f"{area.method} {area.path}",
        "attr": _pick(rng, _ATTRS),
        "status": _pick(rng, _STATUSES),
        "STATUS": _pick(rng, _STATUSES).upper(),
        "project": project.name,
        "ext": _pick(rng, project.theme.external),
        "n": rng.randint(2, 9),
        "other_module": _pick(rng, _pick(rng, project.theme.areas).modules),
    }


def _module_of(area: _Area, fn: str) -> str:
    """Return the module of `area` that defines public function `fn` (functions are dealt round-robin)."""
    return area.modules[area.funcs.index(fn) % len(area.modules)]


def _test_title(project: _Project, fn: str, cond: str) -> str:
    """How a test is named in the project's language."""
    if project.lang == "typescript":
        return f"{_camel(fn)} {cond.replace('_', ' ')}"
    if project.lang == "rust":
        return f"{fn}_{cond}"
    return f"test_{fn}_{cond}"
