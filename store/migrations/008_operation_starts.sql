-- Unambiguous starts (DESIGN.md §4): the operation each Idempotency-Key started, so a retried
-- request answers the same workflow and run instead of a second start or a 409.
create table operation_starts (
  idempotency_key text primary key,
  -- what the key was used for (method and path): the same key on another request is refused
  request         text not null,
  workflow_id     text not null,
  run_id          text not null,
  kind            text not null,
  ui_url          text not null,
  created_at      timestamptz not null default now()
);
