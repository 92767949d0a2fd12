"""The configuration loader honours ``LMCACHE_CONFIG_FILE`` on every release (decided from
``lmcache_get_config``'s signature), import failures name their real cause, and the drop-ins
for sglang <= 0.5.12 replace LMCache's names once. The sglang tier runs them over the real
releases."""

from __future__ import annotations

import os
import sys
import types
from typing import Any

import pytest

from lmcache_compat.errors import UpstreamNotFoundError
from lmcache_compat.sglang import SGLangImportError, SGLangLayerwiseAdapter, load_config
from lmcache_compat.sglang import upstream as up
from lmcache_compat.sglang.upstream import CONFIG_ENV, find_sglang
from lmcache_compat.upstream import locations as loc
from lmcache_compat.upstream.matrix import load_matrix
from lmcache_compat.upstream.resolve import Where
from tools.generated_fakes import fake_module


def _env_reader() -> Any:
    """``lmcache_get_config()`` of 0.3.1 ... 0.4.5: reads the environment only."""
    return ("env", os.environ.get(CONFIG_ENV))


def _path_reader(config_file: str = "") -> Any:
    """``lmcache_get_config(config_file="")`` of 0.4.6 ... 0.5.6: ignores the environment."""
    return ("path", config_file)


@pytest.mark.parametrize(
    ("function", "given", "env", "expected"),
    [
        (_env_reader, "a.yaml", None, ("env", "a.yaml")),
        (_env_reader, None, "e.yaml", ("env", "e.yaml")),
        (_env_reader, None, None, ("env", None)),
        (_path_reader, "a.yaml", "e.yaml", ("path", "a.yaml")),
        (_path_reader, None, "e.yaml", ("path", "e.yaml")),  # what LMCache itself ignores
        (_path_reader, None, None, ("path", "")),
    ],
)
def test_load_config_honours_the_environment_on_every_release(
    function: Any,
    given: str | None,
    env: str | None,
    expected: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(up, "find_sglang", lambda place: function)
    if env is None:
        monkeypatch.delenv(CONFIG_ENV, raising=False)
    else:
        monkeypatch.setenv(CONFIG_ENV, env)
    assert load_config(given) == expected
    assert os.environ.get(CONFIG_ENV) == env  # restored


def test_a_failed_import_names_its_real_cause(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(place: loc.Place) -> Any:
        raise ModuleNotFoundError("No module named 'einops'", name="einops")

    monkeypatch.setattr(
        up, "where", lambda place: Where("lmcache.integration.sglang.x", "known", place.name)
    )
    monkeypatch.setattr(up, "find", broken)
    with pytest.raises(SGLangImportError) as info:
        find_sglang(loc.SGLANG_LAYERWISE)
    text = str(info.value)
    assert "lmcache.integration.sglang.x" in text and "No module named 'einops'" in text
    assert "HINT: pip install einops" in text and "\n" not in text
    assert isinstance(info.value.__cause__, ModuleNotFoundError)


def test_a_release_without_the_class_names_the_releases_that_have_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def missing(place: loc.Place) -> Any:
        raise UpstreamNotFoundError("not here")

    monkeypatch.setattr(up, "where", missing)
    with pytest.raises(UpstreamNotFoundError, match=r"lmcache>=0\.3\.6,<0\.5\.7rc2"):
        find_sglang(loc.SGLANG_LAYERWISE)


def test_the_drop_ins_replace_lmcache_s_names_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from lmcache_compat.sglang import legacy

    fakes = fake_module(load_matrix().row("0.5.6"))
    module = types.ModuleType("fake_sglang_adapter")
    for name in (
        loc.SGLANG_LAYERWISE.name,
        loc.SGLANG_LOAD_METADATA.name,
        loc.SGLANG_STORE_METADATA.name,
    ):
        setattr(module, name, getattr(fakes, name))
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(legacy, "find_sglang", lambda place: getattr(fakes, place.name))
    monkeypatch.setattr(legacy, "where", lambda place: Where(module.__name__, "known", place.name))
    monkeypatch.setenv(CONFIG_ENV, "env.yaml")
    legacy.install()
    first = module.LMCacheLayerwiseConnector
    legacy.install()
    assert module.LMCacheLayerwiseConnector is first  # idempotent
    # sglang <= 0.5.12's call: no config_file, its GroupCoordinator as tp_group
    coordinator = types.SimpleNamespace(device_group="torch-group")
    connector = module.LMCacheLayerwiseConnector(
        sgl_config=None, tp_size=1, rank=0, k_pool=[], v_pool=[], tp_group=coordinator
    )
    assert isinstance(connector, SGLangLayerwiseAdapter)
    passed = connector.target._init[1]
    assert passed["config_file"] == "env.yaml" and passed["tp_group"] == "torch-group"
    load = module.LoadMetadata(token_ids=[1], slot_mapping="s", offset=0)
    assert (load.token_ids, load.prefix_pad, load.request_id) == ([1], 0, "")
