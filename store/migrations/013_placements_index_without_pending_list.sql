-- Every heartbeat finds its runtime's placed tasks through placements_assignments_idx (010). A GIN
-- index's pending list (fastupdate, on by default) holds new entries unsorted until a vacuum or
-- 4 MB of them: each lookup then reads the whole list, and the planner, counting its pages,
-- prefers to read every placement. After 10,000 placements were written at once, a heartbeat took
-- 12 ms instead of 1 (test/component/heartbeat.test.ts, bench/fleet.ts). Placements are written a
-- few times a minute and read by every heartbeat (hundreds a second): entries go straight into the
-- index, and what the list holds now is moved there.
alter index placements_assignments_idx set (fastupdate = off);
select gin_clean_pending_list('placements_assignments_idx'::regclass);
