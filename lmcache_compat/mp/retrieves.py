"""Failed multi-process retrieves become load errors, on every MP release (0.3.13 on).

LMCache's own ``LMCacheMPWorkerAdapter.get_finished`` reports a retrieve whose future resolved
``False`` as finished and, before 0.5.5, keeps its block ids out of
``get_block_ids_with_load_errors()`` (LMCache#2865, #3388): vLLM then decodes over blocks that
were never written. 0.3.13 ... 0.4.1 have no ``get_block_ids_with_load_errors`` at all.

:func:`read_records` reads, once at construction, how the installed release keeps its retrieve
results (from its source: the attribute ``submit_retrieve_request`` stores the future under, the
entry's shape, how the batched submit keys a batch, the future's result type);
:class:`RetrieveLedger` then watches each retrieve: its outcome is read when the release's future
has resolved (at submit on CPU transfer, where the release resolves it synchronously, else when
the release reports the request finished), and a retrieve that did not succeed puts exactly its
op's block ids into the next ``get_block_ids_with_load_errors()``, on the same ``get_finished``
pass that reports the request finished. The release's own errors (submit-time drops while
unhealthy, 0.4.2 on; failed results, 0.5.5 on; the unhealthy drain) are reported beside ours in
the same call, as one set: nothing is counted twice.
"""

from __future__ import annotations

import ast
import inspect
import logging
import operator
import textwrap
import typing
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from lmcache_compat.errors import NotAnEngineError

__all__ = ["DECLARED", "RetrieveLedger", "RetrieveRecords", "read_records"]

logger = logging.getLogger("lmcache_compat.mp")

#: A class without readable source may state how it keeps retrieve results: a
#: :class:`RetrieveRecords`, or ``None`` for an object without futures (the public fakes, whose
#: ``get_finished`` and ``get_block_ids_with_load_errors`` answer what a test sets).
DECLARED = "_lmcache_compat_retrieve_records"


@dataclass(frozen=True, slots=True)
class RetrieveRecords:
    """How one release keeps its retrieve futures (read by :func:`read_records`)."""

    #: The instance attribute ``submit_retrieve_request`` stores each entry in, keyed by id.
    attribute: str
    #: ``"pair"``: ``(future, ...)``; ``"bare"``: the future itself (0.3.15, 0.4.1).
    entry: Literal["pair", "bare"]
    #: ``"per-request"``: the batched submit calls the single one; ``"first-id"``: one future
    #: for the whole batch under its first request id (0.3.13, 0.3.14).
    batched: Literal["per-request", "first-id"]
    #: ``"bool"``: success is a true result; ``"all"``: a list of per-chunk flags, success when
    #: every chunk loaded (0.3.13, 0.3.14: a partial result is a failure).
    result: Literal["bool", "all"]


def _refuse(cls: type, version: str | None, what: str) -> NotAnEngineError:
    try:
        where = inspect.getsourcefile(cls)
    except TypeError:
        where = None
    return NotAnEngineError(
        f"{cls.__qualname__} (LMCache {version or 'unknown'}, {where or 'no source file'}): "
        f"cannot read how it keeps retrieve results ({what}), so a failed retrieve could not be "
        "reported as a load error; pass retrieve_records=RetrieveRecords(...) to MPWorkerAdapter, "
        "or report this release to lmcache-compat"
    )


def _method(tree: ast.ClassDef, name: str) -> ast.FunctionDef | None:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    return None


def _self_subscript_store(node: ast.AST) -> tuple[str, ast.expr, ast.expr] | None:
    """``self.<attr>[<key>] = <value>``: (attr, key, value)."""
    if not isinstance(node, ast.Assign) or len(node.targets) != 1:
        return None
    target = node.targets[0]
    if (
        isinstance(target, ast.Subscript)
        and isinstance(target.value, ast.Attribute)
        and isinstance(target.value.value, ast.Name)
        and target.value.value.id == "self"
    ):
        return target.value.attr, target.slice, node.value
    return None


def _result_kind(tree: ast.ClassDef, attribute: str, namespace: dict[str, Any]) -> str | None:
    """The future's type parameter in ``__init__``'s annotation of ``self.<attribute>``,
    resolved in the release's module: ``bool`` or ``list[bool]``."""
    init = _method(tree, "__init__")
    if init is None:
        return None
    for node in ast.walk(init):
        if not (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Attribute)
            and node.target.attr == attribute
        ):
            continue
        for sub in ast.walk(node.annotation):
            if (
                isinstance(sub, ast.Subscript)
                and isinstance(sub.value, ast.Name)
                and sub.value.id.endswith("Future")
                and isinstance(sub.slice, ast.Name)
            ):
                alias = namespace.get(sub.slice.id)
                if alias is bool:
                    return "bool"
                if typing.get_origin(alias) is list and typing.get_args(alias) == (bool,):
                    return "all"
    return None


