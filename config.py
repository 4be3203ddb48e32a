"""Configuration: command-line flags > environment > TOML file > defaults.

The TOML file is ``$KGOT_CONFIG`` or ``~/.config/kgot/config.toml`` (``$XDG_CONFIG_HOME`` is
honoured). Its tables mirror :class:`Settings`::

    [llm]                       # shared by both roles
    model = "openai:gpt-4o-mini"
    timeout = 120
    [llm.planning]              # decisions and code; overrides [llm]
    model = "openai:gpt-4o"
    [llm.execution]             # tool calls; overrides [llm]
    [llm.grader]                # benchmark grader (SimpleQA); unset = the planning model
    [llm.prices."openai:gpt-4o-mini"]
    input = 0.15                # USD per million tokens
    output = 0.60
    [controller]
    votes = 5
    [sandbox]
    [tools]
    [store]

Within one layer a role table beats the shared ``[llm]`` table; across layers the higher layer
wins, so ``--model`` on the command line beats ``[llm.planning] model`` in the file.
``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` are fallbacks only: they apply when no layer sets
``base_url`` / ``api_key``.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from kgot.errors import ConfigError

StructuredMethod = Literal["auto", "json_schema", "tool_calling", "json_object", "prompt"]
BackendName = Literal["networkx", "rdf"]
SandboxKind = Literal["auto", "bwrap", "fallback", "docker", "subprocess"]
SourceKind = Literal["extracted", "inferred", "ambiguous"]
ROLES = ("planning", "execution")
# Not a controller role: the benchmark grader. It takes the shared [llm] keys except `model`
# (without a model of its own it is the planning model).
GRADER = "grader"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)


class ModelSettings(_Section):
    """How to reach one chat model (one role)."""

    model: str | None = Field(None, description="`provider:name`, e.g. `openai:gpt-4o-mini`")
    base_url: str | None = Field(None, description="OpenAI-compatible endpoint URL")
    api_key: SecretStr | None = Field(None, description="API key (masked when shown)")
    timeout: float = Field(120.0, gt=0, description="seconds per LLM call")
    max_retries: int = Field(4, ge=0, description="retries on transient errors, with backoff")
    retry_backoff: float = Field(
        1.0, ge=0, description="seconds before the first retry; doubles per retry, with jitter"
    )
    structured_output: StructuredMethod = Field(
        "auto", description="how JSON answers are requested from the model"
    )
    temperature: float | None = Field(None, ge=0, le=2, description="sampling temperature")
    max_tokens: int | None = Field(None, gt=0, description="cap on output tokens per call")

    @field_validator("model")
    @classmethod
    def _script_path_absolute(cls, model: str | None) -> str | None:
        return anchored_script(model, Path.cwd()) if model else model


def anchored_script(model: str, base: Path) -> str:
    """``scripted:PATH`` with a relative PATH made absolute against ``base``; any other model
    as it is. A run keeps its settings in its checkpoint, so a path read against the working
    directory of the day would name another file, or none, when the run is resumed from
    elsewhere."""
    provider, _, path = model.partition(":")
    if provider.strip().lower() != "scripted" or not path.strip():
        return model
    return f"{provider}:{os.path.abspath(base / Path(path.strip()).expanduser())}"


class Price(_Section):
    """USD per million tokens."""

    input: float = Field(ge=0)
    output: float = Field(ge=0)


class LLMSettings(_Section):
    planning: ModelSettings = Field(default_factory=ModelSettings)
    execution: ModelSettings = Field(default_factory=ModelSettings)
    grader: ModelSettings = Field(default_factory=ModelSettings)
    structured_retries: int = Field(
        3, ge=0, description="re-asks after output that fails validation (error shown to model)"
    )
    stop_on_invalid_output: bool = Field(
        True,
        description="end the run when every answer of a step (all votes, all solution samples) "
        "failed validation for one reason, e.g. never any JSON; false = count them as failed",
    )
    waiting_notice_after: float = Field(
        15.0,
        ge=0,
        description="seconds without a model answer before one status line on stderr names the "
        "endpoint, try and time waited (0 = never)",
    )
    prices: dict[str, Price] = Field(
        default_factory=dict, description="per `provider:name`; overrides the built-in table"
    )


class ControllerSettings(_Section):
    backend: BackendName = Field("networkx", description="graph backend: `networkx` or `rdf`")
    votes: int = Field(5, ge=1, description="concurrent votes on INSERT vs RETRIEVE")
    max_iterations: int = Field(7, ge=1, description="then retrieval and a solution are forced")
    max_tool_calls: int = Field(3, ge=1, description="tool calls per INSERT step")
    fix_code_retries: int = Field(3, ge=0, description="attempts to fix failing graph code")
    retrieve_retries: int = Field(3, ge=1, description="query attempts on error or empty result")
    solution_samples: int = Field(3, ge=1, description="solution parses before the final pick")
    graph_token_budget: int = Field(8000, ge=200, description="max tokens of graph per prompt")
    working_set_nodes: int = Field(
        5000,
        ge=10,
        description="an entity with more nodes is not loaded whole: a run reads the part it "
        "needs (what its texts' rarer words point at, what its code names) up to about this "
        "many nodes",
    )
    gaia_format: bool = Field(False, description="format answers as GAIA expects")
    max_answer_chars: int = Field(
        20_000, ge=100, description="a longer answer counts as a failed solution sample"
    )


class SandboxSettings(_Section):
    kind: SandboxKind = Field(
        "auto", description="auto = bwrap, else fallback (unshare), else an error naming the fix"
    )
    timeout: float = Field(30.0, gt=0, description="wall-clock seconds per job")
    memory_mb: int = Field(1024, ge=64, description="memory limit per job")
    cpu_seconds: int = Field(60, ge=1, description="CPU time limit per job")
    max_output_bytes: int = Field(1_000_000, ge=1024, description="cap on stdout/stderr/outputs")
    max_file_mb: int = Field(64, ge=1, description="largest file a job may write")
    max_open_files: int = Field(256, ge=16, description="open file descriptors per job")
    max_processes: int = Field(64, ge=1, description="processes per job (pids cgroup)")
    pool_size: int = Field(2, ge=0, description="warm workers kept ready (0 = cold start)")
    recycle_after: int = Field(100, ge=1, description="jobs before a worker is replaced")
    resident_graph: bool = Field(
        True,
        description="keep each run's graph in a worker of the run's own between graph jobs "
        "(false: send the whole graph with every job)",
    )
    docker_image: str = Field("python:3.11-slim", description="image for `kind = docker`")
    allow_packages: list[str] = Field(
        default_factory=list, description="packages LLM code may install at run time"
    )
    preload: list[str] = Field(
        default_factory=lambda: ["networkx", "numpy", "pandas", "sympy"],
        description="libraries warm workers import before the first job",
    )
    work_dir_mb: int = Field(256, ge=16, description="size of each writable tmpfs in a sandbox")
    packages_dir: str | None = Field(
        None, description="where allowed packages are installed (default: data dir)"
    )
    pip_args: list[str] = Field(
        default_factory=list, description="extra `pip install` options for allowed packages"
    )
    host_uid: int = Field(
        2_000_065_534,
        ge=1000,
        le=4_294_967_294,
        description="uid/gid local sandboxes run jobs as on the host when kgot is root; must "
        "belong to no account (not nobody)",
    )


class ToolsSettings(_Section):
    enabled: list[str] | None = Field(None, description="only these tools (default: all)")
    disabled: list[str] = Field(default_factory=list, description="tools to leave out")
    timeout: float = Field(60.0, gt=0, description="seconds per tool call")
    max_output_chars: int = Field(12_000, ge=500, description="longer results are truncated")
    search_backend: str = Field("auto", description="ddgs backend(s), e.g. `duckduckgo,brave`")
    serpapi_key: SecretStr | None = Field(None, description="enables SerpAPI search")
    tavily_key: SecretStr | None = Field(None, description="enables Tavily search")
    brave_key: SecretStr | None = Field(None, description="enables Brave search")
    searxng_url: str | None = Field(None, description="enables a SearXNG instance")
    vision_model: str | None = Field(None, description="multimodal `provider:name` for images")
    vision_base_url: str | None = Field(
        None, description="endpoint of the vision model (default: the execution model's)"
    )
    vision_api_key: SecretStr | None = Field(
        None, description="API key of the vision model (default: the execution model's)"
    )
    transcription_model: str | None = Field(None, description="speech-to-text model for audio")
    transcription_base_url: str | None = Field(
        None, description="OpenAI-compatible endpoint for audio (default: the execution model's)"
    )
    transcription_api_key: SecretStr | None = Field(
        None, description="API key of the transcription endpoint (default: the execution model's)"
    )
    allow_private_urls: bool = Field(
        False, description="let web tools reach private/loopback addresses (and use proxies)"
    )
    max_download_mb: int = Field(25, ge=1, description="cap on bytes fetched per page or file")
    file_roots: list[str] = Field(
        default_factory=list, description="directories inspect_file may read besides attachments"
    )
    wikipedia_api: str = Field(
        "https://en.wikipedia.org/w/api.php", description="MediaWiki API endpoint (sets language)"
    )
    wayback_api: str = Field(
        "https://archive.org/wayback/available", description="Wayback Machine availability API"
    )
    search_api_urls: dict[str, str] = Field(
        default_factory=dict, description="endpoint overrides for `serpapi`, `tavily`, `brave`"
    )
    converter_memory_mb: int = Field(
        2048, ge=256, description="memory one document parse may use in its sandbox job"
    )


@dataclass(frozen=True)
class StoreLimits:
    """Caps on what a commit or an import may hold, and on the time checking it may take.

    Attributes:
        max_property_bytes: largest property value, as UTF-8 JSON (a document's text belongs
            in a file the fact points to, not in the graph).
        check_seconds: the longest checking one changeset against its types may take; a
            schema that makes more work of its values is reported, never waited out.
        max_import_bytes: largest graph file ``kgot graph import`` reads.
        max_import_nodes: most nodes one import may hold.
        max_import_edges: most edges one import may hold.
    """

    max_property_bytes: int = 1_000_000
    check_seconds: float = 30.0
    max_import_bytes: int = 100 * 1024 * 1024
    max_import_nodes: int = 250_000
    max_import_edges: int = 1_000_000


DEFAULT_LIMITS = StoreLimits()  # without settings (library use)


class StoreSettings(_Section):
    db: str = Field(
        default_factory=lambda: str(default_data_dir() / "kgot.db"),
        description="SQLite path or `postgresql://…` URL",
        json_schema_extra={"default_doc": "`$XDG_DATA_HOME/kgot/kgot.db` (`~/.local/share/…`)"},
    )
    max_property_bytes: int = Field(
        1_000_000, ge=1024, description="largest property value a fact may hold (UTF-8 JSON)"
    )
    check_seconds: float = Field(
        30.0, gt=0, description="longest checking one change against its types may take"
    )
    max_import_mb: int = Field(100, ge=1, description="largest file `kgot graph import` reads")
    max_import_nodes: int = Field(250_000, ge=1, description="most nodes one import may hold")
    max_import_edges: int = Field(1_000_000, ge=1, description="most edges one import may hold")

    def limits(self) -> StoreLimits:
        """The caps the store checks on commits and imports."""
        return StoreLimits(
            max_property_bytes=self.max_property_bytes,
            check_seconds=self.check_seconds,
            max_import_bytes=self.max_import_mb * 1024 * 1024,
            max_import_nodes=self.max_import_nodes,
            max_import_edges=self.max_import_edges,
        )


class Trust(_Section):
    """The trust a fact gets from what produced it, unless its graph code sets ``_confidence``
    / ``_source_kind``."""

    confidence: float = Field(ge=0, le=1)
    source_kind: SourceKind = "extracted"


# Trust defaults per producer (issue 15): the tool whose result a fact was written from, or
# `model` for what the model inferred with no tool result behind it. Never 1.0 by default.
DEFAULT_TRUST: dict[str, Trust] = {
    "inspect_file": Trust(confidence=0.9, source_kind="extracted"),
    "wikipedia": Trust(confidence=0.8, source_kind="extracted"),
    "visit_page": Trust(confidence=0.7, source_kind="extracted"),
    "web_search": Trust(confidence=0.6, source_kind="extracted"),
    "python": Trust(confidence=0.8, source_kind="inferred"),
    "llm_query": Trust(confidence=0.5, source_kind="inferred"),
    "model": Trust(confidence=0.6, source_kind="inferred"),
    "default": Trust(confidence=0.7, source_kind="extracted"),
}


class MemorySettings(_Section):
    trust: dict[str, Trust] = Field(
        default_factory=lambda: dict(DEFAULT_TRUST),
        description=(
            "trust per producer (a tool name, `model` or `default`): "
            '`{confidence = 0.8, source_kind = "extracted"}`; merged over the defaults'
        ),
        json_schema_extra={
            "default_doc": "inspect_file 0.9, wikipedia 0.8, visit_page 0.7, web_search 0.6, "
            "python 0.8 inferred, llm_query 0.5 inferred, model 0.6 inferred, default 0.7"
        },
    )
    embeddings: str | None = Field(
        None, description="`provider:model` for embeddings (off when unset)"
    )
    embeddings_base_url: str | None = Field(
        None, description="OpenAI-compatible endpoint for embeddings"
    )
    embeddings_api_key: SecretStr | None = Field(
        None, description="API key for the embeddings endpoint (masked when shown)"
    )
    embedding_similarity: float = Field(
        0.92, gt=0, le=1, description="cosine similarity that counts as evidence of one thing"
    )

    def trust_for(self, producer: str | None) -> Trust:
        """The trust of facts ``producer`` wrote: its own entry, else ``default``."""
        merged = {**DEFAULT_TRUST, **self.trust}
        return merged.get(producer or "model") or merged["default"]


class IngestSettings(_Section):
    """Caps on one ingestion (`kgot ingest`, ``ingest_text``, an aide's item): a text is written
    in pieces of ``tools.max_output_chars``, one model write (and its fixes) each, so its size
    is its cost."""

    max_chars: int = Field(
        300_000,
        ge=1,
        description="longest text one ingestion takes (about 25 pieces at the default "
        "`tools.max_output_chars`); a longer one is refused before any model call",
    )
    max_cost_usd: float | None = Field(
        None,
        gt=0,
        description="an ingestion stops between pieces once its model cost reaches this "
        "(needs the planning model's price); unset = no cap",
    )


class TracingSettings(_Section):
    """Where runs' traces go besides kgot's own record (docs/tracing.md)."""

    otel: bool = Field(
        False,
        description="export every run's spans to OpenTelemetry (the global tracer provider; "
        "needs `pip install -e '.[otel]'`)",
    )


class Settings(_Section):
    llm: LLMSettings = Field(default_factory=LLMSettings)
    controller: ControllerSettings = Field(default_factory=ControllerSettings)
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    tools: ToolsSettings = Field(default_factory=ToolsSettings)
    store: StoreSettings = Field(default_factory=StoreSettings)
    memory: MemorySettings = Field(default_factory=MemorySettings)
    ingest: IngestSettings = Field(default_factory=IngestSettings)
    tracing: TracingSettings = Field(default_factory=TracingSettings)


def default_config_path(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    base = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "kgot" / "config.toml"


def default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "kgot"


# Environment variable -> dotted settings path. `llm.*` paths are shared by both roles.
ENV_VARS: dict[str, str] = {
    "KGOT_MODEL": "llm.model",
    "KGOT_BASE_URL": "llm.base_url",
    "KGOT_API_KEY": "llm.api_key",
    "KGOT_LLM_TIMEOUT": "llm.timeout",
    "KGOT_LLM_MAX_RETRIES": "llm.max_retries",
    "KGOT_LLM_RETRY_BACKOFF": "llm.retry_backoff",
    "KGOT_STRUCTURED_OUTPUT": "llm.structured_output",
    "KGOT_PLANNING_MODEL": "llm.planning.model",
    "KGOT_EXECUTION_MODEL": "llm.execution.model",
    "KGOT_GRADER_MODEL": "llm.grader.model",
    "KGOT_GRADER_BASE_URL": "llm.grader.base_url",
    "KGOT_GRADER_API_KEY": "llm.grader.api_key",
    "KGOT_BACKEND": "controller.backend",
    "KGOT_SANDBOX": "sandbox.kind",
    "KGOT_DB": "store.db",
    "KGOT_SERPAPI_KEY": "tools.serpapi_key",
    "KGOT_TAVILY_KEY": "tools.tavily_key",
    "KGOT_BRAVE_KEY": "tools.brave_key",
    "KGOT_SEARXNG_URL": "tools.searxng_url",
    "KGOT_OTEL": "tracing.otel",
}
# Used only when no layer sets the value.
ENV_FALLBACKS: dict[str, str] = {
    "OPENAI_BASE_URL": "llm.base_url",
    "OPENAI_API_KEY": "llm.api_key",
}
_SHARED_LLM_KEYS = frozenset(ModelSettings.model_fields)


def load_settings(
    overrides: Mapping[str, Any] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    config_path: Path | None = None,
) -> Settings:
    """Build the effective settings.

    Args:
        overrides: dotted path -> value from the command line (``None`` values are ignored),
            e.g. ``{"llm.model": "openai:gpt-4o", "controller.votes": 3}``.
        environ: the environment to read (default ``os.environ``).
        config_path: the TOML file (default ``$KGOT_CONFIG`` or the XDG location); a path named
            explicitly (argument or ``$KGOT_CONFIG``) must exist.

    Raises:
        ConfigError: unreadable TOML, unknown keys or invalid values, naming the source.
    """
    env = os.environ if environ is None else environ
    file_layer = _read_toml_layer(config_path, env)
    env_layer = _dotted_to_nested(
        {path: env[name] for name, path in ENV_VARS.items() if env.get(name)}
    )
    cli_layer = _dotted_to_nested({k: v for k, v in (overrides or {}).items() if v is not None})

    merged: dict[str, Any] = {}
    origin: dict[str, str] = {}
    env_names = {path: name for name, path in ENV_VARS.items()}
    layers = (
        (file_layer, lambda _: str(_config_file(config_path, env))),
        (env_layer, lambda path: "environment variable " + _env_name(env_names, path)),
        (cli_layer, lambda _: "the command line"),
    )
    for layer, describe in layers:
        spread = _spread_shared_llm(layer)
        _deep_merge(merged, spread)
        for dotted in _flatten(spread):
            origin[dotted] = describe(dotted)
    for name, path in ENV_FALLBACKS.items():
        if env.get(name):
            key = path.rsplit(".", 1)[1]
            for role in (*ROLES, GRADER):
                role_table = merged.setdefault("llm", {}).setdefault(role, {})
                # OpenAI's variables belong to OpenAI-compatible routes only: an OpenAI key
                # must never be sent to another provider.
                if key not in role_table and _openai_route(role_table, key):
                    role_table[key] = env[name]
                    origin[f"llm.{role}.{key}"] = f"environment variable {name}"
    try:
        return Settings.model_validate(merged)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        source = origin.get(where) or next(
            (origin[k] for k in origin if k.startswith(where + ".")), "the configuration"
        )
        raise ConfigError(f"invalid setting `{where}` from {source}: {first['msg']}") from None


_OPENAI_PROVIDERS = frozenset({"openai", "azure_openai"})


def _openai_route(role: Mapping[str, Any], key: str) -> bool:
    """Whether a role reaches its model through the OpenAI SDK, so the OpenAI variables apply:
    an ``openai:`` model, a bare model name, or (for the key) any model at an explicit
    OpenAI-compatible base URL."""
    model = role.get("model")
    if not isinstance(model, str) or ":" not in model:
        return True
    provider = model.split(":", 1)[0]
    return provider in _OPENAI_PROVIDERS or (key == "api_key" and bool(role.get("base_url")))


def _flatten(tree: Mapping[str, Any], prefix: str = "") -> list[str]:
    paths: list[str] = []
    for key, value in tree.items():
        if isinstance(value, Mapping) and value:
            paths.extend(_flatten(value, f"{prefix}{key}."))
        else:
            paths.append(f"{prefix}{key}")
    return paths


def _env_name(env_names: Mapping[str, str], dotted: str) -> str:
    """The variable that set ``dotted``: a role's own variable, else the shared `llm.*` one."""
    parts = dotted.split(".")
    shared = f"llm.{parts[2]}" if len(parts) == 3 and parts[0] == "llm" else dotted
    return env_names.get(dotted) or env_names.get(shared) or "KGOT_*"


def _config_file(config_path: Path | None, env: Mapping[str, str]) -> Path:
    if config_path:
        return config_path
    return Path(env["KGOT_CONFIG"]) if env.get("KGOT_CONFIG") else default_config_path(env)


def nested_overrides(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Dotted overrides (``None`` = not given) as nested option dicts, with shared ``llm.*``
    keys spread to both roles — the shape :func:`with_options` takes."""
    given = {key: value for key, value in overrides.items() if value is not None}
    return _spread_shared_llm(_dotted_to_nested(given))


def _read_toml_layer(config_path: Path | None, env: Mapping[str, str]) -> dict[str, Any]:
    path = _config_file(config_path, env)
    if not path.exists():
        if config_path is not None:
            raise ConfigError(f"config file {path} does not exist (fix --config or create it)")
        if env.get("KGOT_CONFIG"):
            raise ConfigError(f"config file {path} does not exist (fix KGOT_CONFIG or create it)")
        return {}
    try:
        with path.open("rb") as handle:
            layer = tomllib.load(handle)
    except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"cannot read config file {path}: {error}") from None
    _check_tables(layer, str(path))
    _anchor_scripts(layer, path.parent)
    return layer


def _anchor_scripts(layer: dict[str, Any], base: Path) -> None:
    """A config file's ``scripted:PATH`` models are read relative to the file, as a path in a
    file is, not to wherever kgot runs from."""
    llm = layer.get("llm")
    if not isinstance(llm, dict):
        return
    for table in (llm, *(llm.get(role) for role in (*ROLES, GRADER))):
        if isinstance(table, dict) and isinstance(table.get("model"), str):
            table["model"] = anchored_script(table["model"], base)


_TABLES = ("llm", "controller", "sandbox", "tools", "store", "ingest")
_LLM_TABLES = (*ROLES, "grader", "prices")


def _check_tables(layer: Mapping[str, Any], source: str) -> None:
    """Sections must be tables (``llm = 3`` would otherwise fail deep inside)."""
    for name in _TABLES:
        if name in layer and not isinstance(layer[name], Mapping):
            raise ConfigError(f"`{name}` in {source} must be a table ([{name}]), not a value")
    llm = layer.get("llm") or {}
    for name in _LLM_TABLES:
        if name in llm and not isinstance(llm[name], Mapping):
            raise ConfigError(
                f"`llm.{name}` in {source} must be a table ([llm.{name}]), not a value"
            )


def _spread_shared_llm(layer: Mapping[str, Any]) -> dict[str, Any]:
    """Copy shared `[llm]` model keys into each role unless the role table sets them itself."""
    result = {k: v for k, v in layer.items() if k != "llm"}
    llm = dict(layer.get("llm", {}))
    shared = {k: llm.pop(k) for k in list(llm) if k in _SHARED_LLM_KEYS}
    for role in ROLES:
        role_table = dict(llm.get(role, {}))
        llm[role] = {**shared, **role_table}
    grader_shared = {k: v for k, v in shared.items() if k != "model"}
    llm[GRADER] = {**grader_shared, **dict(llm.get(GRADER, {}))}
    result["llm"] = llm
    return result


def _dotted_to_nested(flat: Mapping[str, Any]) -> dict[str, Any]:
    nested: dict[str, Any] = {}
    for dotted, value in flat.items():
        node = nested
        *parents, leaf = dotted.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return nested


def _deep_merge(into: dict[str, Any], other: Mapping[str, Any]) -> None:
    for key, value in other.items():
        if isinstance(value, Mapping) and isinstance(into.get(key), dict):
            _deep_merge(into[key], value)
        elif isinstance(value, Mapping):
            into[key] = {}
            _deep_merge(into[key], value)
        else:
            into[key] = value


_URL_PASSWORD = re.compile(r"(://[^:/@\s]+:)[^@\s]*@")


def mask_url_password(text: str) -> str:
    """``postgresql://kgot:s3cret@db/kg`` → ``postgresql://kgot:***@db/kg``."""
    return _URL_PASSWORD.sub(r"\1***@", text)


def masked_dump(settings: Settings) -> dict[str, Any]:
    """The settings as plain data with every secret replaced by a mask (for `config show`):
    keys, and passwords inside URLs (database, endpoints)."""

    def mask(value: Any) -> Any:
        if isinstance(value, SecretStr):
            secret = value.get_secret_value()
            return "****" + secret[-4:] if len(secret) > 8 else "****"
        if isinstance(value, str):
            return mask_url_password(value)
        if isinstance(value, dict):
            return {k: mask(v) for k, v in value.items()}
        if isinstance(value, list):
            return [mask(v) for v in value]
        return value

    raw = {name: getattr(settings, name) for name in Settings.model_fields}
    return mask(_to_python(raw))


def public_dump(settings: Settings, *, without: tuple[str, ...] = ("store",)) -> dict[str, Any]:
    """The settings as plain data with every secret left out (not masked: absent) — keys and
    URLs holding a password — for keeping with a run so a resume can use the same options.
    Sections in ``without`` are dropped."""

    def secret(value: Any) -> bool:
        return isinstance(value, SecretStr) or (
            isinstance(value, str) and _URL_PASSWORD.search(value) is not None
        )

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if not secret(v)}
        if isinstance(value, list):
            return [strip(v) for v in value if not secret(v)]
        return value

    raw = {name: getattr(settings, name) for name in Settings.model_fields if name not in without}
    return strip(_to_python(raw))


def with_options(settings: Settings, *layers: Mapping[str, Any]) -> Settings:
    """``settings`` with nested option dicts laid over it in order (later wins); secrets and
    sections the layers leave out keep their values from ``settings``.

    Raises:
        ConfigError: a layer holds an invalid value.
    """
    merged = _to_python({name: getattr(settings, name) for name in Settings.model_fields})
    for layer in layers:
        _deep_merge(merged, layer)
    try:
        return Settings.model_validate(merged)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ConfigError(f"invalid setting `{where}`: {first['msg']}") from None


def _to_python(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return {name: _to_python(getattr(value, name)) for name in type(value).model_fields}
    if isinstance(value, dict):
        return {k: _to_python(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_to_python(v) for v in value]
    return value


def config_reference() -> str:
    """Every setting as a Markdown table: TOML key, environment variable, default, meaning.

    The `[llm]` keys are listed once; each can also be set per role in `[llm.planning]` and
    `[llm.execution]`.
    """
    env_for = {path: name for name, path in ENV_VARS.items()}
    rows = ["| key | environment | default | meaning |", "| --- | --- | --- | --- |"]

    def default_of(field: Any) -> str:
        extra = field.json_schema_extra
        if isinstance(extra, dict) and "default_doc" in extra:
            return str(extra["default_doc"])
        if field.default_factory is not None:
            value = field.default_factory()
            return f"`{value!r}`" if value not in ({}, []) else "empty"
        return "unset" if field.default is None else f"`{field.default!r}`"

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, field in model.model_fields.items():
            dotted = f"{prefix}{name}"
            annotation = field.annotation
            if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                if annotation is ModelSettings:
                    if name == "planning":  # the shared [llm] keys, listed once
                        walk(ModelSettings, f"{prefix}")
                    continue
                walk(annotation, f"{dotted}.")
                continue
            env = f"`{env_for[dotted]}`" if dotted in env_for else ""
            fallback = {v: k for k, v in ENV_FALLBACKS.items()}.get(dotted)
            if fallback:
                env += f", else `{fallback}`"
            rows.append(f"| `{dotted}` | {env} | {default_of(field)} | {field.description or ''} |")

    walk(Settings, "")
    extra = [
        "| `llm.planning.model` | `KGOT_PLANNING_MODEL` | unset | the planning role only |",
        "| `llm.execution.model` | `KGOT_EXECUTION_MODEL` | unset | the execution role only |",
        "| `llm.grader.model` | `KGOT_GRADER_MODEL` | unset: the planning model grades | "
        "benchmark grader (SimpleQA); `[llm.grader]` takes every `[llm]` key but `model` |",
        "| `llm.grader.base_url` | `KGOT_GRADER_BASE_URL` | `llm.base_url` | the grader's "
        "endpoint |",
        "| `llm.grader.api_key` | `KGOT_GRADER_API_KEY` | `llm.api_key` | the grader's API key |",
        "| `llm.grader.temperature` |  | `0` (unless set) | the grader's sampling temperature |",
    ]
    return "\n".join(rows[:2] + extra + rows[2:]) + "\n"
