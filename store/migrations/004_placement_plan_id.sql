-- The plan whose apply wrote each placement: a retried write (its reply was lost) recognises its
-- own earlier success by it instead of failing its own compare-and-set.
alter table placements add column plan_id text;