def read_records(cls: type, version: str | None) -> RetrieveRecords | None:
    """How ``cls`` (a release's ``LMCacheMPWorkerAdapter``) keeps its retrieve results, read
    from its source; ``None`` where the class declares it has no futures (:data:`DECLARED`).
    Raises :class:`~lmcache_compat.errors.NotAnEngineError` (one line) where it cannot be read."""
    definer = next((k for k in cls.__mro__ if "submit_retrieve_request" in vars(k)), cls)
    try:
        source = textwrap.dedent(inspect.getsource(definer))
    except (OSError, TypeError) as exc:
        # no source: a class may say how it keeps them (the public fakes: no futures at all)
        for klass in cls.__mro__:
            if DECLARED in vars(klass):
                declared = vars(klass)[DECLARED]
                if declared is None or isinstance(declared, RetrieveRecords):
                    return declared
                raise _refuse(cls, version, f"{DECLARED} is {declared!r}") from None
        raise _refuse(cls, version, f"no source: {exc}") from None
    cls = definer
    module = inspect.getmodule(cls)
    found = records_from_source(source, vars(module) if module is not None else {})
    if isinstance(found, str):
        raise _refuse(cls, version, found)
    return found


def records_from_source(source: str, namespace: dict[str, Any]) -> RetrieveRecords | str:
    """:class:`RetrieveRecords` from the class's source (its module's names in
    ``namespace``), or what could not be read."""
    tree = next((n for n in ast.parse(source).body if isinstance(n, ast.ClassDef)), None)
    submit = _method(tree, "submit_retrieve_request") if tree is not None else None
    if tree is None or submit is None:
        return "no submit_retrieve_request in its source"
    key_name = submit.args.args[1].arg if len(submit.args.args) > 1 else None
    stores: list[tuple[str, str]] = []
    for node in ast.walk(submit):
        found = _self_subscript_store(node)
        if found is None:
            continue
        attr, key, value = found
        if not (isinstance(key, ast.Name) and key.id == key_name):
            continue
        if isinstance(value, ast.Tuple) and value.elts and isinstance(value.elts[0], ast.Name):
            stores.append((attr, "pair"))
        elif isinstance(value, ast.Name):
            stores.append((attr, "bare"))
    # the store whose __init__ annotation says it holds futures (0.4.7 on also keeps events)
    typed = [(a, e, r) for a, e in stores if (r := _result_kind(tree, a, namespace)) is not None]
    if not typed:
        return "submit_retrieve_request stores no future (annotated *Future[...]) under its id"
    attribute, entry, result = typed[0]
    batched = _batched_kind(tree, attribute)
    if batched is None:
        return "how batched_submit_retrieve_requests keys its futures"
    return RetrieveRecords(attribute, entry, batched, result)  # type: ignore[arg-type]


def _batched_kind(tree: ast.ClassDef, attribute: str) -> str | None:
    batched = _method(tree, "batched_submit_retrieve_requests")
    if batched is None:
        return "per-request"
    for node in ast.walk(batched):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "submit_retrieve_request"
        ):
            return "per-request"
        found = _self_subscript_store(node)
        if found is not None and found[0] == attribute:
            key = found[1]
            if (
                isinstance(key, ast.Subscript)
                and isinstance(key.slice, ast.Constant)
                and key.slice.value == 0
            ):
                return "first-id"
    return None


def flat_block_ids(op: Any) -> list[int]:
    """An op's block ids as one list (0.4.7 on: one list per KV cache group). Read only for a
    retrieve that failed."""
    ids = op.block_ids
    if ids and not isinstance(ids[0], int):
        return [b for group in ids for b in group]
    return list(ids)


