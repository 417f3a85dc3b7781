-- Each runtime's own credential (DESIGN.md §3 "Credentials"): issued when the agent token registers
-- a new runtime (or one whose lease lapsed), returned once in that answer, then presented by the
-- agent on its heartbeats and re-registrations, and by the control plane when it calls that agent.
-- Kept as the secret itself, because the control plane must present it, not only verify it; no
-- query that answers a route returns this column. Null only for rows registered before credentials
-- existed: the agent token may claim such a row once, even while its lease runs.
alter table runtimes add column credential text;
