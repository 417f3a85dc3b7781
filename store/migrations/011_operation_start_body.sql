-- Requests mean one thing (issue 33, DESIGN.md §4 "Unambiguous starts"): an Idempotency-Key is bound
-- to the method, path and body of the request that used it first. body_sha256 is the sha256 of the
-- validated body's canonical JSON (api/operations.ts canonicalBodyHash); a key used again with
-- another body is refused (422 idempotency-key-reused). Rows recorded before this migration have
-- none: their keys stay bound to the method and path only.
alter table operation_starts add column body_sha256 text;

