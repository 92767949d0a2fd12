"""The supported API, stated once: :data:`SUPPORTED` lists every supported name by the path
users import it from. The rest of the package is internal by one rule (:func:`is_internal`):
its ``__all__`` says what a module lends to the package's other modules, not what is promised.

Supported names keep their meaning within a minor release; a name leaves the list only after a
minor release of :class:`DeprecationWarning`, as the modules in :data:`MOVED` do. docs/api.md is
generated from this module (``python scripts/update_docs.py``) and ``tests/test_api.py`` ties it
to every module's ``__all__``, the packages' lazy tables and the docs.

Adding a public name is one line here (``"lmcache_compat.vllm.NewName",``) beside its module's
``__all__`` (and its lazy table, for a package), then ``python scripts/update_docs.py``.
"""

from __future__ import annotations

#: Every supported name, as ``<module>.<name>``: the module is the one users import it from.
SUPPORTED: tuple[str, ...] = (
    # lmcache_compat
    "lmcache_compat.__version__",
    "lmcache_compat.AmbiguousLocationError",
    "lmcache_compat.Capabilities",
    "lmcache_compat.Capability",
    "lmcache_compat.CapabilitySpec",
    "lmcache_compat.CATALOG",
    "lmcache_compat.clear_probe_cache",
    "lmcache_compat.ConnectorAdapter",
    "lmcache_compat.EngineAdapter",
    "lmcache_compat.get_or_create_engine",
    "lmcache_compat.installed_lmcache_version",
    "lmcache_compat.LMCacheCompatError",
    "lmcache_compat.LMCacheVersionError",
    "lmcache_compat.MalformedResultError",
    "lmcache_compat.MissingCapabilityError",
    "lmcache_compat.MPConfig",
    "lmcache_compat.MPSchedulerAdapter",
    "lmcache_compat.MPServerError",
    "lmcache_compat.MPServerURLError",
    "lmcache_compat.MPVersionMismatchError",
    "lmcache_compat.MPWorkerAdapter",
    "lmcache_compat.NotAFrontEndError",
    "lmcache_compat.NotAnEngineError",
    "lmcache_compat.parse_version",
    "lmcache_compat.probe",
    "lmcache_compat.UnknownCapabilityError",
    "lmcache_compat.UnreadableMethodWarning",
    "lmcache_compat.UnsupportedArgumentError",
    "lmcache_compat.UpstreamNotFoundError",
    # lmcache_compat.errors
    "lmcache_compat.errors.AmbiguousLocationError",
    "lmcache_compat.errors.BudgetExceededError",
    "lmcache_compat.errors.ConfigFileError",
    "lmcache_compat.errors.DataFileError",
    "lmcache_compat.errors.InvalidSourceError",
    "lmcache_compat.errors.LMCacheCompatError",
    "lmcache_compat.errors.LMCacheVersionError",
    "lmcache_compat.errors.MalformedResultError",
    "lmcache_compat.errors.MetadataError",
    "lmcache_compat.errors.MigrationError",
    "lmcache_compat.errors.MissingCapabilityError",
    "lmcache_compat.errors.MissingExtraError",
    "lmcache_compat.errors.MPFlagsError",
    "lmcache_compat.errors.MPServerError",
    "lmcache_compat.errors.MPServerURLError",
    "lmcache_compat.errors.MPVersionMismatchError",
    "lmcache_compat.errors.NotAFrontEndError",
    "lmcache_compat.errors.NotAnEngineError",
    "lmcache_compat.errors.NotInMatrixError",
    "lmcache_compat.errors.NotLMCacheError",
    "lmcache_compat.errors.OutputError",
    "lmcache_compat.errors.ScanError",
    "lmcache_compat.errors.SourceNotFoundError",
    "lmcache_compat.errors.SourceTooLargeError",
    "lmcache_compat.errors.UnknownCapabilityError",
    "lmcache_compat.errors.UnreadableArchiveError",
    "lmcache_compat.errors.UnsafeConfigError",
    "lmcache_compat.errors.UnsupportedArgumentError",
    "lmcache_compat.errors.UpstreamNotFoundError",
    # lmcache_compat.vllm
    "lmcache_compat.vllm.CompatKVEvents",
    "lmcache_compat.vllm.CONNECTOR_NAME",
    "lmcache_compat.vllm.LMCacheCompatConnector",
    "lmcache_compat.vllm.LMCacheCompatMPConnector",
    "lmcache_compat.vllm.MP_CONNECTOR_NAME",
    "lmcache_compat.vllm.register",
    "lmcache_compat.vllm.VllmFacts",
    # lmcache_compat.mp
    "lmcache_compat.mp.mp_init_kwargs",
    "lmcache_compat.mp.MPConfig",
    "lmcache_compat.mp.MPSchedulerAdapter",
    "lmcache_compat.mp.MPWorkerAdapter",
    # lmcache_compat.sglang
    "lmcache_compat.sglang.BACKEND_NAME",
    "lmcache_compat.sglang.BackendRefused",
    "lmcache_compat.sglang.CompletedFuture",
    "lmcache_compat.sglang.load_config",
    "lmcache_compat.sglang.MetadataBuilder",
    "lmcache_compat.sglang.Plan",
    "lmcache_compat.sglang.plan",
    "lmcache_compat.sglang.register",
    "lmcache_compat.sglang.SGLangImportError",
    "lmcache_compat.sglang.SGLangLayerwiseAdapter",
    "lmcache_compat.sglang.SGLangMPAdapter",
    "lmcache_compat.sglang.SGLangUnifiedAdapter",
    "lmcache_compat.sglang.torch_group",
    "lmcache_compat.sglang.Variant",
    "lmcache_compat.sglang.VARIANTS",
    # lmcache_compat.sglang.legacy
    "lmcache_compat.sglang.legacy.install",
    "lmcache_compat.sglang.legacy.MARK",
    # lmcache_compat.config
    "lmcache_compat.config.check_active",
    "lmcache_compat.config.check_config",
    "lmcache_compat.config.check_environment",
    "lmcache_compat.config.check_file",
    "lmcache_compat.config.Finding",
    "lmcache_compat.config.migrate_file",
    "lmcache_compat.config.translate_mp_flags",
    # lmcache_compat.testing
    "lmcache_compat.testing.Call",
    "lmcache_compat.testing.double",
    "lmcache_compat.testing.double_class",
    "lmcache_compat.testing.empty_value",
    "lmcache_compat.testing.fail_loads",
    "lmcache_compat.testing.Fake",
    "lmcache_compat.testing.fake",
    "lmcache_compat.testing.fake_class",
    "lmcache_compat.testing.fake_module",
    "lmcache_compat.testing.FAULTS",
    "lmcache_compat.testing.Injected",
    "lmcache_compat.testing.installed_row",
    "lmcache_compat.testing.kv_events",
    "lmcache_compat.testing.lost_reply",
    "lmcache_compat.testing.queue",
    "lmcache_compat.testing.real_class",
    "lmcache_compat.testing.release_row",
    "lmcache_compat.testing.set_delay",
    "lmcache_compat.testing.set_raises",
    "lmcache_compat.testing.set_result",
    "lmcache_compat.testing.short_retrieve",
    "lmcache_compat.testing.slow_wait_for_save",
    "lmcache_compat.testing.unhealthy",
    "lmcache_compat.testing.UNSET",
    # lmcache_compat.testing.pytest_plugin
    "lmcache_compat.testing.pytest_plugin.INSTALLED",
    "lmcache_compat.testing.pytest_plugin.Release",
    "lmcache_compat.testing.pytest_plugin.release_for",
)

