"""The mutation tier: plausible next LMCache releases, each the newest real release (the newest
row of the shipped matrix, pre-releases included, installed with ``uv pip install --no-deps``)
with ONE change, checked by ``scan``, ``diff``, ``doctor --json``, ``resolve`` and the adapters
built over the real changed classes beside real vLLM (``tox run -e mutation``).

The change kinds (:mod:`tests.tiers.mutation.mutations`; what each must give:
:mod:`tests.tiers.mutation.expected`):

- the MP scheduler class moved to a new module, the old module re-exporting it with
  ``from new import *``; the same with an explicit ``from new import Class``; moved with no
  re-export; the in-process connector moved, a star re-export left;
- the class renamed, a deprecated alias ``Old = New`` kept;
- its lookup methods moved to a mixin class in another file;
- the arguments after ``request_id`` of ``maybe_submit_lookup_request`` made keyword-only;
- an optional parameter added;
- the packed token ids' annotation widened (``bytes`` -> ``bytes | memoryview``); an annotation
  narrowed (``X | None`` -> ``X``); ``X | None`` spelled ``Optional[X]``;
  ``from __future__ import annotations``; a quoted annotation; the engine's ``Optional[X]`` /
  ``Union[X, Y]`` spelled ``X | None`` / ``X | Y``;
- the arguments of the engine's ``lookup`` after its first made keyword-only; the same for the
  MP worker's store submits (single and batched) after the request id(s);
- and the kinds LMCache has made so far (``lmcache-compat diff`` over consecutive releases of the
  shipped matrix): a method added, a parameter became optional, the return type changed, a
  method that returned ``None`` now returns a value, a parameter renamed, parameters reordered,
  a parameter removed, a required parameter added (the keyword-only change above is its
  "parameter kind changed", the narrowed annotation its "parameter type changed"). Not
  generated: "parameter became required" (a default cannot be dropped alone while later
  parameters keep theirs; LMCache did it to a last parameter) and "class added" (``diff``
  compares the catalog's classes only);
- an optional capability method removed (the in-process connector's ``get_kv_events``);
- two candidates: the class gone from its known path and defined in two other modules.

The adapters' calls are checked too: each call the MP scheduler, MP worker and engine adapters
make reaches the real class's method (replaced on the instance by a recorder), binds to its
signature, and hands it the caller's values (and the release's own packing of the token ids).
A move with no re-export is not generated for the connector and the engine: 0.5.7rc2 made
exactly those moves, so they are real rows of the matrix.
"""
