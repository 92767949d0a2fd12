"""Hypothesis strategies shared by the unit tier and the real-import tier."""

from __future__ import annotations

from hypothesis import strategies as st

from lmcache_compat import MPConfig


def _config(
    *,
    urls: list[str],
    world: int,
    rank: int,
    tp: int,
    pp: int,
    dcp: int,
    mla: bool,
    timeout: float | None,
    extra: dict[str, int] | None,
    kv_events: bool,
) -> MPConfig:
    size = world * tp
    return MPConfig(
        urls if len(urls) > 1 else urls[0],  # one URL is passed as a bare string
        "model",
        16,
        world_size=size,
        rank=rank % size,
        tp_size=tp,
        pp_size=pp,
        dcp_size=dcp,
        use_mla=mla,
        mq_timeout=timeout,
        heartbeat_interval=timeout,
        extra_config=extra,
        enable_kv_events=kv_events,
    )


#: Any caller facts an MP adapter may be built from: 1-3 servers, world sizes, ranks, tp, pp,
#: dcp, MLA, timeouts, extra config and KV events.
mp_configs = st.builds(
    _config,
    urls=st.lists(
        st.from_regex(r"tcp://[a-z]{1,5}:[0-9]{1,4}", fullmatch=True), min_size=1, max_size=3
    ),
    world=st.integers(1, 4),
    rank=st.integers(0, 63),
    tp=st.sampled_from([1, 2, 4]),
    pp=st.integers(1, 2),
    dcp=st.integers(1, 2),
    mla=st.booleans(),
    timeout=st.one_of(st.none(), st.floats(0.1, 10)),
    extra=st.one_of(
        st.none(), st.dictionaries(st.sampled_from(["a", "b"]), st.integers(), max_size=2)
    ),
    kv_events=st.booleans(),
)
