-- Every heartbeat asks which tasks placements assign to its runtime (its answer revokes the
-- others): without an index that is a scan of every placement per heartbeat, a cost that grows with
-- runtimes × workloads. jsonb_path_ops serves `assignments @> '[{"runtimeId": ...}]'`.
create index placements_assignments_idx on placements using gin (assignments jsonb_path_ops);