class RetrieveLedger:
    """Our record of the retrieves in flight on one worker adapter (see the module doc)."""

    def __init__(
        self, engine: Any, records: RetrieveRecords, *, release_reports_drops: bool
    ) -> None:
        self._engine = engine
        self._store: Callable[[Any], dict[str, Any]] = operator.attrgetter(records.attribute)
        self._pair = records.entry == "pair"
        self._all = records.result == "all"
        self._first_id = records.batched == "first-id"
        #: a release with its own error set records a retrieve it drops at submit (0.4.2 on)
        self._release_reports_drops = release_reports_drops
        #: request id -> (future, op): submitted, future not yet resolved
        self.pending: dict[str, tuple[Any, Any]] = {}
        #: request id -> its op's block ids: known failed, reported when the release finishes it
        self.failed: dict[str, list[int]] = {}
        #: ids to report finished on the next pass whatever the release says (dropped at submit,
        #: or a future that raised, taken out of the release's records)
        self.finish: set[str] = set()
        self.errors: set[int] = set()

    # --- outcomes ---------------------------------------------------------------------------

    def _future(self, entry: Any) -> Any:
        return entry[0] if self._pair else entry

    def _outcome(self, request_id: str, future: Any) -> str | None:
        """``None``: the retrieve loaded every block; else why not. Only for a resolved
        future."""
        try:
            result = future.result()
        except Exception:
            # The one place an engine error becomes a per-request failure: a retrieve future
            # that raises concerns that request's blocks only. Reporting them as load errors
            # lets vLLM recompute the request; letting it propagate would stop the engine for
            # every request (the release's get_finished would raise on it at each step).
            logger.exception(
                "LMCache retrieve for request %s raised; its blocks are reported to vLLM as load "
                "errors (recomputed)",
                request_id,
            )
            return "raised"
        if self._all:
            return None if result and all(result) else f"partial result {result!r}"
        return None if result else f"result={result!r}"

    def _fail(self, request_id: str, op: Any) -> None:
        self.failed[request_id] = flat_block_ids(op)

    # --- submit ------------------------------------------------------------------------------

    def submitted(self, request_id: str, op: Any, key: str | None = None) -> None:
        entry = self._store(self._engine).get(key or request_id)
        if entry is None:  # dropped at submit (server unhealthy): never ran
            self.finish.add(request_id)
            if not self._release_reports_drops:
                self._fail(request_id, op)
            return
        future = self._future(entry)
        if not future.query():
            self.pending[request_id] = (future, op)
            return
        reason = self._outcome(request_id, future)
        if reason is None:
            return
        self._fail(request_id, op)
        if reason == "raised":  # the release must never read it: it would raise every step
            self._store(self._engine).pop(key or request_id, None)
            self.finish.add(request_id)

    def submitted_batch(self, request_ids: Sequence[str], ops: Sequence[Any]) -> None:
        first = request_ids[0] if self._first_id and request_ids else None
        for request_id, op in zip(request_ids, ops, strict=True):
            self.submitted(request_id, op, first)

    # --- get_finished -------------------------------------------------------------------------

    def settle(self, finished: set[str] | None) -> set[str] | None:
        """After the release's ``get_finished``: the load errors of the retrieves it reports
        finished (and ours to finish), recorded before this pass returns."""
        if not (self.pending or self.failed or self.finish):
            return finished
        done = set(finished) if finished else set()
        if self.finish:
            done |= self.finish
            self.finish = set()
        for request_id in done:
            ids = self.failed.pop(request_id, None)
            if ids is None:
                held = self.pending.pop(request_id, None)
                if held is None:
                    continue
                future, op = held
                if future.query() and self._outcome(request_id, future) is None:
                    continue
                ids = flat_block_ids(op)  # not resolved: the release drained it (unhealthy)
            self.errors.update(ids)
        return done if done or finished is not None else None

    def recover(self, call: Callable[[], Any]) -> Any:
        """The release's ``get_finished`` raised: take the futures that raise out of its
        records (each becomes a failed retrieve, logged once) and call it again; an error no
        future of ours explains propagates."""
        while True:
            try:
                return call()
            except Exception:
                culprits = [
                    rid
                    for rid, (future, _) in self.pending.items()
                    if future.query() and self._raises(future)
                ]
                if not culprits:
                    raise
                store = self._store(self._engine)
                for rid in culprits:
                    future, op = self.pending.pop(rid)
                    self._outcome(rid, future)  # logs it, once
                    store.pop(rid, None)
                    self._fail(rid, op)
                    self.finish.add(rid)

    @staticmethod
    def _raises(future: Any) -> bool:
        try:
            future.result()
        except Exception:
            return True
        return False

    def load_errors(self, release: Callable[[], set[int]] | None) -> Callable[[], set[int]]:
        """``get_block_ids_with_load_errors()``: the release's (where it has one) and ours, one
        set, each reported once."""
        if release is None:

            def ours_only() -> set[int]:
                errors, self.errors = self.errors, set()
                return errors

            return ours_only

        def with_release() -> set[int]:
            errors = release()
            if self.errors:
                errors = set(errors) | self.errors
                self.errors = set()
            return errors

        return with_release


def tracked_submit(submit: Callable[..., Any], ledger: RetrieveLedger) -> Callable[..., Any]:
    def submit_retrieve_request(request_id: str, op: Any, event: Any, **kwargs: Any) -> Any:
        out = submit(request_id, op, event, **kwargs)
        ledger.submitted(request_id, op)
        return out

    return submit_retrieve_request


def tracked_batched(submit: Callable[..., Any], ledger: RetrieveLedger) -> Callable[..., Any]:
    def batched_submit_retrieve_requests(
        request_ids: Iterable[str], ops: Iterable[Any], event: Any, **kwargs: Any
    ) -> Any:
        ids, op_list = list(request_ids), list(ops)
        out = submit(ids, op_list, event, **kwargs)
        ledger.submitted_batch(ids, op_list)
        return out

    return batched_submit_retrieve_requests


def tracked_finished(
    get_finished: Callable[..., tuple[Any, Any]], ledger: RetrieveLedger
) -> Callable[..., tuple[Any, Any]]:
    """``get_finished(finished_req_ids)`` or ``get_finished_with_lazy_offload()``."""

    def finished(*args: Any) -> tuple[Any, Any]:
        try:
            stores, retrieves = get_finished(*args)
        except Exception:
            stores, retrieves = ledger.recover(lambda: get_finished(*args))
        return stores, ledger.settle(retrieves)

    return finished
