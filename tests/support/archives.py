"""Build wheels, sdists and source trees for scanner tests (the tests make their own inputs)."""

from __future__ import annotations

import io
import stat
import tarfile
import zipfile
from collections.abc import Mapping
from pathlib import Path

V1 = "lmcache/integration/vllm/vllm_v1_adapter.py"
MP = "lmcache/integration/vllm/vllm_multi_process_adapter.py"
ENGINE = "lmcache/v1/cache_engine.py"

#: A minimal LMCache 0.3.10.post2-shaped adapter module.
ADAPTER_0_3_10_POST2 = """
from __future__ import annotations
from typing import Optional

class LMCacheConnectorV1Impl:
    def __init__(self, vllm_config, role, parent): ...
    def start_load_kv(self, forward_context, **kwargs) -> None: ...
    def wait_for_layer_load(self, layer_name: str) -> None: ...
    def save_kv_layer(self, layer_name, kv_layer, attn_metadata, **kwargs) -> None: ...
    def wait_for_save(self): ...
    def get_finished(self, finished_req_ids): ...
    def get_block_ids_with_load_errors(self) -> set[int]: ...
    def shutdown(self): ...
    def get_num_new_matched_tokens(self, request, num_computed_tokens: int) -> Optional[int]: ...
    def update_state_after_alloc(self, request, num_external_tokens: int): ...
    def build_connector_meta(self, scheduler_output): ...
    def request_finished(self, request, block_ids): ...
    def get_kv_events(self): ...
"""

#: A minimal LMCache 0.3.10.post2-shaped ``LMCacheEngine``.
ENGINE_0_3_10_POST2 = """
class LMCacheEngine:
    def store(self, tokens, mask=None, **kwargs): ...
    def retrieve(self, tokens, mask=None, **kwargs): ...
    def lookup(self, tokens, hashes=None, offsets=None, search_range=None, lookup_id=None,
               pin=False, request_configs=None): ...
    def close(self): ...
    def get_kv_events(self): ...
"""


def metadata(name: str, version: str) -> bytes:
    return f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n".encode()


def make_wheel(
    path: Path,
    files: Mapping[str, bytes | str],
    *,
    name: str = "lmcache",
    version: str = "0.3.10.post2",
    symlinks: dict[str, str] | None = None,
    raw_names: dict[str, bytes] | None = None,
) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(f"{name}-{version}.dist-info/METADATA", metadata(name, version))
        for member, data in files.items():
            zf.writestr(member, data.encode() if isinstance(data, str) else data)
        for member, target in (symlinks or {}).items():
            info = zipfile.ZipInfo(member)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            zf.writestr(info, target)
        for member, data in (raw_names or {}).items():
            zf.writestr(zipfile.ZipInfo(member), data)
    return path


def _add(tf: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tf.addfile(info, io.BytesIO(data))


def make_sdist(
    path: Path,
    files: Mapping[str, bytes | str],
    *,
    name: str = "lmcache",
    version: str = "0.3.0",
    links: dict[str, str] | None = None,
    hardlinks: dict[str, str] | None = None,
    root: str | None = None,
) -> Path:
    root = root if root is not None else f"{name}-{version}"
    with tarfile.open(path, "w:gz") as tf:
        _add(tf, f"{root}/PKG-INFO", metadata(name, version))
        for member, data in files.items():
            _add(
                tf,
                f"{root}/{member}" if root else member,
                data.encode() if isinstance(data, str) else data,
            )
        for member, target in (links or {}).items():
            info = tarfile.TarInfo(f"{root}/{member}")
            info.type = tarfile.SYMTYPE
            info.linkname = target
            tf.addfile(info)
        for member, target in (hardlinks or {}).items():
            info = tarfile.TarInfo(f"{root}/{member}")
            info.type = tarfile.LNKTYPE
            info.linkname = target
            tf.addfile(info)
    return path


def make_tree(root: Path, files: Mapping[str, str | bytes]) -> Path:
    for member, data in {"lmcache/__init__.py": "", **files}.items():
        p = root / member
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data.encode() if isinstance(data, str) else data)
    return root
