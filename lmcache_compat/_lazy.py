"""Names a package defines in its submodules, imported on first use (PEP 562): the one
``__getattr__``/``__dir__`` pair ``lmcache_compat`` and ``lmcache_compat.vllm`` both use, so
importing either package imports none of the modules its names live in."""

from __future__ import annotations

from collections.abc import Callable, Mapping

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import Any


def lazy_names(
    package: str, table: Mapping[str, str], namespace: dict[str, Any], public: list[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of ``package``: a name in ``table`` (name ->
    module) is imported from its module on first use and kept in ``namespace``."""

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        import importlib  # lazy: the point of the table (the module may import vLLM)

        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(public)

    return __getattr__, __dir__