#: Modules and packages with no underscore that are internal all the same (a package covers its
#: modules) -> what they are: the machinery the supported names are built from. What users need
#: of them is re-exported at the top level.
INTERNAL: dict[str, str] = {
    "lmcache_compat.core": "the catalog, probes and adapters (`CATALOG`, `probe`, "
    "`ConnectorAdapter`... at the top level)",
    "lmcache_compat.engine": "the `LMCacheEngine` adapter (`EngineAdapter`, "
    "`get_or_create_engine` at the top level)",
    "lmcache_compat.report": "the command line and its text (the commands are its interface)",
    "lmcache_compat.scan": "the static scanner (`lmcache-compat scan`)",
    "lmcache_compat.upstream": "what is known of upstream, and the shipped data's readers",
    "lmcache_compat.budgets": "the limits every reader works within (scans, configuration "
    "files, versions)",
    "lmcache_compat.distributions": "which installed distributions provide an import package",
    "lmcache_compat.inputs": "the reader contract of every text lmcache-compat parses",
    "lmcache_compat.installation": "where this lmcache-compat came from, and the install command "
    "that works there",
    "lmcache_compat.versions": "installed versions, read from metadata "
    "(`installed_lmcache_version`, `parse_version` at the top level)",
}

#: Deprecated module -> (its new home, the release that removes the old path). Importing the
#: old path gives the new module and one DeprecationWarning (:func:`moved`).
MOVED: dict[str, tuple[str, str]] = {
    "lmcache_compat.locations": ("lmcache_compat.upstream.locations", "0.3.0"),
    "lmcache_compat.resolve": ("lmcache_compat.upstream.resolve", "0.3.0"),
    "lmcache_compat.mp_server": ("lmcache_compat.mp.server", "0.3.0"),
    "lmcache_compat.config.envcheck": ("lmcache_compat.config.check", "0.3.0"),
}

