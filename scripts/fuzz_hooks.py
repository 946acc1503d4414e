"""Schemathesis hooks for scripts/fuzz-api.sh (loaded with SCHEMATHESIS_HOOKS=fuzz_hooks).

Two kinds of rule cannot be written in the OpenAPI document, and each has an answer the API
gives on purpose; these hooks accept exactly those answers and nothing wider:

- Rules between fields (a `target` that does not suit the monitor's `kind`, `settings` that
  another kind takes, a `timeout_ms` above `interval_ms`, `pinned` without `poller_id`). JSON
  Schema cannot compare two fields, so a schema-valid body can break one; central then answers
  `400 invalid_combination` (never `invalid_field`, which is kept for rules the schema states).
  Likewise an id that names no object (`poller_id` of a pinned monitor): `400
  unknown_reference`. A positive case refused with one of these codes is not a schema gap.
- A state the document cannot know: an `If-Match` revision that is well formed but not the
  monitor's current one (it changed, or was never that) is `409 conflict`.
- `POST /api/poller/results` answers `200` with every malformed result listed in `rejected`, so
  that one bad result cannot sink a batch of good ones. A negative case answered that way was
  rejected, item by item.

And one cost: `GET /api/poller/assignments?wait=N` holds the request N seconds when nothing
changes (a long poll). Valid waits are cut to at most 1 s so the run takes seconds, not minutes;
waits outside 0..60 are left alone so that they are still sent and refused.
"""

import schemathesis

RESULTS = "POST /api/poller/results"
ASSIGNMENTS = "GET /api/poller/assignments"
MAX_WAIT = 60


def _json(response):
    try:
        return response.json()
    except Exception:  # not JSON: no exemption applies
        return None


@schemathesis.hook
def filter_failure(context, failure, case, response):
    """False drops the failure: only for the two deliberate answers described above."""
    body = _json(response)
    if not isinstance(body, dict):
        return True
    if failure.code == "ST202" and response.status_code == 400:
        return body.get("error") not in ("invalid_combination", "unknown_reference")
    if failure.code == "ST202" and response.status_code == 409:
        return body.get("error") != "conflict"
    if failure.code == "ST201" and case.operation.label == RESULTS and response.status_code == 200:
        return not body.get("rejected")
    return True


@schemathesis.hook
def map_query(context, query):
    if context.operation is None or context.operation.label != ASSIGNMENTS or not query:
        return query
    wait = query.get("wait")
    if isinstance(wait, int) and not isinstance(wait, bool) and 1 < wait <= MAX_WAIT:
        return {**query, "wait": 1}
    return query