#: Deprecated module -> what to use instead: the supported names that replace it, or, where
#: none does, that its new home is internal and the supported API that covers the need. The
#: deprecation warning and docs/api.md say it (``tests/test_api.py`` ties each name here to
#: :data:`SUPPORTED`).
INSTEAD: dict[str, str] = {
    "lmcache_compat.locations": (
        "its new home is internal; the adapters (lmcache_compat.ConnectorAdapter, "
        "lmcache_compat.MPSchedulerAdapter, lmcache_compat.MPWorkerAdapter) find LMCache's "
        "classes themselves, and lmcache_compat.probe says what a release offers"
    ),
    "lmcache_compat.resolve": (
        "its new home is internal; the adapters (lmcache_compat.ConnectorAdapter, "
        "lmcache_compat.MPSchedulerAdapter, lmcache_compat.MPWorkerAdapter) find LMCache's "
        "classes themselves, and lmcache_compat.probe says what a release offers"
    ),
    "lmcache_compat.mp_server": (
        "its new home is internal; lmcache_compat.MPSchedulerAdapter and "
        "lmcache_compat.MPWorkerAdapter check the server's release when they connect "
        "(lmcache_compat.MPVersionMismatchError, lmcache_compat.MPServerError)"
    ),
    "lmcache_compat.config.envcheck": (
        "use lmcache_compat.config.check_environment (supported; also check_active, "
        "check_file, check_config and Finding)"
    ),
}


def supported_modules() -> dict[str, list[str]]:
    """Each module supported names are imported from -> its supported names, in list order."""
    out: dict[str, list[str]] = {}
    for dotted in SUPPORTED:
        module, name = dotted.rsplit(".", 1)
        out.setdefault(module, []).append(name)
    return out


def is_internal(module: str) -> bool:
    """The rule: a module is internal if a part of its name starts with ``_``, if
    :data:`INTERNAL` covers it, or if it is a module of a supported subpackage that the list
    does not name (``lmcache_compat.vllm.connector``: its supported names are the package's)."""
    supported = supported_modules()
    if module in supported:
        return False
    if any(part.startswith("_") for part in module.split(".")):
        return True
    if any(module == p or module.startswith(p + ".") for p in INTERNAL):
        return True
    parent = module.rpartition(".")[0]
    return parent != "lmcache_compat" and any(
        parent == m or parent.startswith(m + ".") for m in supported if m != "lmcache_compat"
    )


def moved(old: str) -> None:
    """Make ``old`` (a module of :data:`MOVED` being imported) its new module, and warn once
    (a module is executed once per process)."""
    import importlib
    import sys
    import warnings

    new, removed_in = MOVED[old]
    warnings.warn(
        f"{old} is deprecated and removed in lmcache-compat {removed_in}: {INSTEAD[old]} "
        f"(its code is now {new})",
        DeprecationWarning,
        stacklevel=3,  # the importer: this function, the old module, then (importlib skipped) it
    )
    sys.modules[old] = importlib.import_module(new)
